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

// RecordUnmatched records a verified payment whose out_trade_no names no
// order — UNMATCHED, with no order_id — unless its (provider, trade_no) is
// recorded already, and in the same transaction the events events makes
// of it. It reports whether it inserted; if not, it returns the payment as
// recorded (a duplicate, or a conflict the caller must judge). No order
// is locked: there is none.
func (s *Store) RecordUnmatched(ctx context.Context, p model.Payment, events func(model.Payment) ([]model.Event, error)) (bool, model.Payment, error) {
	if p.OrderID != 0 || p.State != model.PaymentUnmatched {
		return false, model.Payment{}, fmt.Errorf("%w: an UNMATCHED payment has no order", ErrLockOrder)
	}
	var inserted bool
	var existing model.Payment
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		inserted, existing = false, model.Payment{}
		now := time.Now().UTC()
		ok, err := tx.insertOrKeep(ctx, paymentTable, []string{"provider", "trade_no"}, map[string]any{
			"provider": p.Provider, "account": p.Account, "app": p.App, "trade_no": p.TradeNo, "order_id": nil,
			"out_trade_no": p.OutTradeNo, "amount": p.Amount.StringFixed(2),
			"state": p.State, "reason": p.Reason, "notify_id": p.NotifyID,
			"paid_at": p.PaidAt, "create_time": now, "update_time": now,
		})
		if err != nil {
			return err
		}
		if !ok {
			existing, err = tx.payment(ctx, tx.db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), p.Provider, p.TradeNo)
			return err
		}
		inserted = true
		evs, err := events(p)
		if err != nil {
			return err
		}
		return tx.insertEvents(ctx, evs...)
	})
	return inserted, existing, err
}

// UpdateOrderless is the one way to change a payment that has no order (an
// UNMATCHED payment) and its refunds. With no order row to lock first, the
// payment's row is the first lock: in one transaction it locks the payment
// and runs fn with it. A payment that has an order is ErrLockOrder (change
// it through UpdateOrder); an absent one is model.ErrPaymentNotFound.
// Deadlocks retry as in UpdateOrder.
func (s *Store) UpdateOrderless(ctx context.Context, provider model.Provider, tradeNo string, fn func(ctx context.Context, tx *OrderlessTx, p model.Payment) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		p, err := tx.payment(ctx, tx.db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), provider, tradeNo)
		if err != nil {
			return err
		}
		if p.OrderID != 0 {
			return fmt.Errorf("%w: payment %q has order %d: use UpdateOrder", ErrLockOrder, tradeNo, p.OrderID)
		}
		return fn(ctx, &OrderlessTx{s: tx, pay: p}, p)
	})
}

// OrderlessTx is a transaction that holds the lock of one payment without
// an order: it reaches that payment, its refunds and the outbox. It is
// valid only inside the UpdateOrderless callback that received it.
type OrderlessTx struct {
	s   *Store
	pay model.Payment
}

