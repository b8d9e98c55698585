package dao

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

// Operators' changes from the console. Each is reached only through a
// transaction type, which also writes the action's admin_audit row.

// RetryRefund puts one of the order's failed, unresolved refunds back in
// the worker's queue (compare-and-set REFUND_FAILED → REFUNDING, attempts
// from zero, due at now) and reports whether it did. The out_request_no
// stays: Alipay still refunds it at most once.
func (tx *OrderTx) RetryRefund(ctx context.Context, outRequestNo, operator string, now time.Time) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.retryRefund(ctx, tx.s.db.Where("order_id = ?", tx.order.ID), outRequestNo, operator, now)
}

// RetryRefund is OrderTx.RetryRefund for a refund of the payment, which
// has no order.
func (tx *OrderlessTx) RetryRefund(ctx context.Context, outRequestNo, operator string, now time.Time) (bool, error) {
	return tx.s.retryRefund(ctx, tx.s.db.Where("trade_no = ? AND order_id IS NULL", tx.pay.TradeNo), outRequestNo, operator, now)
}

func (s *Store) retryRefund(ctx context.Context, own *gorm.DB, outRequestNo, operator string, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&refundRecord{}).Where(own).
		Where("out_request_no = ? AND state = ? AND resolved_time IS NULL", outRequestNo, model.RefundFailed).
		Updates(map[string]any{"state": model.RefundRefunding, "attempts": 0, "next_attempt_at": now.UTC(),
			"last_error": "", "update_time": now.UTC()})
	return s.changed(ctx, res, outRequestNo, model.RefundFailed, model.RefundRefunding, operator, "", now)
}

// ResolveRefund takes one of the order's failed refunds off the queue with
// an operator's note (once: compare-and-set on resolved_time) and reports
// whether it did.
func (tx *OrderTx) ResolveRefund(ctx context.Context, outRequestNo, operator, note string, now time.Time) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.resolveRefund(ctx, tx.s.db.Where("order_id = ?", tx.order.ID), outRequestNo, operator, note, now)
}

// ResolveRefund is OrderTx.ResolveRefund for a refund of the payment,
// which has no order.
func (tx *OrderlessTx) ResolveRefund(ctx context.Context, outRequestNo, operator, note string, now time.Time) (bool, error) {
	return tx.s.resolveRefund(ctx, tx.s.db.Where("trade_no = ? AND order_id IS NULL", tx.pay.TradeNo), outRequestNo, operator, note, now)
}

func (s *Store) resolveRefund(ctx context.Context, own *gorm.DB, outRequestNo, operator, note string, now time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&refundRecord{}).Where(own).
		Where("out_request_no = ? AND state = ? AND resolved_time IS NULL", outRequestNo, model.RefundFailed).
		Updates(map[string]any{"resolved_by": operator, "resolved_time": now.UTC(), "resolution": model.TruncateChars(note, model.MaxNote),
			"update_time": now.UTC()})
	return s.changed(ctx, res, outRequestNo, model.RefundFailed, model.RefundFailed, operator, note, now)
}

// RequeueEvent makes a FAILED outbox row pending again, due at now, with
// its attempts from zero (compare-and-set) and reports whether it did.
func (tx *OutboxTx) RequeueEvent(ctx context.Context, seq int64, now time.Time) (bool, error) {
	res := tx.s.db.WithContext(ctx).Model(&outboxRecord{}).Where("id = ? AND state = ?", seq, model.OutboxFailed).
		Updates(map[string]any{"state": model.OutboxPending, "attempts": 0, "next_attempt_at": now.UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// InsertAudit records the operator action this transaction does, with it.
func (tx *OrderlessTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}

// UpdateReconItem is the one way to change a reconciliation item: in one
// transaction it locks the item's row and runs fn with it. An item is no
// order's row, so it takes no order lock. An absent item is
// model.ErrItemNotFound. Deadlocks retry as in UpdateOrder.
func (s *Store) UpdateReconItem(ctx context.Context, id int64, fn func(ctx context.Context, tx *ReconItemTx, it model.ReconItem) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		var r itemRecord
		err := tx.db.WithContext(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Where("id = ?", id).Take(&r).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("%w: %d", model.ErrItemNotFound, id)
		}
		if err != nil {
			return mapErr(err)
		}
		return fn(ctx, &ReconItemTx{s: tx, id: id}, r.item())
	})
}

// ReconItemTx is a transaction that holds one reconciliation item's lock.
// It is valid only inside the UpdateReconItem callback that received it.
type ReconItemTx struct {
	s  *Store
	id int64
}

// Resolve records an operator's resolution of the item, once
// (compare-and-set on resolved_at), and reports whether it did.
func (tx *ReconItemTx) Resolve(ctx context.Context, by, note string, now time.Time) (bool, error) {
	res := tx.s.db.WithContext(ctx).Table(itemTable).Where("id = ? AND resolved_at IS NULL", tx.id).
		Updates(map[string]any{"resolved_at": now.UTC(), "resolved_by": by, "note": note, "update_time": now.UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// InsertAudit records the operator action this transaction does, with it.
func (tx *ReconItemTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}
