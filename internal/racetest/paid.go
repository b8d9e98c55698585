package racetest

import (
	"testing"

	"paynotify/model"
)

// PaidOnce checks what two trades racing to pay order sn must leave: the
// order paid, one payment APPLIED and the other REFUND_PENDING as already
// paid. It returns the trade_no that was applied.
func PaidOnce(t testing.TB, sn string, o model.Order, ps []model.Payment) (applied string) {
	t.Helper()
	states := map[model.PaymentState]int{}
	for _, p := range ps {
		states[p.State]++
		if p.State == model.PaymentApplied {
			applied = p.TradeNo
		}
		if p.State == model.PaymentRefundPending && p.Reason != model.RefundAlreadyPaid {
			t.Fatalf("%s: refund reason %q", sn, p.Reason)
		}
	}
	if o.Status != model.OrderPaid || len(ps) != 2 || states[model.PaymentApplied] != 1 || states[model.PaymentRefundPending] != 1 {
		t.Fatalf("%s: status %d, payments %v; want paid, one APPLIED and one REFUND_PENDING", sn, o.Status, states)
	}
	return applied
}
