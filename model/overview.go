package model

import (
	"time"

	"github.com/shopspring/decimal"
)

// Tally counts rows and sums their money.
type Tally struct {
	Count  int64
	Amount decimal.Decimal
}

// Add adds one row's amount to the tally.
func (t Tally) Add(n int64, amount decimal.Decimal) Tally {
	return Tally{Count: t.Count + n, Amount: t.Amount.Add(amount)}
}

// PaymentTally is how many payments (and how much money) were recorded
// in a window, in one state and with one reason.
type PaymentTally struct {
	State  PaymentState
	Reason RefundReason
	Tally
}

// QueueCount is how many rows wait in one queue, and since when the
// oldest has waited.
type QueueCount struct {
	Count  int64
	Oldest *time.Time
	// AtLeast: there are Count rows or more (a history too long to count
	// on every page view, such as the outbox's sent rows).
	AtLeast bool
}

// PaymentMark is one payment on the overview's per-minute chart: when it
// was recorded and how it was decided.
type PaymentMark struct {
	At     time.Time
	State  PaymentState
	Reason RefundReason
}

// NotifyOutcome is how a payment was decided when it arrived, read back
// from the ledger: applied, refund_pending (closed, already paid, amount
// differs) or unmatched (no order).
func (p PaymentTally) NotifyOutcome() Outcome { return OutcomeOf(p.State, p.Reason) }

// OutcomeOf reads a ledger row's decision: a payment is APPLIED, or
// carries the reason it could not be applied, or — with no reason and not
// applied — found no order (UNMATCHED). Its state moves on (REFUNDING,
// REFUNDED) but the reason stays, so the decision can still be read.
func OutcomeOf(state PaymentState, reason RefundReason) Outcome {
	switch {
	case reason != RefundNone:
		return OutcomeRefundPending
	case state == PaymentApplied:
		return OutcomeApplied
	}
	return OutcomeUnmatched
}
