package dao

import (
	"context"
	"time"

	"paynotify/model"
)

// What operators are alerted on, read from the tables so that every
// instance reports the same, across restarts (metrics' gauges).

// OldestPaymentIn is when the payment longest in state got there (its
// last change; false if none is in state).
func (s *Store) OldestPaymentIn(ctx context.Context, state model.PaymentState) (time.Time, bool, error) {
	var ts []time.Time
	err := s.db.WithContext(ctx).Table(paymentTable).Where("state = ?", state).
		Order("update_time").Limit(1).Pluck("update_time", &ts).Error
	if err != nil || len(ts) == 0 {
		return time.Time{}, false, mapErr(err)
	}
	return ts[0], true, nil
}

// OldestUnsent is when the oldest outbox row not yet published (PENDING
// or FAILED) was written (false if every row is SENT).
func (s *Store) OldestUnsent(ctx context.Context) (time.Time, bool, error) {
	var ts []time.Time
	err := s.db.WithContext(ctx).Table(outboxTable).Where("state IN ?", []model.OutboxState{model.OutboxPending, model.OutboxFailed}).
		Order("create_time").Limit(1).Pluck("create_time", &ts).Error
	if err != nil || len(ts) == 0 {
		return time.Time{}, false, mapErr(err)
	}
	return ts[0], true, nil
}

// LastReconciled is the latest bill date of a's runs that is DONE (false
// if none is).
func (s *Store) LastReconciled(ctx context.Context, a model.BillAccount) (string, bool, error) {
	var dates []string
	err := runsOf(s.db.WithContext(ctx).Table(runTable), "", a).Where("state = ?", model.ReconDone).
		Order("bill_date DESC").Limit(1).Pluck("bill_date", &dates).Error
	if err != nil || len(dates) == 0 {
		return "", false, mapErr(err)
	}
	return dates[0], true, nil
}

// FirstPaidAt is when a's first payment in the ledger was paid (false if
// the ledger has none): no bill before its day has anything of ours to
// check.
func (s *Store) FirstPaidAt(ctx context.Context, a model.BillAccount) (time.Time, bool, error) {
	var ts []time.Time
	err := s.db.WithContext(ctx).Table(paymentTable).Where("provider = ? AND account IN ? AND paid_at IS NOT NULL", a.Provider, a.RunAccounts()).
		Order("paid_at").Limit(1).Pluck("paid_at", &ts).Error
	if err != nil || len(ts) == 0 {
		return time.Time{}, false, mapErr(err)
	}
	return ts[0], true, nil
}
