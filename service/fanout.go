package service

import (
	"context"
	"time"

	"paynotify/dao"
	"paynotify/model"
	"paynotify/webhook"
)

// Fanout turns each committed outbox event into one delivery per enabled
// endpoint that subscribes to its type. It reads the outbox the NATS
// relay reads, but neither waits for the other: the relay marks rows
// sent, Fanout clears their webhook_pending flag. It runs off the notify
// path, in transactions of its own that hold the fan-out lock (one
// instance fans out at a time); a row is no longer pending only in the
// transaction that wrote its deliveries, so no event is lost to a crash
// or to ids committing out of order.
type Fanout struct {
	store *dao.Store
	// Batch is how many outbox rows one round fans out.
	Batch int
	// Interval is how long an idle fan-out waits before looking again.
	Interval time.Duration
	// OnFannedOut, if set, is told each round's deliveries made.
	OnFannedOut func(events, deliveries int)
	now         func() time.Time
}

// NewFanout returns the fan-out job with default tuning.
func NewFanout(store *dao.Store) *Fanout {
	return &Fanout{store: store, Batch: 500, Interval: 200 * time.Millisecond, now: time.Now}
}

// Job is the fan-out as a background job: a full round is followed at
// once by the next.
func (f *Fanout) Job() Job {
	return Job{Name: "webhook-fanout", Interval: f.Interval, RunOnce: f.RunOnce, Full: func(n int) bool { return n >= f.Batch }}
}

// RunOnce fans out one batch of pending outbox rows and says how many.
func (f *Fanout) RunOnce(ctx context.Context) (int, error) {
	var events, made int
	err := f.store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
		var err error
		events, made, err = fanOut(ctx, tx, f.Batch, f.now())
		return err
	})
	if err == nil && f.OnFannedOut != nil && events > 0 {
		f.OnFannedOut(events, made)
	}
	return events, err
}

// fanOut fans out up to limit pending rows in tx to the endpoints enabled
// now, and says how many rows and how many deliveries.
func fanOut(ctx context.Context, tx *dao.WebhookTx, limit int, now time.Time) (int, int, error) {
	endpoints, err := tx.Endpoints(ctx, true)
	if err != nil {
		return 0, 0, err
	}
	if len(endpoints) == 0 {
		// No deliveries to write: the rows are let go unread.
		n, err := tx.ClearPending(ctx, limit)
		return n, 0, err
	}
	rows, err := tx.PendingEvents(ctx, limit)
	if err != nil || len(rows) == 0 {
		return 0, 0, err
	}
	var ds []model.WebhookDelivery
	seqs := make([]int64, len(rows))
	for i, row := range rows {
		seqs[i] = row.Seq
		if row.Event.ID == "" {
			continue // a payload that does not parse: nothing to send
		}
		var body []byte
		for _, e := range endpoints {
			if !e.Subscribes(string(row.Event.Type)) {
				continue
			}
			if body == nil {
				if body, err = webhook.Body(row.Event, row.Seq); err != nil {
					return 0, 0, err
				}
			}
			ds = append(ds, model.WebhookDelivery{
				EndpointID: e.ID, EventID: row.Event.ID, EventType: string(row.Event.Type), OrderID: row.Event.OrderID(),
				Body: body, NextAttemptAt: now, CreatedAt: now,
			})
		}
	}
	if err := tx.InsertDeliveries(ctx, ds); err != nil {
		return 0, 0, err
	}
	return len(rows), len(ds), tx.MarkFannedOut(ctx, seqs)
}

// drainBatch is how many rows drain fans out per statement.
const drainBatch = 500

// drain fans out every row pending in tx's view to the endpoints as they
// are before tx changes one.
func drain(ctx context.Context, tx *dao.WebhookTx, now time.Time) error {
	for {
		n, _, err := fanOut(ctx, tx, drainBatch, now)
		if err != nil || n < drainBatch {
			return err
		}
	}
}
