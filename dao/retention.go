package dao

import (
	"context"
	"time"

	"gorm.io/gorm"

	"paynotify/model"
)

// The retention job's deletes (service.Retention). Each batch reads up to
// limit keys by an index, then deletes those keys by primary key with the
// condition again. Deleting by primary key locks only those rows (MySQL's
// DELETE … ORDER BY … LIMIT would lock ranges of an index, and its planner
// reads the whole index or table for it), so a notification's insert
// never waits on a purge, and two instances purging at once delete a row
// once (the second finds it gone). On Galera a batch is one write set of
// at most limit keys, which certifies quickly; one that loses
// certification to another instance's purge (1213) is run again at once
// (Store.statement), as a deadlocked transaction is, and finds the rows
// the winner deleted gone.
// Nothing here touches the ledger, refunds, journal, audit or idempotency
// records.

// PurgeSentOutbox deletes up to limit outbox rows SENT before cutoff,
// oldest first (idx_outbox_state_sent_time), and says how many it deleted.
// A row not SENT, or not yet fanned out to the webhook endpoints
// (webhook_pending), is never deleted, however old.
func (s *Store) PurgeSentOutbox(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var ids []int64
	err := s.db.WithContext(ctx).Table(outboxTable).Where("state = ? AND sent_time < ? AND webhook_pending = 0", model.OutboxSent, cutoff.UTC()).
		Order("state, sent_time").Limit(limit).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, mapErr(err)
	}
	return s.statement(ctx, func(db *gorm.DB) *gorm.DB {
		return db.Table(outboxTable).Where("id IN ? AND state = ? AND sent_time < ? AND webhook_pending = 0", ids, model.OutboxSent, cutoff.UTC()).Delete(nil)
	})
}

// OldestSentOutbox is when the oldest SENT outbox row still kept was sent
// (false if there is none).
func (s *Store) OldestSentOutbox(ctx context.Context) (time.Time, bool, error) {
	var ts []time.Time
	err := s.db.WithContext(ctx).Table(outboxTable).Where("state = ? AND sent_time IS NOT NULL", model.OutboxSent).
		Order("sent_time").Limit(1).Pluck("sent_time", &ts).Error
	if err != nil || len(ts) == 0 {
		return time.Time{}, false, mapErr(err)
	}
	return ts[0], true, nil
}

