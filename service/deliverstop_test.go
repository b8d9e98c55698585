package service_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
	"paynotify/webhook"
)

// answered is the real sender, counting the answers it has handed back.
type answered struct {
	*webhook.Sender
	n atomic.Int64
}

func (a *answered) Send(ctx context.Context, url, id string, secrets []string, body []byte) webhook.Result {
	res := a.Sender.Send(ctx, url, id, secrets, body)
	a.n.Add(1)
	return res
}

// A deliverer stopped before the round that would record its finished
// attempts records them as it stops: they are DELIVERED, and a second
// deliverer past the first one's leases sends none of them again.
func TestWebhookStopRecordsFinishedAttempts(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		rc := newReceiver(t, ok200)
		ep := r.create(rc)
		evs := []model.Event{r.event(model.EventOrderPaid, 31, paidData(31)), r.event(model.EventOrderPaid, 32, paidData(32)),
			r.event(model.EventOrderPaid, 33, paidData(33))}
		f := service.NewFanout(store)
		waitFor(t, "the deliveries fanned out", func() bool {
			if _, err := f.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			ds, err := store.WebhookDeliveries(context.Background(), ep.ID, model.DeliveryPending, time.Time{}, 10)
			return err == nil && len(ds) == len(evs)
		})

		sender := &answered{Sender: webhook.NewSender(r.hooks.Policy(), 5*time.Second)}
		d := service.NewDeliverer(store, r.keys, sender, slog.New(slog.DiscardHandler))
		d.Concurrency, d.Lease = len(evs)+1, time.Minute
		ctx, cancel := context.WithCancel(context.Background())
		// One round by hand, and no other: what it sends is held, to be
		// recorded by a round that never comes.
		if n, err := d.RunOnce(ctx); err != nil || n != len(evs) {
			t.Fatalf("round: %d claimed, %v; want %d", n, err, len(evs))
		}
		waitFor(t, "every answer back", func() bool { return sender.n.Load() == int64(len(evs)) })
		cancel()
		d.Wait()
		for _, ev := range evs {
			if dl, ok := r.deliveryOf(ep.ID, ev.ID); !ok || dl.State != model.DeliveryDelivered {
				t.Errorf("delivery of %s is %q after the stop, want DELIVERED", ev.ID, dl.State)
			}
		}

		later := service.NewDeliverer(store, r.keys, webhook.NewSender(r.hooks.Policy(), 5*time.Second), slog.New(slog.DiscardHandler))
		later.Lease = time.Minute
		service.SetDelivererClock(later, func() time.Time { return time.Now().Add(2 * d.Lease) })
		if _, err := later.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		later.Wait()
		for _, ev := range evs {
			if n := rc.count(ev.ID); n != 1 {
				t.Errorf("event %s received %d times, want once", ev.ID, n)
			}
		}
		rc.checkVerified()
	})
}
