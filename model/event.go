package model

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/shopspring/decimal"
)

// EventType names what happened; it is the last part of the NATS subject.
type EventType string

// Events worth announcing, each written in the transaction of its change.
const (
	EventOrderCreated  EventType = "order.created"
	EventOrderPaid     EventType = "order.paid"
	EventOrderClosed   EventType = "order.closed"
	EventRefundPending EventType = "payment.refund_pending"
	EventRefunded      EventType = "payment.refunded"
	EventRefundFailed  EventType = "payment.refund_failed"
	EventTradeClosed   EventType = "trade.closed"
)

// TradeEventData is the data of trade.closed: an Alipay trade (payment
// attempt) closed, so it can no longer be paid.
type TradeEventData struct {
	OrderID  int64  `json:"order_id"`
	Provider string `json:"provider"`
	// Account and App are the provider account and app the trade was open
	// in ("" in events of rows written before several: the provider's
	// first account, its first app).
	Account    string `json:"account"`
	App        string `json:"app"`
	AttemptNo  int    `json:"attempt_no"`
	OutTradeNo string `json:"out_trade_no"`
	Method     string `json:"method"`
	Reason     string `json:"reason"`
}

// Event is one announcement: the envelope a consumer receives.
type Event struct {
	ID          string          `json:"id"`
	Type        EventType       `json:"type"`
	AggregateID int64           `json:"aggregate_id"`
	OccurredAt  time.Time       `json:"occurred_at"`
	Data        json.RawMessage `json:"data"`
}

// OrderID is the order the event is about, 0 when none: the aggregate of
// payment.fees_booked is a reconciliation run (a day's fees belong to no
// order), and an orderless payment's events name order 0.
func (e Event) OrderID() int64 {
	if e.Type.OfRun() {
		return 0
	}
	return e.AggregateID
}

// OfRun says whether the event's aggregate is a reconciliation run, not an
// order.
func (t EventType) OfRun() bool { return slices.Contains(RunEventTypes, t) }

// RunEventTypes are the event types whose aggregate is a reconciliation
// run.
var RunEventTypes = []EventType{EventFeesBooked}

// OrderEventData is the data of order.created and order.closed.
type OrderEventData struct {
	OrderID     int64  `json:"order_id"`
	OrderSN     string `json:"order_sn"`
	MemberID    int64  `json:"member_id"`
	PayAmount   string `json:"pay_amount"`
	TotalAmount string `json:"total_amount"`
	Status      int    `json:"status"`
	// Reason says why an order closed: "cancelled" or "timeout".
	Reason string `json:"reason,omitempty"`
}

// PaymentEventData is the data of order.paid and payment.refund_pending.
type PaymentEventData struct {
	OrderID    int64      `json:"order_id"`
	OrderSN    string     `json:"order_sn"`
	Provider   string     `json:"provider"`
	Account    string     `json:"account"`
	App        string     `json:"app"`
	TradeNo    string     `json:"trade_no"`
	OutTradeNo string     `json:"out_trade_no"`
	Amount     string     `json:"amount"`
	State      string     `json:"state"`
	Reason     string     `json:"reason,omitempty"`
	PaidAt     *time.Time `json:"paid_at,omitempty"`
}

// OutboxState is where an outbox row stands.
type OutboxState string

// Outbox states. FAILED rows are still retried, on a longer back-off: the
// state makes them visible, it never drops them.
const (
	OutboxPending OutboxState = "PENDING"
	OutboxSent    OutboxState = "SENT"
	OutboxFailed  OutboxState = "FAILED"
)

// OutboxRow is an event waiting for (or past) publication.
type OutboxRow struct {
	Seq           int64
	Event         Event
	State         OutboxState
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	SentTime      *time.Time
}

// Ledger accounts the accounting consumer books to.
const (
	// AccountAlipayClearing is Alipay's ClearingAccount.
	AccountAlipayClearing = "alipay_clearing"
	// AccountWechatpayClearing is WeChat Pay's ClearingAccount.
	AccountWechatpayClearing = "wechatpay_clearing"
	AccountSales             = "sales"
	AccountRefundsPayable    = "refunds_payable"
	AccountSalesReturns      = "sales_returns"
)

// RefundEventData is the data of payment.refunded and payment.refund_failed.
type RefundEventData struct {
	OrderID      int64  `json:"order_id"`
	OrderSN      string `json:"order_sn"`
	Provider     string `json:"provider"`
	Account      string `json:"account"`
	App          string `json:"app"`
	TradeNo      string `json:"trade_no"`
	OutTradeNo   string `json:"out_trade_no"`
	OutRequestNo string `json:"out_request_no"`
	Kind         string `json:"kind"`
	Amount       string `json:"amount"`
	Reason       string `json:"reason,omitempty"`
}

// JournalLine is one side of a double entry in the accounting journal.
type JournalLine struct {
	EventID   string
	EventType EventType
	OrderID   int64
	OrderSN   string
	Account   string
	Debit     decimal.Decimal
	Credit    decimal.Decimal
}

// AccountTotal is what an account was debited and credited in all.
type AccountTotal struct {
	Account string          `json:"account"`
	Debit   decimal.Decimal `json:"debit"`
	Credit  decimal.Decimal `json:"credit"`
}
