package dao

import (
	"context"
	"time"

	"paynotify/model"
)

// Operators' changes from the console. Each is reached only through a
// transaction type, which also writes the action's admin_audit row.

// RetryRefund puts one of the order's failed, unresolved refunds back in
// the worker's queue (compare-and-set REFUND_FAILED → REFUNDING, attempts
// from zero, due at now) and reports whether it did. The out_request_no
// stays: Alipay still refunds it at most once.
func (tx *OrderTx) RetryRefund(ctx context.Context, outRequestNo string, now time.Time) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	res := tx.s.db.WithContext(ctx).Model(&refundRecord{}).
		Where("out_request_no = ? AND order_id = ? AND state = ? AND resolved_time IS NULL", outRequestNo, tx.order.ID, model.RefundFailed).
		Updates(map[string]any{"state": model.RefundRefunding, "attempts": 0, "next_attempt_at": now.UTC(),
			"last_error": "", "update_time": now.UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// ResolveRefund takes one of the order's failed refunds off the queue with
// an operator's note (once: compare-and-set on resolved_time) and reports
// whether it did.
func (tx *OrderTx) ResolveRefund(ctx context.Context, outRequestNo, operator, note string, now time.Time) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	res := tx.s.db.WithContext(ctx).Model(&refundRecord{}).
		Where("out_request_no = ? AND order_id = ? AND state = ? AND resolved_time IS NULL", outRequestNo, tx.order.ID, model.RefundFailed).
		Updates(map[string]any{"resolved_by": operator, "resolved_time": now.UTC(), "resolution": clip(note, 500),
			"update_time": now.UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// RequeueEvent makes a FAILED outbox row pending again, due at now, with
// its attempts from zero (compare-and-set) and reports whether it did.
func (tx *OutboxTx) RequeueEvent(ctx context.Context, seq int64, now time.Time) (bool, error) {
	res := tx.s.db.WithContext(ctx).Model(&outboxRecord{}).Where("id = ? AND state = ?", seq, model.OutboxFailed).
		Updates(map[string]any{"state": model.OutboxPending, "attempts": 0, "next_attempt_at": now.UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}
