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
// lock, and the close itself is a compare-and-set.
type Closer struct {
	store    *dao.Store
	log      *slog.Logger
	timeout  time.Duration
	interval time.Duration
	batch    int
	now      func() time.Time
	// OnClosed, if set, is told how many orders each round closed.
	OnClosed func(n int)
}

// NewCloser returns a closer for orders unpaid longer than timeout,
// looking every interval, batch orders at a time.
func NewCloser(store *dao.Store, log *slog.Logger, timeout, interval time.Duration, batch int) *Closer {
	return &Closer{store: store, log: log, timeout: timeout, interval: interval, batch: batch, now: time.Now}
}

// Run closes expired orders every interval until ctx ends.
func (c *Closer) Run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		n, err := c.CloseExpired(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("closer round failed", "err", err)
		} else if n > 0 {
			c.log.Info("closed unpaid orders", "count", n)
		}
		if c.OnClosed != nil {
			c.OnClosed(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CloseExpired closes one batch of expired orders and says how many it
// closed.
func (c *Closer) CloseExpired(ctx context.Context) (int, error) {
	cutoff := c.now().Add(-c.timeout)
	ids, err := c.store.ExpiredOrders(ctx, cutoff, c.batch)
	if err != nil {
		return 0, err
	}
	closed := 0
	for _, id := range ids {
		done := false
		err := inTx(ctx, c.store, func(tx *dao.Store) error {
			done = false
			order, err := tx.OrderForUpdateSkipLocked(ctx, id)
			if errors.Is(err, model.ErrOrderNotFound) {
				return nil // held by another closer or being paid: not ours now
			}
			if err != nil {
				return err
			}
			if order.Status != model.OrderAwaitingPayment || !order.CreateTime.Before(cutoff) {
				return nil // paid or cancelled since we listed it
			}
			done = true
			return closeLocked(ctx, tx, order, closeTimeout, c.now())
		})
		if err != nil {
			// One order that cannot be closed (a SKU or member edited away
			// under it) must not stop every other close: log it and go on.
			c.log.Error("order not closed", "order_id", id, "err", err)
			if ctx.Err() != nil {
				return closed, err
			}
			continue
		}
		if done {
			closed++
		}
	}
	return closed, nil
}