// SetPaymentState moves the payment between states (compare-and-set) and
// reports whether it did.
func (tx *OrderlessTx) SetPaymentState(ctx context.Context, from, to model.PaymentState) (bool, error) {
	res := tx.s.db.WithContext(ctx).Table(paymentTable).
		Where("provider = ? AND trade_no = ? AND order_id IS NULL AND state = ?", tx.pay.Provider, tx.pay.TradeNo, from).
		Updates(map[string]any{"state": to, "update_time": time.Now().UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// SetRefundKey records the operator's idempotency key of the payment's
// refund.
func (tx *OrderlessTx) SetRefundKey(ctx context.Context, key string) error {
	return mapErr(tx.s.db.WithContext(ctx).Table(paymentTable).
		Where("provider = ? AND trade_no = ? AND order_id IS NULL", tx.pay.Provider, tx.pay.TradeNo).
		Updates(map[string]any{"refund_key": key, "update_time": time.Now().UTC()}).Error)
}

// RefundKey is the idempotency key the payment's refund was asked with,
// or "".
func (tx *OrderlessTx) RefundKey(ctx context.Context) (string, error) {
	var key *string
	err := tx.s.db.WithContext(ctx).Table(paymentTable).Select("refund_key").
		Where("provider = ? AND trade_no = ?", tx.pay.Provider, tx.pay.TradeNo).Row().Scan(&key)
	if err != nil || key == nil {
		return "", mapErr(err)
	}
	return *key, nil
}

// Refunds lists the payment's refunds, oldest first.
func (tx *OrderlessTx) Refunds(ctx context.Context) ([]model.Refund, error) {
	var recs []refundRecord
	if err := tx.s.db.WithContext(ctx).Where("provider = ? AND trade_no = ?", tx.pay.Provider, tx.pay.TradeNo).Order("create_time, out_request_no").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.Refund, len(recs))
	for i, r := range recs {
		out[i] = r.refund()
	}
	return out, nil
}

// InsertRefund records a refund of the payment (REFUNDING, no order)
// unless its out_request_no exists, and reports whether it did.
func (tx *OrderlessTx) InsertRefund(ctx context.Context, f model.Refund) (bool, error) {
	if f.TradeNo != tx.pay.TradeNo || f.OrderID != 0 {
		return false, fmt.Errorf("%w: a refund of another payment in the transaction of %q", ErrLockOrder, tx.pay.TradeNo)
	}
	now := time.Now().UTC()
	return tx.s.insertRefundRow(ctx, f.OutRequestNo, map[string]any{
		"out_request_no": f.OutRequestNo, "kind": string(f.Kind), "provider": string(f.Provider),
		"account": f.Account, "app": f.App, "trade_no": f.TradeNo, "out_trade_no": f.OutTradeNo, "order_id": nil,
		"amount": f.Amount.StringFixed(2), "reason": f.Reason, "state": model.RefundRefunding,
		"next_attempt_at": now, "create_time": now, "update_time": now,
	}, "", "", now)
}

// InsertFinishedRefund records a refund of the payment that is already
// REFUNDED (found in Alipay's bill), unless its out_request_no exists, and
// reports whether it did.
func (tx *OrderlessTx) InsertFinishedRefund(ctx context.Context, f model.Refund) (bool, error) {
	if f.TradeNo != tx.pay.TradeNo {
		return false, fmt.Errorf("%w: a refund of another payment in the transaction of %q", ErrLockOrder, tx.pay.TradeNo)
	}
	f.OrderID = 0
	return tx.s.insertFinishedRefund(ctx, f)
}

// Refund reads one of the payment's refunds (model.ErrRefundNotFound for
// any other).
func (tx *OrderlessTx) Refund(ctx context.Context, outRequestNo string) (model.Refund, error) {
	f, err := tx.s.Refund(ctx, outRequestNo)
	if err == nil && (f.OrderID != 0 || f.Provider != tx.pay.Provider || f.TradeNo != tx.pay.TradeNo) {
		return model.Refund{}, fmt.Errorf("%w: %q is not a refund of payment %s", model.ErrRefundNotFound, outRequestNo, tx.pay.TradeNo)
	}
	return f, err
}

// FinishRefund moves one of the payment's refunds from REFUNDING to its
// end state (compare-and-set) and reports whether it did.
func (tx *OrderlessTx) FinishRefund(ctx context.Context, outRequestNo string, to model.RefundState, lastError string) (bool, error) {
	now := time.Now().UTC()
	res := tx.s.db.WithContext(ctx).Model(&refundRecord{}).
		Where("out_request_no = ? AND trade_no = ? AND order_id IS NULL AND state = ?", outRequestNo, tx.pay.TradeNo, model.RefundRefunding).
		Updates(map[string]any{"state": to, "last_error": model.Truncate(lastError, 500), "update_time": now})
	return tx.s.changed(ctx, res, outRequestNo, model.RefundRefunding, to, "", lastError, now)
}

// InsertEvents writes events to the outbox.
func (tx *OrderlessTx) InsertEvents(ctx context.Context, events ...model.Event) error {
	return tx.s.insertEvents(ctx, events...)
}

// UnmatchedPayments lists up to limit UNMATCHED payments, oldest first
// (plain read), for operators.
func (s *Store) UnmatchedPayments(ctx context.Context, limit int) ([]model.Payment, error) {
	var ps []model.Payment
	err := s.db.WithContext(ctx).Table(paymentTable).Select(paymentColumns).
		Where("state = ?", model.PaymentUnmatched).Order("create_time, trade_no").Limit(limit).Find(&ps).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return ps, mapErr(err)
}