// PurgeExpiredSessions deletes up to limit console sessions that expired
// before now (idx_console_session_expires_at).
func (s *Store) PurgeExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	var hashes []string
	err := s.db.WithContext(ctx).Table(sessionTable).Where("expires_at < ?", now.UTC()).
		Order("expires_at").Limit(limit).Pluck("token_hash", &hashes).Error
	if err != nil {
		return 0, mapErr(err)
	}
	// One at a time: the table is small, and MySQL's planner scans a
	// small table for a long IN list of text keys, locking every row.
	deleted := 0
	for _, h := range hashes {
		n, err := s.statement(ctx, func(db *gorm.DB) *gorm.DB {
			return db.Table(sessionTable).Where("token_hash = ? AND expires_at < ?", h, now.UTC()).Delete(nil)
		})
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// OldestExpiredSession is when the longest-expired console session still
// kept expired (false if none has expired by now).
func (s *Store) OldestExpiredSession(ctx context.Context, now time.Time) (time.Time, bool, error) {
	var ts []time.Time
	err := s.db.WithContext(ctx).Table(sessionTable).Where("expires_at < ?", now.UTC()).
		Order("expires_at").Limit(1).Pluck("expires_at", &ts).Error
	if err != nil || len(ts) == 0 {
		return time.Time{}, false, mapErr(err)
	}
	return ts[0], true, nil
}

// backoffJobs are the jobs keeping their back-off in job_backoff, each
// with the condition (on a job_backoff row) that the row it names is
// finished — its job will never pick it again, so its back-off means
// nothing — and the state such a row waits in.
var backoffJobs = []struct {
	job      string
	finished string
	waiting  any
}{
	// The order is no longer awaiting payment (closed, paid), or gone.
	{backoffOrderClose, "NOT EXISTS (SELECT 1 FROM " + orderTable + " o WHERE o.id = " + backoffTable + ".row_id AND o.status = ?)",
		model.OrderAwaitingPayment},
	// The attempt is no longer OPEN.
	{backoffTradeClose, "NOT EXISTS (SELECT 1 FROM " + attemptTable + " a WHERE a.id = " + backoffTable + ".row_id AND a.state = ?)",
		model.AttemptOpen},
	// The payment is no longer REFUND_PENDING.
	{backoffRefundEnqueue, "NOT EXISTS (SELECT 1 FROM " + paymentTable + " p WHERE p.trade_no = " + backoffTable + ".row_key AND p.state = ?)",
		model.PaymentRefundPending},
}

// PurgeFinishedBackoff deletes up to limit job_backoff rows of rows their
// job has finished (an order closed or paid, a trade closed, a payment no
// longer REFUND_PENDING). A row still waiting keeps its back-off, however
// old. Rows are read by the primary key's job prefix, each finished check
// a primary-key or indexed lookup.
func (s *Store) PurgeFinishedBackoff(ctx context.Context, limit int) (int, error) {
	deleted := 0
	for _, j := range backoffJobs {
		if deleted >= limit {
			break
		}
		var keys []struct {
			RowID  int64
			RowKey string
		}
		err := s.db.WithContext(ctx).Table(backoffTable).Select("row_id, row_key").
			Where("job = ?", j.job).Where(j.finished, j.waiting).
			Order("job, row_id, row_key").Limit(limit - deleted).Scan(&keys).Error
		if err != nil {
			return deleted, mapErr(err)
		}
		// One at a time by the whole primary key (the table is small, and
		// a composite key has no IN list every planner reads by index),
		// rechecked: a row can wait again (a payment back to
		// REFUND_PENDING) between the read and the delete.
		for _, k := range keys {
			n, err := s.statement(ctx, func(db *gorm.DB) *gorm.DB {
				return db.Table(backoffTable).Where("job = ? AND row_id = ? AND row_key = ?", j.job, k.RowID, k.RowKey).
					Where(j.finished, j.waiting).Delete(nil)
			})
			deleted += n
			if err != nil {
				return deleted, err
			}
		}
	}
	return deleted, nil
}

// OldestFinishedBackoff is the oldest update_time of a job_backoff row
// whose row its job has finished (false if there is none). Nothing
// records when a row finished (an order paid, a trade closed, a refund
// enqueued), so the back-off row's own update_time — its last failure,
// which came before the row finished — is the bound used: the row has
// been purgeable for at most now minus that. Read as PurgeFinishedBackoff
// reads, by the primary key's job prefix with the same indexed finished
// check, sorting a job's rows (no index on update_time): the table holds
// only rows some job failed on and not yet purged, which is few.
func (s *Store) OldestFinishedBackoff(ctx context.Context) (time.Time, bool, error) {
	var oldest time.Time
	found := false
	for _, j := range backoffJobs {
		var ts []time.Time
		err := s.db.WithContext(ctx).Table(backoffTable).Where("job = ?", j.job).Where(j.finished, j.waiting).
			Order("update_time").Limit(1).Pluck("update_time", &ts).Error
		if err != nil {
			return time.Time{}, false, mapErr(err)
		}
		if len(ts) > 0 && (!found || ts[0].Before(oldest)) {
			oldest, found = ts[0], true
		}
	}
	return oldest, found, nil
}

// How far the retention job has deleted a date's recon_seen lines
// (recon_run.seen_purge; ” while they are kept).
const (
	seenPurging = "PURGING"
	seenPurged  = "PURGED"
)

// cleanRun is the condition that the recon_run r reconciled its date
// cleanly: DONE, and every item it found resolved.
const cleanRun = "r.state = ? AND NOT EXISTS (SELECT 1 FROM " + itemTable + " i WHERE i.run_id = r.id AND i.resolved_at IS NULL)"

// maxPurgeDates bounds how many dates one PurgeReconciledLines goes
// through (dates with few or no lines).
const maxPurgeDates = 30

// PurgeReconciledLines deletes up to limit recon_seen lines of dates
// reconciled cleanly (the run DONE, no item unresolved) and earlier than
// before (a bill date, YYYY-MM-DD), oldest date first. A date is marked
// PURGING on its run first, in a compare-and-set with the run's state:
// from then on ClaimRun refuses it (model.ErrRunPurged), since a re-run
// would find its lines gone and book the day's fees again; and a run
// claimed first (RUNNING) is not marked. Its last lines deleted, it is
// PURGED. Lines of a date with an unresolved item, a failed run or no
// run, or a recent date, are never deleted. recon_run, one row a day, is
// read whole; the lines by idx_recon_seen_bill_date and the primary key.
func (s *Store) PurgeReconciledLines(ctx context.Context, before string, now time.Time, limit int) (int, error) {
	deleted := 0
	for range maxPurgeDates {
		if deleted >= limit {
			break
		}
		var runs []runRecord
		err := s.db.WithContext(ctx).Table(runTable).Select("id, provider, account, bill_date").
			Where("seen_purge = ?", seenPurging).Order("bill_date").Limit(1).Find(&runs).Error
		if err != nil {
			return deleted, mapErr(err)
		}
		if len(runs) == 0 {
			err := s.db.WithContext(ctx).Table(runTable+" AS r").Select("r.id, r.provider, r.account, r.bill_date").
				Where("r.seen_purge = '' AND r.bill_date < ?", before).Where(cleanRun, model.ReconDone).
				Order("r.bill_date").Limit(1).Find(&runs).Error
			if err != nil || len(runs) == 0 {
				return deleted, mapErr(err)
			}
			// UPDATE … AS r: MariaDB and SQLite take an alias in an UPDATE
			// (not in a DELETE), and cleanRun needs one.
			marked, err := s.statement(ctx, func(db *gorm.DB) *gorm.DB {
				return db.Table(runTable+" AS r").Where("r.id = ? AND r.seen_purge = ''", runs[0].ID).
					Where(cleanRun, model.ReconDone).Update("seen_purge", seenPurging)
			})
			if err != nil || marked != 1 {
				return deleted, err // claimed, or marked, meanwhile
			}
		}
		run := runs[0]
		n, done, err := s.purgeLines(ctx, run.Provider, run.Account, run.BillDate, limit-deleted)
		deleted += n
		if err != nil {
			return deleted, err
		}
		if !done {
			break
		}
		_, err = s.statement(ctx, func(db *gorm.DB) *gorm.DB {
			return db.Table(runTable).Where("id = ? AND seen_purge = ?", run.ID, seenPurging).Update("seen_purge", seenPurged)
		})
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// purgeLines deletes up to limit recon_seen lines of an account's date
// and says whether that was the last of them.
func (s *Store) purgeLines(ctx context.Context, provider, account, billDate string, limit int) (int, bool, error) {
	var lines []struct {
		Kind string
		Ref  string
	}
	err := s.db.WithContext(ctx).Table(seenTable).Select("kind, ref").
		Where("provider = ? AND account = ? AND bill_date = ?", provider, account, billDate).Limit(limit).Scan(&lines).Error
	if err != nil {
		return 0, false, mapErr(err)
	}
	byKind := map[string][]string{}
	for _, l := range lines {
		byKind[l.Kind] = append(byKind[l.Kind], l.Ref)
	}
	deleted := 0
	for kind, refs := range byKind {
		n, err := s.statement(ctx, func(db *gorm.DB) *gorm.DB {
			return db.Table(seenTable).Where("provider = ? AND account = ? AND kind = ? AND ref IN ? AND bill_date = ?", provider, account, kind, refs, billDate).Delete(nil)
		})
		deleted += n
		if err != nil {
			return deleted, false, err
		}
	}
	return deleted, len(lines) < limit, nil
}

// OldestPurgeableReconDate is the earliest bill date whose lines
// PurgeReconciledLines has still to delete: PURGING, or reconciled
// cleanly before before and not yet marked (false if none).
func (s *Store) OldestPurgeableReconDate(ctx context.Context, before string) (string, bool, error) {
	var dates []string
	err := s.db.WithContext(ctx).Table(runTable+" AS r").
		Where("r.seen_purge = ? OR (r.seen_purge = '' AND r.bill_date < ? AND "+cleanRun+")", seenPurging, before, model.ReconDone).
		Order("r.bill_date").Limit(1).Pluck("r.bill_date", &dates).Error
	if err != nil || len(dates) == 0 {
		return "", false, mapErr(err)
	}
	return dates[0], true, nil
}
