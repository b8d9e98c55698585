package dao

import (
	"context"
	"time"

	"paynotify/model"
)

// SettleFailedRefund records that one of the order's refunds we hold as
// REFUND_FAILED was made after all — Alipay's bill shows it — by moving
// it to REFUNDED (compare-and-set; an operator's resolution is kept), and
// reports whether it did.
func (tx *OrderTx) SettleFailedRefund(ctx context.Context, outRequestNo, note string) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	now := time.Now().UTC()
	res := tx.s.db.WithContext(ctx).Model(&refundRecord{}).
		Where("out_request_no = ? AND order_id = ? AND state = ?", outRequestNo, tx.order.ID, model.RefundFailed).
		Updates(map[string]any{"state": model.RefundRefunded, "last_error": clip500(note), "update_time": now})
	return tx.s.changed(ctx, res, outRequestNo, model.RefundFailed, model.RefundRefunded, reconResolver, note, now)
}

// SettleFailedRefund is OrderTx.SettleFailedRefund for a refund of a
// payment without an order.
func (tx *OrderlessTx) SettleFailedRefund(ctx context.Context, outRequestNo, note string) (bool, error) {
	now := time.Now().UTC()
	res := tx.s.db.WithContext(ctx).Model(&refundRecord{}).
		Where("out_request_no = ? AND trade_no = ? AND order_id IS NULL AND state = ?", outRequestNo, tx.pay.TradeNo, model.RefundFailed).
		Updates(map[string]any{"state": model.RefundRefunded, "last_error": clip500(note), "update_time": now})
	return tx.s.changed(ctx, res, outRequestNo, model.RefundFailed, model.RefundRefunded, reconResolver, note, now)
}
