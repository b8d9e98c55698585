package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/model"
)

// Payments without an order (UNMATCHED): recorded by Payments.Observe when
// a verified payment's out_trade_no names no order, refunded when an
// operator says so: UNMATCHED → REFUND_PENDING → REFUNDING → REFUNDED,
// through the same worker as every automatic refund. Their transactions
// lock the payment row first, having no order row (dao.UpdateOrderless).

// RefundUnmatched asks for an UNMATCHED payment to be refunded in full,
// under an operator's idempotency key: UNMATCHED → REFUND_PENDING, which
// the refund worker carries on. The same key again answers the payment as
// it stands; another key, or a payment that has an order, is
// model.ErrNotUnmatched. It is the admin API's: the change is written to
// admin_audit in its transaction as model.OperatorAdminAPI's.
func (r *Refunds) RefundUnmatched(ctx context.Context, provider model.Provider, tradeNo, key string) (model.Payment, error) {
	return r.refundUnmatched(ctx, provider, tradeNo, key, nil)
}

// RefundUnmatchedAs is RefundUnmatched by a console operator: the form's
// one-time key is the idempotency key, recorded in admin_audit in the
// same transaction, first — so the same form again is
// model.ErrAlreadyDone.
func (r *Refunds) RefundUnmatchedAs(ctx context.Context, act model.Act, provider model.Provider, tradeNo string) (model.Payment, error) {
	if err := checkAct(act, false); err != nil {
		return model.Payment{}, err
	}
	return r.refundUnmatched(ctx, provider, tradeNo, act.Key, &act)
}

func (r *Refunds) refundUnmatched(ctx context.Context, provider model.Provider, tradeNo, key string, act *model.Act) (model.Payment, error) {
	if err := model.CheckIdempotencyKey(key); err != nil {
		return model.Payment{}, err
	}
	if !model.ValidID(tradeNo) {
		return model.Payment{}, fmt.Errorf("%w: %q", model.ErrPaymentNotFound, tradeNo)
	}
	var out model.Payment
	err := r.store.UpdateOrderless(ctx, provider, tradeNo, func(ctx context.Context, tx *dao.OrderlessTx, p model.Payment) error {
		out = p
		audit := func(by model.Act) error {
			return tx.InsertAudit(ctx, model.Audit{Key: by.Key, Operator: by.Operator, Action: model.AuditPaymentRefund,
				TargetKind: model.TargetPayment, TargetID: tradeNo, Before: string(p.State),
				After: fmt.Sprintf("%s, %s to refund in full", model.PaymentRefundPending, p.Amount.StringFixed(2)), Note: by.Note})
		}
		if act != nil {
			// First: the same form again stops here.
			if err := audit(*act); err != nil {
				return err
			}
			if p.State != model.PaymentUnmatched {
				return fmt.Errorf("%w: payment %q is %s", model.ErrNotUnmatched, tradeNo, p.State)
			}
		}
		if p.State == model.PaymentUnmatched {
			if act == nil {
				// Through the admin API: recorded when it moves, once.
				if err := audit(model.Act{Operator: model.OperatorAdminAPI, Key: apiKey(model.AuditPaymentRefund, tradeNo)}); err != nil {
					return err
				}
			}
			moved, err := tx.SetPaymentState(ctx, model.PaymentUnmatched, model.PaymentRefundPending)
			if err != nil {
				return err
			}
			if !moved {
				return fmt.Errorf("%w: payment %q changed under its lock", model.ErrStateChanged, tradeNo)
			}
			out.State = model.PaymentRefundPending
			return tx.SetRefundKey(ctx, key)
		}
		prev, err := tx.RefundKey(ctx)
		if err != nil {
			return err
		}
		if prev != key {
			return fmt.Errorf("%w: payment %q is %s", model.ErrNotUnmatched, tradeNo, p.State)
		}
		return nil // the same request again
	})
	if errors.Is(err, dao.ErrLockOrder) {
		return model.Payment{}, fmt.Errorf("%w: payment %q belongs to an order: refund the order", model.ErrNotUnmatched, tradeNo)
	}
	if err == nil {
		r.log.Info("unmatched payment to be refunded", "trade_no", tradeNo, "amount", out.Amount)
	}
	return out, err
}

