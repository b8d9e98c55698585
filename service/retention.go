package service

import (
	"context"
	"errors"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// PurgeTable names a table the retention job deletes from, in metrics.
type PurgeTable string

// The tables the retention job keeps small. The ledger, refunds, journal,
// audit and idempotency records are never deleted.
const (
	PurgeOutbox   PurgeTable = "outbox"
	PurgeSessions PurgeTable = "console_session"
	PurgeBackoff  PurgeTable = "job_backoff"
	PurgeSeen     PurgeTable = "recon_seen"
	// Webhook attempts, and deliveries finished (DELIVERED or FAILED),
	// older than WEBHOOK_RETENTION.
	PurgeWebhookAttempts   PurgeTable = "webhook_attempt"
	PurgeWebhookDeliveries PurgeTable = "webhook_delivery"
)

// PurgeTables lists every PurgeTable, for metrics to create their series.
var PurgeTables = []PurgeTable{PurgeOutbox, PurgeSessions, PurgeBackoff, PurgeSeen, PurgeWebhookAttempts, PurgeWebhookDeliveries}

// Retention deletes what nothing needs any more, a small batch of each
// table a round: SENT outbox rows older than Outbox (a consumer that lags
// longer reads the stream, not the table), expired console sessions,
// job_backoff rows of rows their job has finished, and the matched bill
// lines (recon_seen) of dates reconciled cleanly and older than Recon. A
// round whose batch of some table was full is followed by the next after
// Pause, until the tables have caught up. Several instances may purge at
// once (and on Galera): each batch deletes by primary key the rows it
// read, so two delete a row once, and a batch is small enough to
// certify quickly.
type Retention struct {
	store *dao.Store
	now   func() time.Time
	// Outbox is OUTBOX_RETENTION: SENT rows sent longer ago are deleted.
	Outbox time.Duration
	// Recon is RECON_RETENTION: a cleanly reconciled date's bill lines
	// are deleted once the date is older.
	Recon time.Duration
	// Webhooks is WEBHOOK_RETENTION: attempts logged longer ago, and
	// deliveries finished longer ago, are deleted.
	Webhooks time.Duration
	// Interval is the pause between rounds that found little to do.
	Interval time.Duration
	// Batch is how many rows of each table one round deletes at most.
	Batch int
	// Pause is the wait after a full round: a backlog (the first run on a
	// large database) is deleted at most Batch rows a table per Pause,
	// leaving the database to notifications in between.
	Pause time.Duration
	// OnPurged, if set, is told how many rows of a table a round deleted.
	OnPurged func(t PurgeTable, rows int)
	// OnOverdue, if set, is told after each round how long past its
	// retention the oldest row of a table still kept is (0 if none):
	// a job that falls behind shows here first.
	OnOverdue func(t PurgeTable, overdue time.Duration)

	// full: the last round filled some table's batch.
	full bool
}

// NewRetention returns the retention job with the default tuning: SENT
// outbox rows kept 7 days, bill lines 90 days, 500 rows a batch, a round a
// minute, a second between full rounds. That is at most 500 rows a second
// of each table, 43 million a day: forty times a large merchant's million
// bill lines a day, and a pace that leaves notifications the database
// (a first run over a backlog of a million rows takes about half an hour).
func NewRetention(store *dao.Store) *Retention {
	return &Retention{store: store, now: time.Now, Outbox: 7 * 24 * time.Hour, Recon: 90 * 24 * time.Hour,
		Webhooks: 30 * 24 * time.Hour, Interval: time.Minute, Batch: 500, Pause: time.Second}
}

// Job is the retention job as a background job.
func (r *Retention) Job() Job {
	return Job{Name: "retention", Interval: r.Interval, RunOnce: r.RunOnce, Full: func(int) bool { return r.full }, Pause: r.Pause}
}

// RunOnce deletes one batch of each table and says how many rows it
// deleted in all. A table that fails does not stop the others.
func (r *Retention) RunOnce(ctx context.Context) (int, error) {
	now := r.now()
	before := now.Add(-r.Recon).In(model.Beijing).Format("2006-01-02")
	purges := []struct {
		table PurgeTable
		purge func() (int, error)
	}{
		{PurgeOutbox, func() (int, error) { return r.store.PurgeSentOutbox(ctx, now.Add(-r.Outbox), r.Batch) }},
		{PurgeSessions, func() (int, error) { return r.store.PurgeExpiredSessions(ctx, now, r.Batch) }},
		{PurgeBackoff, func() (int, error) { return r.store.PurgeFinishedBackoff(ctx, r.Batch) }},
		{PurgeSeen, func() (int, error) { return r.store.PurgeReconciledLines(ctx, before, now, r.Batch) }},
		{PurgeWebhookAttempts, func() (int, error) { return r.store.PurgeWebhookAttempts(ctx, now.Add(-r.Webhooks), r.Batch) }},
		{PurgeWebhookDeliveries, func() (int, error) { return r.store.PurgeWebhookDeliveries(ctx, now.Add(-r.Webhooks), r.Batch) }},
	}
	total, full := 0, false
	var errs []error
	for _, p := range purges {
		n, err := p.purge()
		total += n
		full = full || n >= r.Batch
		if r.OnPurged != nil && n > 0 {
			r.OnPurged(p.table, n)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	r.full = full && len(errs) == 0
	if r.OnOverdue != nil {
		errs = append(errs, r.overdue(ctx, now, before))
	}
	return total, errors.Join(errs...)
}

// overdue tells OnOverdue how far behind each measured table is.
func (r *Retention) overdue(ctx context.Context, now time.Time, before string) error {
	past := func(deadline time.Time, ok bool) time.Duration {
		if !ok || !now.After(deadline) {
			return 0
		}
		return now.Sub(deadline)
	}
	sent, ok, err := r.store.OldestSentOutbox(ctx)
	if err != nil {
		return err
	}
	r.OnOverdue(PurgeOutbox, past(sent.Add(r.Outbox), ok))
	expired, ok, err := r.store.OldestExpiredSession(ctx, now)
	if err != nil {
		return err
	}
	r.OnOverdue(PurgeSessions, past(expired, ok))
	// A finished row's back-off is due at once; when it finished is not
	// recorded, so its last failure (update_time) stands for it: an
	// upper bound of how long the row has waited to be deleted.
	failed, ok, err := r.store.OldestFinishedBackoff(ctx)
	if err != nil {
		return err
	}
	r.OnOverdue(PurgeBackoff, past(failed, ok))
	date, ok, err := r.store.OldestPurgeableReconDate(ctx, before)
	if err != nil {
		return err
	}
	var end time.Time
	if ok {
		day, err := ParseBillDate(date)
		if err != nil {
			return err
		}
		end = day.AddDate(0, 0, 1)
	}
	r.OnOverdue(PurgeSeen, past(end.Add(r.Recon), ok))
	attempt, ok, err := r.store.OldestWebhookAttempt(ctx)
	if err != nil {
		return err
	}
	r.OnOverdue(PurgeWebhookAttempts, past(attempt.Add(r.Webhooks), ok))
	finished, ok, err := r.store.OldestFinishedDelivery(ctx)
	if err != nil {
		return err
	}
	r.OnOverdue(PurgeWebhookDeliveries, past(finished.Add(r.Webhooks), ok))
	return nil
}
