package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Closer closes orders left unpaid past the pay timeout, with the same
// logic as a cancel. Several instances may run at once: each order is
// claimed with FOR UPDATE SKIP LOCKED (an order the notify path is paying
// right now is skipped, and seen paid next round) and re-checked under its
// lock, and the close itself is a compare-and-set. An order that cannot be
// closed (a SKU or member edited away under it) is postponed with its own
// back-off, so it never holds up the orders behind it.
type Closer struct {
	store *dao.Store
	log   *slog.Logger
	now   func() time.Time
	// PayTimeout is ORDER_PAY_TIMEOUT: orders unpaid longer are closed.
	PayTimeout time.Duration
	// Interval is ORDER_CLOSE_INTERVAL, the pause between rounds.
	Interval time.Duration
	// Batch is ORDER_CLOSE_BATCH, how many orders one round handles.
	Batch int
}

// NewCloser returns the closer with default tuning (30 min, every minute,
// 100 a round).
func NewCloser(store *dao.Store, log *slog.Logger) *Closer {
	return &Closer{store: store, log: log, now: time.Now, PayTimeout: 30 * time.Minute, Interval: time.Minute, Batch: 100}
}

// CloserJob names the closer's job in logs and metrics.
const CloserJob = "order-closer"

// Job is the closer as a background job.
func (c *Closer) Job() Job {
	return Job{Name: CloserJob, Interval: c.Interval, RunOnce: c.RunOnce}
}

// RunOnce closes one batch of expired orders and says how many it closed.
func (c *Closer) RunOnce(ctx context.Context) (int, error) {
	now := c.now()
	cutoff := now.Add(-c.PayTimeout)
	ids, err := c.store.ExpiredOrders(ctx, cutoff, now, c.Batch)
	if err != nil {
		return 0, err
	}
	closed := 0
	for _, id := range ids {
		done := false
		err := c.store.UpdateOrder(ctx, dao.OrderID(id), dao.ForUpdateSkipLocked, func(ctx context.Context, tx *dao.OrderTx, order model.Order) error {
			done = false
			if order.Status != model.OrderAwaitingPayment || !order.CreateTime.Before(cutoff) {
				return nil // paid or cancelled since we listed it
			}
			done = true
			return closeLocked(ctx, tx, order, closeTimeout, c.now())
		})
		if errors.Is(err, model.ErrOrderNotFound) {
			continue // held by another closer or being paid: not ours now
		}
		if err != nil {
			if ctx.Err() != nil {
				return closed, err
			}
			// One order that cannot be closed must not stop every other
			// close: unless the failure was passing, it waits out its own
			// back-off, and the round goes on.
			c.log.Error("order not closed", "order_id", id, "err", err)
			if !transient(err) {
				if _, err := c.store.PostponeClose(ctx, id, now, rowBackoff, err.Error()); err != nil {
					return closed, err
				}
			}
			continue
		}
		if done {
			closed++
		}
	}
	return closed, nil
}
