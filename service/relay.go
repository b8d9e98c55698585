package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Publisher sends events to the broker and says, per event, whether it
// was acknowledged (nil) or not.
type Publisher interface {
	Publish(ctx context.Context, events []model.Event) []error
}

// Relay publishes outbox rows and marks them sent. Several relays may run
// at once: a relay claims its rows in a short transaction (FOR UPDATE SKIP
// LOCKED, then a lease on their next attempt), publishes with no
// transaction open, waits for the acknowledgements, and marks them in a
// second short transaction. No row is published by two relays at the same
// moment (unless a publish outlives the lease), and a relay that dies
// strands nothing: its rows are due again when the lease ends. A crash
// between publish and mark publishes the row again; the event id as
// Nats-Msg-Id and the consumer's de-duplication make that harmless.
//
// Nothing waits on the broker while holding a lock: a broker that is down
// or slow never blocks the payments and orders that write events.
type Relay struct {
	store *dao.Store
	pub   Publisher
	log   *slog.Logger
	// Batch is how many rows one round claims.
	Batch int
	// Interval is how long an idle relay waits before looking again.
	Interval time.Duration
	// Lease is how long a claim keeps rows from other relays; longer than
	// a publish can take.
	Lease time.Duration
	// PublishTimeout bounds one round's wait for acknowledgements.
	PublishTimeout time.Duration
	// FailAfter attempts mark a row FAILED (still retried, on MaxBackoff).
	FailAfter  int
	MaxBackoff time.Duration
	// AfterPublish, if set, runs between publishing and marking sent: a
	// seam for fault injection (an error stops the round, as a crash would).
	AfterPublish func(ctx context.Context) error
	// OnPublished, if set, is told how many rows each batch sent and failed.
	OnPublished func(sent, failed int)
	now         func() time.Time
}

// NewRelay returns a relay from store to pub with default tuning.
func NewRelay(store *dao.Store, pub Publisher, log *slog.Logger) *Relay {
	return &Relay{store: store, pub: pub, log: log, Batch: 100, Interval: 500 * time.Millisecond,
		Lease: 30 * time.Second, PublishTimeout: 10 * time.Second,
		FailAfter: 10, MaxBackoff: 5 * time.Minute, now: time.Now}
}

// Job is the relay as a background job: a round that sent a whole batch
// is followed at once by the next.
func (r *Relay) Job() Job {
	return Job{Name: "outbox-relay", Interval: r.Interval, RunOnce: r.RunOnce, Full: func(n int) bool { return n >= r.Batch }}
}

// RunOnce claims one batch of due rows, publishes them, and records the
// result, each row with its own back-off when it failed. It returns how
// many rows it marked sent.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	var rows []model.OutboxRow
	err := r.store.UpdateOutbox(ctx, func(ctx context.Context, tx *dao.OutboxTx) error {
		var err error
		rows, err = tx.ClaimEvents(ctx, r.now(), r.Lease, r.Batch)
		return err
	})
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	events := make([]model.Event, len(rows))
	for i, row := range rows {
		events[i] = row.Event
	}
	pctx, cancel := context.WithTimeout(ctx, r.PublishTimeout)
	errs := r.pub.Publish(pctx, events)
	cancel()
	if r.AfterPublish != nil {
		if err := r.AfterPublish(ctx); err != nil {
			return 0, err
		}
	}
	sent, failed := 0, 0
	err = r.store.UpdateOutbox(ctx, func(ctx context.Context, tx *dao.OutboxTx) error {
		var ok []int64
		failed = 0
		for i, row := range rows {
			if errs[i] == nil {
				ok = append(ok, row.Seq)
				continue
			}
			failed++
			attempts := row.Attempts + 1
			level := slog.LevelWarn
			if attempts >= r.FailAfter {
				level = slog.LevelError // FAILED: an operator should look
			}
			r.log.Log(ctx, level, "event not published", "event_id", row.Event.ID, "type", row.Event.Type, "attempts", attempts, "err", errs[i])
			if err := tx.MarkFailed(ctx, row.Seq, attempts, r.now().Add(r.backoff(attempts)), r.FailAfter, errs[i].Error()); err != nil {
				return err
			}
		}
		sent = len(ok)
		return tx.MarkSent(ctx, ok, r.now())
	})
	if err != nil {
		return 0, err
	}
	if r.OnPublished != nil {
		r.OnPublished(sent, failed)
	}
	return sent, nil
}

// backoff doubles from one second per attempt, capped at MaxBackoff.
func (r *Relay) backoff(attempts int) time.Duration {
	d := time.Second << min(attempts-1, 20)
	return min(d, r.MaxBackoff)
}

// ErrNoBroker says no broker is configured; the outbox keeps the events.
var ErrNoBroker = errors.New("no broker configured (NATS_URL unset): events stay in the outbox")
