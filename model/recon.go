package model

import (
	"errors"
	"time"

	"github.com/shopspring/decimal"
)

// ReconState is where a reconciliation run stands.
type ReconState string

// Run states.
const (
	// ReconRunning: an instance holds the date (until its lease ends).
	ReconRunning ReconState = "RUNNING"
	// ReconDone: the bill was read and matched; see its items.
	ReconDone ReconState = "DONE"
	// ReconFailed: the bill could not be fetched or read; nothing was
	// repaired. Failed dates of the last week are retried.
	ReconFailed ReconState = "FAILED"
	// ReconAbandoned is an attempt's, never a run's: its instance stopped
	// (killed, or its lease ran out) before finishing, and another attempt
	// claimed the run. Its counts are what it had committed.
	ReconAbandoned ReconState = "ABANDONED"
)

// ReconOutcome is what reconciliation found about one payment or refund.
type ReconOutcome string

// Outcomes of reconciliation. Only differences are recorded; a line that
// matches its ledger row is no item.
const (
	// ReconRepaired: in the bill, missing from the ledger; recorded through
	// the notification path (APPLIED or REFUND_PENDING). Resolved by the
	// repair itself.
	ReconRepaired ReconOutcome = "REPAIRED"
	// ReconUnmatched: a payment whose out_trade_no names no order: the
	// money is ours with nothing to apply it to. Refund it, or resolve.
	ReconUnmatched ReconOutcome = "UNMATCHED"
	// ReconRepairFailed: a bill payment the ledger lacks that could not be
	// recorded (its trade_no is bound to another order or amount).
	ReconRepairFailed ReconOutcome = "REPAIR_FAILED"
	// ReconMissingAtProvider: money moved in our ledger that the
	// provider's bill does not show. Nothing is changed; it may be a
	// notification we should not have trusted.
	ReconMissingAtProvider ReconOutcome = "MISSING_AT_PROVIDER"
	// ReconAmountDiffers: both sides have it, with different amounts.
	ReconAmountDiffers ReconOutcome = "AMOUNT_DIFFERS"
	// ReconRefundMissingAtProvider: we say REFUNDED, the provider's bill
	// has no such refund.
	ReconRefundMissingAtProvider ReconOutcome = "REFUND_MISSING_AT_PROVIDER"
	// ReconUnknownRefund: a refund in the bill we never made (from the
	// merchant console), or one we hold as failed. It is recorded against
	// its payment, so later refunds never exceed what is left.
	ReconUnknownRefund ReconOutcome = "UNKNOWN_REFUND"
	// ReconOutsideBillDay: a bill line that finished outside the bill's
	// day (and the minutes before it a late payment may have): the bill
	// vouches for its own day only, so it is neither repaired nor matched
	// and its fee not booked. Look at it; reconcile its own day.
	ReconOutsideBillDay ReconOutcome = "OUTSIDE_BILL_DAY"
)

// ReconOutcomes lists every outcome, in the order views show them.
var ReconOutcomes = []ReconOutcome{
	ReconRepaired, ReconUnmatched, ReconRepairFailed, ReconMissingAtProvider,
	ReconAmountDiffers, ReconRefundMissingAtProvider, ReconUnknownRefund, ReconOutsideBillDay,
}

// ReconOutcomeNamed reads an outcome as a filter names it: one of
// ReconOutcomes, or a name migration 00013 renamed (MISSING_AT_ALIPAY,
// REFUND_MISSING_AT_ALIPAY), which reads as its new name so that an old
// script's filter still finds the rows.
func ReconOutcomeNamed(s string) ReconOutcome {
	switch o := ReconOutcome(s); o {
	case "MISSING_AT_ALIPAY":
		return ReconMissingAtProvider
	case "REFUND_MISSING_AT_ALIPAY":
		return ReconRefundMissingAtProvider
	default:
		return o
	}
}

// Valid reports whether o is a known outcome.
func (o ReconOutcome) Valid() bool {
	for _, x := range ReconOutcomes {
		if x == o {
			return true
		}
	}
	return false
}

