package service

import (
	"context"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Ops is what operators read: the outbox and the journal's totals.
type Ops struct {
	store *dao.Store
	now   func() time.Time
}

// NewOps returns the operator views over store.
func NewOps(store *dao.Store) *Ops { return &Ops{store: store, now: time.Now} }

// Outbox lists up to limit events in a state, oldest first, and counts all
// of them.
func (o *Ops) Outbox(ctx context.Context, state model.OutboxState, limit int) ([]model.OutboxRow, int64, error) {
	rows, err := o.store.OutboxRows(ctx, state, limit)
	if err != nil {
		return nil, 0, err
	}
	n, err := o.store.OutboxCount(ctx, state)
	return rows, n, err
}

// JournalTotals sums the journal per account.
func (o *Ops) JournalTotals(ctx context.Context) ([]model.AccountTotal, error) {
	return o.store.JournalTotals(ctx)
}

// Refunds lists an order's refunds.
func (o *Ops) Refunds(ctx context.Context, sn string) ([]model.Refund, error) {
	order, err := o.store.Order(ctx, sn)
	if err != nil {
		return nil, err
	}
	return o.store.RefundsByOrder(ctx, order.ID)
}
