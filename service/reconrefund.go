package service

import (
	"context"
	"fmt"
	"strings"

	"paynotify/dao"
	"paynotify/model"
)

// settledNote begins the last_error of a refund settleFailed moved from
// REFUND_FAILED to REFUNDED: it is how a re-run knows the refund as one
// the bill contradicted.
const settledNote = "REFUND_FAILED here, refunded in its provider's bill of "

// settledNoteAlipay is settledNote as runs before WeChat Pay wrote it:
// refunds they settled keep it.
const settledNoteAlipay = "REFUND_FAILED here, refunded in Alipay's bill of "

const settledDetail = "we held this refund as REFUND_FAILED; its provider refunded it: now REFUNDED, counted against its payment"

// settledFromBill reports whether f is a refund settleFailed settled.
func settledFromBill(f model.Refund) bool {
	return f.State == model.RefundRefunded && (strings.HasPrefix(f.LastError, settledNote) || strings.HasPrefix(f.LastError, settledNoteAlipay))
}

// settleFailed handles a bill refund we hold as REFUND_FAILED: the
// provider made it, so it is recorded as made — REFUNDED (and an automatic
// refund's payment with it), booked once (payment.refunded) — and counts
// against its payment from now on, so a later refund never exceeds what
// is left. The item stays open: a refund the provider refused and then made
// needs an operator's eye.
func (m *matcher) settleFailed(ctx context.Context, e model.BillEntry, f model.Refund) (model.ReconItem, error) {
	amount := e.Amount.Neg()
	it := model.ReconItem{Outcome: model.ReconUnknownRefund, Ref: e.OutRequestNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		OutRequestNo: e.OutRequestNo, BillAmount: amountPtr(amount), LedgerAmount: amountPtr(f.Amount),
		Detail: settledDetail}
	note := settledNote + m.date
	ev, err := refundEvent(model.EventRefunded, f, "", m.r.now())
	if err != nil {
		return it, err
	}
	settled := false
	if f.OrderID == 0 {
		err = m.r.store.UpdateOrderless(ctx, f.Provider, f.TradeNo, func(ctx context.Context, tx *dao.OrderlessTx, _ model.Payment) error {
			settled = false
			moved, err := tx.SettleFailedRefund(ctx, f.OutRequestNo, note)
			if err != nil || !moved {
				return err
			}
			if _, err := tx.SetPaymentState(ctx, model.PaymentRefundFailed, model.PaymentRefunded); err != nil {
				return err
			}
			settled = true
			return tx.InsertEvents(ctx, ev)
		})
	} else {
		err = m.r.store.UpdateOrder(ctx, dao.OrderID(f.OrderID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			settled = false
			moved, err := tx.SettleFailedRefund(ctx, f.OutRequestNo, note)
			if err != nil || !moved {
				return err
			}
			if f.Kind == model.RefundAuto {
				if _, err := tx.SetPaymentState(ctx, f.Provider, f.TradeNo, model.PaymentRefundFailed, model.PaymentRefunded); err != nil {
					return err
				}
			}
			settled = true
			return tx.InsertEvents(ctx, ev)
		})
	}
	if err != nil {
		return it, fmt.Errorf("settle failed refund %s: %w", f.OutRequestNo, err)
	}
	if settled {
		m.r.log.Warn("reconciliation: a refund we held as failed was made; recorded REFUNDED", "out_request_no", f.OutRequestNo,
			"trade_no", f.TradeNo, "amount", f.Amount)
	}
	return it, nil
}

// maxLater bounds the refunds a run holds back until every batch is done
// (refunds of payments not in the ledger when their batch was matched):
// past it, they are recorded at once, perhaps without their payment.
const maxLater = 100000

// later holds back a bill refund whose payment is not in the ledger: a
// payment line of the same bill, in another batch, may be repairing it.
// It reports whether it did.
func (m *matcher) later(e model.BillEntry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.held) >= maxLater {
		return false
	}
	m.held = append(m.held, e)
	return true
}

// unknownRefundsLater records the refunds held back, now that every
// payment of the bill is in the ledger (repaired): a console refund of a
// payment the ledger lacked is recorded against that payment, in the same
// run that repaired it.
func (m *matcher) unknownRefundsLater(ctx context.Context) error {
	held := m.held
	m.held = nil
	for len(held) > 0 {
		batch := held[:min(len(held), max(m.r.Batch, 1))]
		held = held[len(batch):]
		tradeNos := make([]string, len(batch))
		for i, e := range batch {
			tradeNos[i] = e.TradeNo
		}
		pays, err := m.r.store.PaymentsByTradeNo(ctx, m.r.Provider, tradeNos)
		if err != nil {
			return err
		}
		items := make([]model.ReconItem, 0, len(batch))
		for _, e := range batch {
			it, err := m.unknownRefund(ctx, e, pays)
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		if err := m.save(ctx, items); err != nil {
			return err
		}
	}
	return nil
}