// ReconRun is one (provider, account, bill date) reconciliation — a bill
// covers one account — : the state of its latest attempt, and the bill's
// totals against the ledger's.
type ReconRun struct {
	ID       int64    `json:"id"`
	Provider Provider `json:"provider"`
	// Account is the provider account whose bill it is (Alipay's
	// seller_id, WeChat Pay's mchid); '' for a run from before runs were
	// kept per account: the provider's first account's.
	Account    string     `json:"account"`
	BillDate   string     `json:"bill_date"` // yyyy-MM-dd, Beijing
	State      ReconState `json:"state"`
	Attempts   int        `json:"attempts"`
	Owner      string     `json:"owner,omitempty"`
	LeaseUntil time.Time  `json:"-"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Error      string     `json:"error,omitempty"`
	// Bill is what the bill says (zero when it could not be read, or Alipay
	// had none); Ledger is what our ledger holds for the same day.
	Bill   BillTotals   `json:"bill"`
	Ledger LedgerTotals `json:"ledger"`
	// Counts are the items by outcome; Unresolved those that need a look
	// (unresolved, and not REPAIRED: the console's reconciliation queue).
	Counts     map[ReconOutcome]int `json:"counts"`
	Unresolved int                  `json:"unresolved"`
}

// LedgerTotals are our ledger's payments and finished refunds of a day.
type LedgerTotals struct {
	Payments      int             `json:"payments"`
	PaymentAmount decimal.Decimal `json:"payment_amount"`
	Refunds       int             `json:"refunds"`
	RefundAmount  decimal.Decimal `json:"refund_amount"`
}

// ReconAttempt is one try at a run, kept as history.
type ReconAttempt struct {
	AttemptNo  int        `json:"attempt_no"`
	Owner      string     `json:"owner"`
	State      ReconState `json:"state"`
	Error      string     `json:"error,omitempty"`
	Items      int        `json:"items"`
	Repaired   int        `json:"repaired"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// ReconItem is one difference a run found, with both sides' amounts.
type ReconItem struct {
	ID           int64            `json:"id"`
	RunID        int64            `json:"run_id"`
	AttemptNo    int              `json:"attempt_no"`
	Outcome      ReconOutcome     `json:"outcome"`
	Ref          string           `json:"ref"`
	TradeNo      string           `json:"trade_no,omitempty"`
	OutTradeNo   string           `json:"out_trade_no,omitempty"`
	OutRequestNo string           `json:"out_request_no,omitempty"`
	BillAmount   *decimal.Decimal `json:"bill_amount,omitempty"`
	LedgerAmount *decimal.Decimal `json:"ledger_amount,omitempty"`
	Detail       string           `json:"detail,omitempty"`
	ResolvedAt   *time.Time       `json:"resolved_at,omitempty"`
	ResolvedBy   string           `json:"resolved_by,omitempty"`
	Note         string           `json:"note,omitempty"`
}

// SeenLine is a bill line matched to the ledger: a payment by trade_no, a
// refund by out_request_no, with its service fee.
type SeenLine struct {
	Kind    BillKind
	Ref     string
	TradeNo string
	Amount  decimal.Decimal
	Fee     decimal.Decimal
}

// FeeEventData is the data of payment.fees_booked: Alipay's service fees
// of bill lines matched for the first time (a negative fee is charged, a
// positive one given back with a refund).
type FeeEventData struct {
	Provider string `json:"provider"`
	// Account is the provider account whose bill booked the fees ('' in
	// events written before runs were kept per account).
	Account  string `json:"account"`
	BillDate string `json:"bill_date"`
	Lines    int    `json:"lines"`
	// Amount is the net fee charged: positive is an expense.
	Amount string `json:"amount"`
}

// Errors of reconciliation.
var (
	// ErrRunBusy: another instance holds the date's run (its lease has not
	// ended).
	ErrRunBusy = errors.New("reconciliation of that date is running elsewhere")
	// ErrRunLost: this instance's lease on the run ended and another took
	// it; the attempt stops.
	ErrRunLost = errors.New("reconciliation lease lost")
	// ErrRunPurged: the date's matched bill lines were deleted by the
	// retention job (RECON_RETENTION): run again, it would book the day's
	// fees a second time, so it is never run again.
	ErrRunPurged = errors.New("reconciliation of that date is closed: its bill lines are past RECON_RETENTION")
	// ErrRunNotFound: no run for that date.
	ErrRunNotFound = errors.New("reconciliation run not found")
	// ErrItemNotFound: no reconciliation item with that id.
	ErrItemNotFound = errors.New("reconciliation item not found")
)

// RefundConsole is a refund Alipay's bill shows and we never asked for
// (the merchant's console): recorded REFUNDED so that later refunds of its
// payment never exceed what is left.
const RefundConsole RefundKind = "CONSOLE"

// Events of reconciliation and of payments without an order.
const (
	// EventPaymentUnmatched: a verified payment names no order; the money
	// is recorded UNMATCHED until an operator refunds it.
	EventPaymentUnmatched EventType = "payment.unmatched"
	// EventFeesBooked: Alipay's service fees of newly matched bill lines.
	EventFeesBooked EventType = "payment.fees_booked"
)

// AccountFeeExpense is where Alipay's service fees are booked.
const AccountFeeExpense = "fee_expense"

// ErrNotUnmatched: the payment is not UNMATCHED — it has an order, or its
// refund was asked for already under another idempotency key.
var ErrNotUnmatched = errors.New("payment is not an unmatched payment awaiting refund")

// RefundUnmatchedReason is the reason an UNMATCHED payment's refund
// carries.
const RefundUnmatchedReason = "UNMATCHED"

// ReconRow is a reconciliation item with the bill date of its run and
// when the item was first found.
type ReconRow struct {
	ReconItem
	// Provider, Account and BillDate are the item's run's.
	Provider   Provider
	Account    string
	BillDate   string
	CreateTime time.Time
	// PaymentState is the state of the payment the item's trade_no names
	// in our ledger now ("" when the ledger has none).
	PaymentState PaymentState
}

// BillAccount is a provider account as reconciliation knows it: one bill
// a day, one run a day. Legacy, set for the provider's first account, says
// the rows from before the ledger knew accounts (account "") are its too.
type BillAccount struct {
	Provider Provider
	Account  string
	Legacy   bool
}

// RunAccounts are the account values of the runs of a: its own, and ""
// when it is Legacy.
func (a BillAccount) RunAccounts() []string {
	if a.Legacy && a.Account != "" {
		return []string{a.Account, ""}
	}
	return []string{a.Account}
}

// String names a in errors and logs: "alipay 2088…", or the provider alone
// when the account has no id.
func (a BillAccount) String() string {
	if a.Account == "" {
		return string(a.Provider)
	}
	return string(a.Provider) + " " + a.Account
}
