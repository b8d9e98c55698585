package model

import "github.com/shopspring/decimal"

// Outcome is what observing a payment did.
type Outcome string

// Outcomes of observing a payment.
const (
	// OutcomeApplied: the payment paid its order (order 0→1).
	OutcomeApplied Outcome = "applied"
	// OutcomeRefundPending: recorded, owed back; the order is unchanged.
	OutcomeRefundPending Outcome = "refund_pending"
	// OutcomeDuplicate: this trade was recorded before; nothing changed.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeUnmatched: recorded UNMATCHED: no order has that
	// out_trade_no.
	OutcomeUnmatched Outcome = "unmatched"
)

// Decide says what a payment not seen before does to its order, which the
// caller holds locked. It is the whole decision table for a new trade:
//
//	order awaiting payment, amount equal  → APPLIED (order becomes paid)
//	order closed or invalid               → REFUND_PENDING (never reopened)
//	order already paid (by another trade) → REFUND_PENDING
//	order awaiting payment, amount differs→ REFUND_PENDING
func Decide(o Order, amount decimal.Decimal) (PaymentState, RefundReason) {
	switch o.Status {
	case OrderAwaitingPayment:
		if amount.Equal(o.PayAmount) {
			return PaymentApplied, RefundNone
		}
		return PaymentRefundPending, RefundAmountMismatch
	case OrderClosed, OrderInvalid:
		return PaymentRefundPending, RefundOrderClosed
	default:
		return PaymentRefundPending, RefundAlreadyPaid
	}
}

// SameTrade reports whether an already recorded payment is the one a
// notification describes: same order and same amount. If not, the
// trade_no is bound elsewhere and the notification is an anomaly.
func (p Payment) SameTrade(outTradeNo string, amount decimal.Decimal) bool {
	return p.OutTradeNo == outTradeNo && p.Amount.Equal(amount)
}
