package dao

import (
	"context"
	"paynotify/model"
	"time"

	"gorm.io/gorm/clause"
)

const backoffTable = "job_backoff"

// The jobs that keep their per-row back-off in job_backoff (the others
// have attempt columns on their own rows).
const (
	backoffOrderClose    = "order-close"
	backoffTradeClose    = "trade-close"
	backoffRefundEnqueue = "refund-enqueue"
)

// Backoff says how long a job leaves a row alone after its n-th failure
// on it in a row (n ≥ 1).
type Backoff func(failures int) time.Duration

// notPostponed is a WHERE condition leaving out the rows job has postponed
// past now; idExpr and keyExpr are the row's id and text key in the outer
// query: a column, or a literal (0, or the empty string).
func notPostponed(job, idExpr, keyExpr string, now time.Time) (string, []any) {
	return "NOT EXISTS (SELECT 1 FROM " + backoffTable + " b WHERE b.job = ? AND b.row_id = " + idExpr +
		" AND b.row_key = " + keyExpr + " AND b.next_try_at > ?)", []any{job, now.UTC()}
}

// postpone records that job failed on a row once more: the row is left
// out of the job's batches until now + delay(failures). Plain statements
// outside any transaction: the work that failed has rolled back.
func (s *Store) postpone(ctx context.Context, job string, id int64, key string, now time.Time, delay Backoff, reason string) (int, error) {
	var failures []int
	err := s.db.WithContext(ctx).Table(backoffTable).Where("job = ? AND row_id = ? AND row_key = ?", job, id, key).
		Pluck("failures", &failures).Error
	if err != nil {
		return 0, mapErr(err)
	}
	n := 1
	if len(failures) > 0 {
		n = failures[0] + 1
	}
	row := map[string]any{
		"job": job, "row_id": id, "row_key": key, "failures": n,
		"next_try_at": now.Add(delay(n)).UTC(), "last_error": model.Truncate(reason, 500), "update_time": now.UTC(),
	}
	conflict := clause.OnConflict{
		Columns:   []clause.Column{{Name: "job"}, {Name: "row_id"}, {Name: "row_key"}},
		DoUpdates: clause.AssignmentColumns([]string{"failures", "next_try_at", "last_error", "update_time"}),
	}
	if err := s.db.WithContext(ctx).Table(backoffTable).Clauses(conflict).Create(row).Error; err != nil {
		return n, mapErr(err)
	}
	// Rows a job finished stay here until a later failure of the same job
	// sweeps them: a week after their last try, nothing reads them.
	return n, mapErr(s.db.WithContext(ctx).Table(backoffTable).
		Where("job = ? AND next_try_at < ?", job, now.Add(-backoffKeep).UTC()).Delete(nil).Error)
}

// backoffKeep is how long a job_backoff row outlives its last try.
const backoffKeep = 7 * 24 * time.Hour

// PostponeClose records that closing an order failed: the closer leaves it
// out until now + delay(failures). It returns the failures so far.
func (s *Store) PostponeClose(ctx context.Context, orderID int64, now time.Time, delay Backoff, reason string) (int, error) {
	return s.postpone(ctx, backoffOrderClose, orderID, "", now, delay, reason)
}

// PostponeTradeClose records that closing an attempt's trade failed: the
// trade-close job leaves it out until now + delay(failures). It returns
// the failures so far.
func (s *Store) PostponeTradeClose(ctx context.Context, attemptID int64, now time.Time, delay Backoff, reason string) (int, error) {
	return s.postpone(ctx, backoffTradeClose, attemptID, "", now, delay, reason)
}

// PostponeRefundEnqueue records that turning a REFUND_PENDING payment into
// a refund failed: the refund job leaves it out until now +
// delay(failures). Payments are named by trade_no (one provider). It
// returns the failures so far.
func (s *Store) PostponeRefundEnqueue(ctx context.Context, tradeNo string, now time.Time, delay Backoff, reason string) (int, error) {
	return s.postpone(ctx, backoffRefundEnqueue, 0, tradeNo, now, delay, reason)
}
