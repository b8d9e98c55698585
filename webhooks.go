package main

import (
	"log/slog"
	"time"

	"paynotify/config"
	"paynotify/dao"
	"paynotify/metrics"
	"paynotify/service"
	"paynotify/webhook"
)

// hooks are the webhook use cases and jobs serve wires: the fan-out runs
// always (it needs no key, and keeps the outbox's webhook_pending flags
// moving so retention can purge); the deliverer only with a
// WEBHOOK_SECRET_KEY.
type hooks struct {
	webhooks *service.Webhooks
	fanout   *service.Fanout
	// deliverer is nil when webhooks are off.
	deliverer *service.Deliverer
}

// newHooks makes the webhook use cases of cfg over store, counting into m.
func newHooks(log *slog.Logger, cfg config.Config, store *dao.Store, m *metrics.Metrics) (*hooks, error) {
	h := &hooks{fanout: service.NewFanout(store)}
	w := cfg.Webhook
	key, err := w.Key()
	if err != nil {
		return nil, err
	}
	var keys *webhook.Keyring
	if key != "" {
		if keys, err = webhook.NewKeyring(key); err != nil {
			return nil, err
		}
	}
	h.webhooks = service.NewWebhooks(store, keys)
	h.webhooks.AllowPrivate = w.AllowPrivate
	m.WatchWebhooks(store)
	if keys == nil {
		log.Info("webhooks off: WEBHOOK_SECRET_KEY is not set")
		return h, nil
	}
	schedule, err := w.Schedule()
	if err != nil {
		return nil, err
	}
	d := service.NewDeliverer(store, keys, webhook.NewSender(h.webhooks.Policy(), w.Timeout), log)
	d.Schedule, d.Concurrency, d.DisableAfter = schedule, w.Concurrency, w.DisableAfter
	// A claim outlives the longest attempt (the answer deadline) twice over,
	// and no more: an instance killed mid-delivery holds its deliveries
	// back from the others only that long (40 s by default).
	d.Lease = 2*w.Timeout + 10*time.Second
	d.OnAttempt = m.WebhookAttempt
	// An endpoint this instance disables or deletes gets nothing more of
	// what the deliverer queued for it (another instance's change reaches
	// this deliverer at its next round).
	h.webhooks.OnStop = d.Forget
	// Deliveries this instance fanned out are due at once: the deliverer
	// need not wait for its interval to see them.
	h.fanout.OnFannedOut = func(_, deliveries int) {
		if deliveries > 0 {
			d.Wake()
		}
	}
	h.deliverer = d
	if w.AllowPrivate {
		log.Warn("WEBHOOK_ALLOW_PRIVATE=true: webhook endpoints may be http:// and on loopback or private addresses")
	}
	return h, nil
}

// jobs are the fan-out and, when webhooks are on, the deliverer.
func (h *hooks) jobs() []service.Job {
	jobs := []service.Job{h.fanout.Job()}
	if h.deliverer != nil {
		jobs = append(jobs, h.deliverer.Job())
	}
	return jobs
}

// wait waits for the deliveries in flight once the jobs have stopped.
func (h *hooks) wait() {
	if h.deliverer != nil {
		h.deliverer.Wait()
	}
}
