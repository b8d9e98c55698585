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
		Updates(map[string]any{"state": model.RefundRefunded, "last_error": model.Truncate(note, 500), "update_time": now})
	return tx.s.changed(ctx, res, outRequestNo, model.RefundFailed, model.RefundRefunded, reconResolver, note, now)
}

// SettleFailedRefund is OrderTx.SettleFailedRefund for a refund of a
// payment without an order.
func (tx *OrderlessTx) SettleFailedRefund(ctx context.Context, outRequestNo, note string) (bool, error) {
	now := time.Now().UTC()
	res := tx.s.db.WithContext(ctx).Model(&refundRecord{}).
		Where("out_request_no = ? AND trade_no = ? AND order_id IS NULL AND state = ?", outRequestNo, tx.pay.TradeNo, model.RefundFailed).
		Updates(map[string]any{"state": model.RefundRefunded, "last_error": model.Truncate(note, 500), "update_time": now})
	return tx.s.changed(ctx, res, outRequestNo, model.RefundFailed, model.RefundRefunded, reconResolver, note, now)
}

// RecordConsoleRefund records a refund found in Alipay's bill that we
// never asked for, as REFUNDED (so no worker ever executes it), with its
// event ev, unless its out_request_no is recorded already — through the
// entry point of its payment: the order's lock first, or the payment's
// when it has no order.
func (s *Store) RecordConsoleRefund(ctx context.Context, f model.Refund, ev model.Event) error {
	if f.OrderID == 0 {
		return s.UpdateOrderless(ctx, f.Provider, f.TradeNo, func(ctx context.Context, tx *OrderlessTx, _ model.Payment) error {
			inserted, err := tx.InsertFinishedRefund(ctx, f)
			if err != nil || !inserted {
				return err
			}
			return tx.InsertEvents(ctx, ev)
		})
	}
	return s.UpdateOrder(ctx, OrderID(f.OrderID), ForUpdate, func(ctx context.Context, tx *OrderTx, _ model.Order) error {
		inserted, err := tx.InsertFinishedRefund(ctx, f)
		if err != nil || !inserted {
			return err
		}
		return tx.InsertEvents(ctx, ev)
	})
}

// InsertFinishedRefund records a refund of the order that is already
// REFUNDED (found in Alipay's bill), unless its out_request_no exists, and
// reports whether it did.
func (tx *OrderTx) InsertFinishedRefund(ctx context.Context, f model.Refund) (bool, error) {
	if err := tx.own(f.OrderID); err != nil {
		return false, err
	}
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.insertFinishedRefund(ctx, f)
}

// insertFinishedRefund inserts a refund already REFUNDED, unless its
// out_request_no exists, and reports whether it did.
func (s *Store) insertFinishedRefund(ctx context.Context, f model.Refund) (bool, error) {
	now := time.Now().UTC()
	row := map[string]any{
		"out_request_no": f.OutRequestNo, "kind": string(f.Kind), "provider": string(f.Provider),
		"account": f.Account, "app": f.App, "trade_no": f.TradeNo, "out_trade_no": f.OutTradeNo,
		"amount": f.Amount.StringFixed(2), "reason": f.Reason,
		"state": model.RefundRefunded, "next_attempt_at": now, "create_time": now, "update_time": now,
	}
	if f.OrderID != 0 {
		row["order_id"] = f.OrderID
	}
	return s.insertRefundRow(ctx, f.OutRequestNo, row, reconResolver, "found in Alipay's bill", now)
}