// leftOf is what is left of p to refund: its amount less its trade's
// refunds that did not fail — including those made outside this service
// and found in the bill — other than its own automatic refund (what an
// automatic refund is sized by).
func leftOf(p model.Payment, refunds []model.Refund) decimal.Decimal {
	left := p.Amount
	own := autoRequestNo(p)
	for _, f := range refunds {
		if f.TradeNo == p.TradeNo && f.OutRequestNo != own && f.State != model.RefundFailed {
			left = left.Sub(f.Amount)
		}
	}
	return left
}

// enqueueOrderless turns a REFUND_PENDING payment without an order into
// its refund (payment → REFUNDING), under the payment's lock.
// An operator's ask (act) is recorded in admin_audit first, and rolled
// back with everything else when there was nothing to move.
func (r *Refunds) enqueueOrderless(ctx context.Context, p model.Payment, act *model.Act) (bool, error) {
	enqueued := false
	err := r.store.UpdateOrderless(ctx, p.Provider, p.TradeNo, func(ctx context.Context, tx *dao.OrderlessTx, p model.Payment) error {
		enqueued = false
		refunds, err := tx.Refunds(ctx)
		if err != nil {
			return err
		}
		left := leftOf(p, refunds)
		if act != nil {
			if err := tx.InsertAudit(ctx, model.Audit{Key: act.Key, Operator: act.Operator, Action: model.AuditPaymentRefund,
				TargetKind: model.TargetPayment, TargetID: p.TradeNo, Before: string(p.State),
				After: fmt.Sprintf("%s, refund %s of %s", model.PaymentRefunding, autoRequestNo(p), left.StringFixed(2)), Note: act.Note}); err != nil {
				return err
			}
		}
		to := model.PaymentRefunding
		if !left.IsPositive() {
			to = model.PaymentRefunded // nothing left to give back
		}
		moved, err := tx.SetPaymentState(ctx, model.PaymentRefundPending, to)
		if err != nil {
			return err
		}
		if !moved {
			return errNotMoved // another worker took it
		}
		if to == model.PaymentRefunded {
			return nil
		}
		_, err = tx.InsertRefund(ctx, model.Refund{
			OutRequestNo: autoRequestNo(p), Kind: model.RefundAuto, Provider: p.Provider, Account: p.Account, App: p.App, TradeNo: p.TradeNo,
			OutTradeNo: p.OutTradeNo, Amount: left, Reason: model.RefundUnmatchedReason,
		})
		enqueued = err == nil
		return err
	})
	if errors.Is(err, errNotMoved) {
		return false, nil
	}
	return enqueued, err
}

// finishOrderless records the end of a refund of a payment without an
// order, with the payment's state and the event, under the payment's
// lock.
func (r *Refunds) finishOrderless(ctx context.Context, f model.Refund, to model.RefundState, reason string) error {
	finished := false
	err := r.store.UpdateOrderless(ctx, f.Provider, f.TradeNo, func(ctx context.Context, tx *dao.OrderlessTx, _ model.Payment) error {
		finished = false
		moved, err := tx.FinishRefund(ctx, f.OutRequestNo, to, reason)
		if err != nil || !moved {
			return err // finished by another worker
		}
		pay, _ := refundEnd(to)
		if _, err := tx.SetPaymentState(ctx, model.PaymentRefunding, pay); err != nil {
			return err
		}
		finished = true
		return r.announceEnd(ctx, tx, f, to, "")
	})
	return r.ended(err, finished, f, to)
}

// Unmatched lists up to limit UNMATCHED payments, oldest first: money we
// hold with no order, waiting for an operator.
func (r *Refunds) Unmatched(ctx context.Context, limit int) ([]model.Payment, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	return r.store.UnmatchedPayments(ctx, limit)
}
