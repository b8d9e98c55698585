package model

import (
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// Bill is a provider's fetched trade bill of a day, already checked
// against its own totals.
type Bill interface {
	// BillTotals are the bill's totals (payments, refunds, fees).
	BillTotals() BillTotals
	// Entries streams the bill's lines in file order.
	Entries(fn func(BillEntry) error) error
	Close() error
}

// BillKind is what a line of a provider's trade bill records (Alipay's
// 业务类型, WeChat Pay's 交易状态).
type BillKind string

// Kinds of bill line.
const (
	// BillPayment (交易) is money the buyer paid.
	BillPayment BillKind = "PAYMENT"
	// BillRefund (退款) is money given back; its amounts are negative.
	BillRefund BillKind = "REFUND"
)

// BillEntry is one line of a provider's trade bill in the ledger's terms
// (each adapter's reader makes it): the provider's own record of a
// payment or a refund.
type BillEntry struct {
	// Line is the entry's line number in the detail file, for messages.
	Line int
	Kind BillKind
	// TradeNo is the provider's trade number (Alipay's 支付宝交易号, WeChat
	// Pay's 微信订单号); a refund carries the
	// number of the trade it refunds.
	TradeNo string
	// OutTradeNo is our out_trade_no (商户订单号).
	OutTradeNo string
	// OutRequestNo is the refund's out_request_no (退款批次号/请求号);
	// empty for a payment.
	OutRequestNo string
	// Amount is the order amount (订单金额), negative for a refund.
	Amount decimal.Decimal
	// Received is what the merchant received (商家实收), negative for a
	// refund.
	Received decimal.Decimal
	// Fee is the provider's service fee (服务费, 手续费): negative when
	// charged, positive when given back with a refund, as the bill
	// writes it.
	Fee decimal.Decimal
	// FinishedAt is when the provider completed it, in UTC.
	FinishedAt time.Time
	// App is the app the line names (WeChat Pay's 公众账号ID); empty when
	// the bill names none (Alipay's covers the seller account, with no
	// app column).
	App string
}

// Check refuses a bill line the ledger could not take as it stands, with
// the same rules a notification meets (Observation.Check): its kind; its
// trade_no, out_trade_no and (a refund's) out_request_no Recordable within
// their columns; its amount (a refund's negated) as CheckAmount wants it,
// what the merchant received and the fee within MaxAmount and signed as
// the kind signs them; a finish time. A reconciliation run checks every
// line of a bill with it before it repairs anything, whichever provider's
// reader made the lines. Errors wrap ErrBadBill and name the line.
func (e BillEntry) Check() error {
	fail := func(err error) error { return fmt.Errorf("%w: line %d: %w", ErrBadBill, e.Line, err) }
	if e.Kind != BillPayment && e.Kind != BillRefund {
		return fail(fmt.Errorf("kind %q is neither %s nor %s", Clip(string(e.Kind)), BillPayment, BillRefund))
	}
	if err := checkRef("trade_no", e.TradeNo, MaxTradeNoLen); err != nil {
		return fail(err)
	}
	if err := checkRef("out_trade_no", e.OutTradeNo, MaxRefLen); err != nil {
		return fail(err)
	}
	amount, received := e.Amount, e.Received
	if e.Kind == BillRefund {
		if err := checkRef("out_request_no", e.OutRequestNo, MaxRefLen); err != nil {
			return fail(err)
		}
		amount, received = amount.Neg(), received.Neg()
	}
	if err := CheckAmount(amount); err != nil {
		return fail(fmt.Errorf("a %s's %w", e.Kind, err))
	}
	if received.IsNegative() || received.GreaterThan(MaxAmount) || !received.Equal(received.Round(2)) {
		return fail(fmt.Errorf("a %s of %s received %s", e.Kind, e.Amount.StringFixed(2), Clip(e.Received.String())))
	}
	if e.Fee.Abs().GreaterThan(MaxAmount) {
		return fail(fmt.Errorf("a fee of %s", Clip(e.Fee.String())))
	}
	if e.FinishedAt.Before(EarliestPayment) {
		return fail(fmt.Errorf("a %s finished at %s, before any payment", e.Kind, e.FinishedAt.Format(time.DateTime)))
	}
	return nil
}

// BillTotals are what a bill says about itself (#交易合计, #退款合计), or
// what its lines add up to.
type BillTotals struct {
	Payments        int             `json:"payments"`
	PaymentReceived decimal.Decimal `json:"payment_received"`
	Refunds         int             `json:"refunds"`
	// RefundReceived is the sum of the refunds' 商家实收, negative.
	RefundReceived decimal.Decimal `json:"refund_received"`
	Fees           decimal.Decimal `json:"fees"`
}

// Add counts e into t.
func (t *BillTotals) Add(e BillEntry) {
	switch e.Kind {
	case BillPayment:
		t.Payments++
		t.PaymentReceived = t.PaymentReceived.Add(e.Received)
	case BillRefund:
		t.Refunds++
		t.RefundReceived = t.RefundReceived.Add(e.Received)
	}
	t.Fees = t.Fees.Add(e.Fee)
}

// Errors of fetching a bill.
var (
	// ErrBadBill: the bill file is damaged or disagrees with itself (a
	// truncated ZIP, another encoding, a missing column, totals that do not
	// add up). Nothing in it may be trusted.
	ErrBadBill = errors.New("bad bill")
	// ErrNoBill: the provider has no bill for that day (Alipay's
	// NO_BILL_DATA, BILL_NOT_EXIST): no business that day.
	ErrNoBill = errors.New("no bill for that day")
)
