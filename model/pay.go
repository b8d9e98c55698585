package model

import (
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// PayMethod is how the buyer pays: with Alipay a page-pay URL (PC), a WAP
// URL (phone browser) or a QR code (alipay.trade.precreate); with WeChat
// Pay a QR code (native), a phone browser's URL (h5), inside WeChat (jsapi)
// or our app (app).
type PayMethod string

// Pay methods.
const (
	PayPage PayMethod = "page"
	PayWap  PayMethod = "wap"
	PayQR   PayMethod = "qr"

	PayNative PayMethod = "native"
	PayH5     PayMethod = "h5"
	PayJSAPI  PayMethod = "jsapi"
	PayApp    PayMethod = "app"
)

// Valid reports whether m is a known method.
func (m PayMethod) Valid() bool {
	switch m {
	case PayPage, PayWap, PayQR, PayNative, PayH5, PayJSAPI, PayApp:
		return true
	}
	return false
}

// Payer is what a provider may need of the buyer's client to start a
// payment: WeChat Pay's jsapi the payer's openid, its h5 the payer's IP.
type Payer struct {
	OpenID string
	IP     string
}

// ClientPay is what a buyer's client passes to the provider's own SDK
// (WeChat Pay's jsapi and app): the prepay_id and the signed parameters.
// It is stored as the attempt's answer in JSON.
type ClientPay struct {
	PrepayID string            `json:"prepay_id"`
	Params   map[string]string `json:"params"`
}

// AttemptState is where a payment attempt (one trade at its provider)
// stands.
type AttemptState string

// Attempt states.
const (
	AttemptOpen   AttemptState = "OPEN"
	AttemptPaid   AttemptState = "PAID"
	AttemptClosed AttemptState = "CLOSED"
	// AttemptExpired: closed, and past its trade's time_expire, confirmed by
	// a query: Alipay can no longer take payment for it.
	AttemptExpired AttemptState = "EXPIRED"
)

// PayAttempt is a row of oms_pay_attempt: one trade at one provider for
// an order. The first attempt's out_trade_no is the order_sn.
type PayAttempt struct {
	ID        int64
	OrderID   int64
	AttemptNo int
	// Provider is who the trade is open at: the jobs ask it, and only it.
	Provider Provider
	// Account and App are the provider account and app the trade is open
	// in (as Payment's): its query and close go through them.
	Account, App string
	OutTradeNo   string
	Method       PayMethod
	Amount       decimal.Decimal
	State        AttemptState
	PayURL       string
	Queries      int
	NextQueryAt  time.Time
	// ExpireAt is the trade's time_expire: Alipay takes no payment after it.
	ExpireAt   time.Time
	CreateTime time.Time
}

// TradeState is where a trade stands at its provider, in the ledger's
// terms: every adapter maps its provider's own words onto these.
type TradeState string

// Trade states.
const (
	// TradeOpen: waiting for the buyer.
	TradeOpen TradeState = "OPEN"
	// TradePaid: the buyer paid (a part refunded since, or not).
	TradePaid TradeState = "PAID"
	// TradeClosed: it takes no payment: closed unpaid, or refunded in
	// full.
	TradeClosed TradeState = "CLOSED"
)

// Paid reports whether money moved in a trade in state s.
func (s TradeState) Paid() bool { return s == TradePaid }

// Trade is what a provider says of a trade when asked, its state in the
// ledger's terms.
type Trade struct {
	Provider   Provider
	OutTradeNo string
	TradeNo    string
	Status     TradeState
	Amount     decimal.Decimal
	PaidAt     *time.Time
}

// More payment states: a REFUND_PENDING payment goes back to the buyer.
const (
	PaymentRefunding    PaymentState = "REFUNDING"
	PaymentRefunded     PaymentState = "REFUNDED"
	PaymentRefundFailed PaymentState = "REFUND_FAILED"
	// PaymentUnmatched: a verified payment whose out_trade_no names no
	// order (recorded without one). An operator refunds it: UNMATCHED →
	// REFUND_PENDING → REFUNDING → REFUNDED.
	PaymentUnmatched PaymentState = "UNMATCHED"
)

// RefundState is where a refund stands.
type RefundState string

// Refund states. REFUNDING covers "not yet asked" and "asked, answer
// unknown": the worker queries before it asks again.
const (
	RefundRefunding RefundState = "REFUNDING"
	RefundRefunded  RefundState = "REFUNDED"
	RefundFailed    RefundState = "REFUND_FAILED"
)

// RefundKind says who asked for a refund.
type RefundKind string

// Refund kinds.
const (
	// RefundAuto returns a REFUND_PENDING payment in full.
	RefundAuto RefundKind = "AUTO"
	// RefundAfterSale is an operator's refund of a paid order.
	RefundAfterSale RefundKind = "AFTER_SALE"
)

// Refund is a row of oms_refund: money on its way back. Its out_request_no
// is derived from what it refunds, so a retry can never refund twice.
type Refund struct {
	OutRequestNo string
	Kind         RefundKind
	Provider     Provider
	// Account and App are the refunded payment's: the refund goes through
	// the app that took the money, never another.
	Account, App   string
	TradeNo        string
	OutTradeNo     string
	OrderID        int64
	Amount         decimal.Decimal
	Reason         string
	State          RefundState
	Attempts       int
	NextAttemptAt  time.Time
	LastError      string
	IdempotencyKey string
	CreateTime     time.Time
	UpdateTime     time.Time
	// ResolvedBy, ResolvedTime and Resolution record the operator who took
	// a failed refund off the queue (settled outside, or left), and why.
	ResolvedBy   string
	ResolvedTime *time.Time
	Resolution   string
}

// PayStart is what a provider needs to start a payment: the attempt's
// trade and what the buyer's client is.
type PayStart struct {
	OutTradeNo string
	Subject    string
	Amount     decimal.Decimal
	Method     PayMethod
	// ExpireAt is the trade's time_expire: the provider takes no payment
	// after it.
	ExpireAt time.Time
	// Payer is what the buyer's client said of itself, if the method
	// needs it.
	Payer Payer
}

// Gateway and payment-start errors. The first four are a payment
// provider's answers; their texts name no provider, so every site that
// wraps one says whose answer it was (alipay's "alipay query: …",
// wechatpay's "wechatpay refund …"), and a ProviderError says it to the
// handler.
var (
	// ErrTradeNotExist: the provider (signed) says it has no such trade —
	// the buyer never scanned or opened the page.
	ErrTradeNotExist = errors.New("trade does not exist at the payment provider")
	// ErrTradeStatus: the provider (signed) refuses because of the trade's
	// state, e.g. closing a trade that is already paid.
	ErrTradeStatus = errors.New("trade state does not allow this at the payment provider")
	// ErrGatewayRefused: the provider answered a signed business failure.
	ErrGatewayRefused = errors.New("the payment provider refused the request")
	// ErrRefundStuck: the provider (signed) says a refund ended without
	// the money going back and will not move by being asked again
	// (WeChat Pay's ABNORMAL: the buyer's account cannot take it; CLOSED).
	// The refund waits for an operator (REFUND_FAILED, in the console's
	// queue) and is never sent again by the worker. It is a refusal.
	ErrRefundStuck = fmt.Errorf("%w: the refund ended without the money going back; an operator settles it", ErrGatewayRefused)
	// ErrGatewayUnknown: no trustworthy answer (timeout, network, unsigned
	// error): the outcome is unknown and must be found out by query.
	ErrGatewayUnknown = errors.New("the payment provider's answer is unknown")
	// ErrOrderNotPayable: the order is not awaiting payment.
	ErrOrderNotPayable = errors.New("order is not awaiting payment")
	// ErrNothingToRefund: the order has no applied payment to refund.
	ErrNothingToRefund = errors.New("order has no applied payment to refund")
	// ErrRefundTooLarge: more than was paid minus what was refunded.
	ErrRefundTooLarge = errors.New("refund exceeds what is left to refund")
)

// ErrAttemptNotFound: no payment attempt matches.
var ErrAttemptNotFound = errors.New("payment attempt not found")

// ErrRefundNotFound: no refund matches.
var ErrRefundNotFound = errors.New("refund not found")

// AttemptChange is a payment attempt with when it last changed state.
type AttemptChange struct {
	PayAttempt
	UpdateTime time.Time
}

// RefundChange is a row of oms_refund_change: one state change of a
// refund, recorded in the transaction that made it. From is "" when the
// change recorded the refund; From equals To for a retry scheduled after
// an unknown outcome and for an operator's resolution.
type RefundChange struct {
	ID           int64
	OutRequestNo string
	From, To     RefundState
	// By is the operator, or "reconciliation"; "" is the refund worker.
	By string
	// Note is Alipay's error or the operator's note.
	Note       string
	CreateTime time.Time
}

// ProviderError is a provider's gateway error (ErrTradeNotExist,
// ErrTradeStatus, ErrGatewayRefused, ErrGatewayUnknown) tagged with the
// provider that answered, so that an API client is told whose answer it
// was. Its text is Err's, which names the provider already.
type ProviderError struct {
	Provider Provider
	Err      error
}

func (e *ProviderError) Error() string { return e.Err.Error() }

// Unwrap is the gateway error.
func (e *ProviderError) Unwrap() error { return e.Err }

// TagProvider wraps err in a ProviderError of p if it is a gateway error
// not tagged yet, and returns any other error (and nil) as it is.
func TagProvider(p Provider, err error) error {
	var pe *ProviderError
	switch {
	case err == nil, errors.As(err, &pe):
		return err
	case errors.Is(err, ErrTradeNotExist), errors.Is(err, ErrTradeStatus),
		errors.Is(err, ErrGatewayRefused), errors.Is(err, ErrGatewayUnknown):
		return &ProviderError{Provider: p, Err: err}
	}
	return err
}

// ProviderOf is the provider a ProviderError in err's chain names, or
// "" if there is none.
func ProviderOf(err error) Provider {
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Provider
	}
	return ""
}
