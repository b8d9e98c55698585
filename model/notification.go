package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// TradeStatus is Alipay's trade_status.
type TradeStatus string

// Trade statuses Alipay reports.
const (
	TradeWaitBuyerPay TradeStatus = "WAIT_BUYER_PAY"
	TradeClosed       TradeStatus = "TRADE_CLOSED"
	TradeSuccess      TradeStatus = "TRADE_SUCCESS"
	TradeFinished     TradeStatus = "TRADE_FINISHED"
)

// Paid reports whether money has moved in a trade with this status.
func (s TradeStatus) Paid() bool { return s == TradeSuccess || s == TradeFinished }

// Beijing is the zone of every time Alipay sends (China has no DST).
var Beijing = time.FixedZone("CST", 8*60*60)

// alipayTime is the layout of gmt_payment, notify_time and friends.
const alipayTime = "2006-01-02 15:04:05"

// AmountPattern is isAmount's rule as a regular expression (anchored
// whole, as an HTML input's pattern attribute is): the console's refund
// form gives it to the browser, so what the browser lets through is what
// ParseAmount reads (zero and amounts past MaxAmount aside).
const AmountPattern = `(0|[1-9][0-9]{0,15})(\.[0-9]{1,2})?`

// isAmount: 1 to 16 digits without a leading zero (but "0.50"), then at
// most 2 decimals after a dot (fits DECIMAL(18,2)): the OpenAPI document's
// '^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$'. No sign, no exponent. ParseAmount
// refuses zero.
func isAmount(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	return digits(whole, 16) && (whole == "0" || whole[0] != '0') && (!dot || digits(frac, 2))
}

// MaxRefundReason is the longest reason a refund may carry, in characters:
// its column is VARCHAR(200).
const MaxRefundReason = 200

// maxNotifyIDLen is notify_id's documented length, String(128); the column
// holds as much.
const maxNotifyIDLen = 128

// earliestPayment is before any Alipay payment (Alipay opened in December
// 2004); paymentSkew is how far gmt_payment may run ahead of our clock.
var earliestPayment = time.Date(2004, 1, 1, 0, 0, 0, 0, Beijing)

const paymentSkew = 24 * time.Hour

// Notification is a verified Alipay notification, parsed and validated.
type Notification struct {
	// NotifyID is kept for reference only; empty if Alipay's was unusable
	// (see Dropped).
	NotifyID    string
	TradeStatus TradeStatus
	// AppID is the app the notification names (the verifier has checked
	// it is ours).
	AppID string
	// SellerID is the seller the notification names (the verifier has
	// checked it is the app's).
	SellerID    string
	OutTradeNo  string
	TradeNo     string
	TotalAmount decimal.Decimal
	// GmtPayment is when the buyer paid, in UTC; nil if Alipay sent none,
	// or one no payment can have (see Dropped).
	GmtPayment *time.Time
	// RefundFee and OutBizNo are set on refund notifications: Alipay resends
	// TRADE_SUCCESS (partial) or TRADE_CLOSED (full) with the refunded total
	// and the refund's out_request_no.
	RefundFee string
	OutBizNo  string
	GmtRefund string
	// Dropped says, one line each, which reference fields were unusable
	// and left out. They never decide anything, so the notification is
	// still applied without them; the caller logs the lines as warnings.
	Dropped []string
}

// IsRefund reports whether the notification reports a refund, not a
// payment: it must never be applied as one.
func (n Notification) IsRefund() bool {
	return n.RefundFee != "" || n.OutBizNo != "" || n.GmtRefund != ""
}

// ParseNotification reads the fields paynotify acts on from a verified
// form. Only a payment (a paying status, TRADE_SUCCESS or TRADE_FINISHED,
// and no refund fields) is validated further; other notifications come
// back with just their status, id and refund fields set.
//
// The fields that decide must be identifiers (ValidID) — out_trade_no of
// at most 64 characters, as Alipay documents, trade_no of at most 128, as
// its column holds — and total_amount a positive amount with at most two
// decimals; errors wrap ErrInvalidNotification. Fields kept
// only for reference never refuse a payment: a notify_id that is not 1 to
// 128 visible ASCII characters, and a gmt_payment that is not a time in
// Alipay's layout between 2004 and a day from now, are left out and named
// in Dropped (payment_time is then when the payment was observed).
func ParseNotification(get func(string) string) (Notification, error) {
	n := Notification{TradeStatus: TradeStatus(get("trade_status")), AppID: get("app_id"), SellerID: get("seller_id"),
		RefundFee: get("refund_fee"), OutBizNo: get("out_biz_no"), GmtRefund: get("gmt_refund")}
	if id := get("notify_id"); len(id) <= maxNotifyIDLen && visibleASCII(id) {
		n.NotifyID = id
	} else if id != "" {
		n.drop("notify_id %q (%d bytes): not 1 to %d visible ASCII characters", Clip(id), len(id), maxNotifyIDLen)
	}
	if !n.TradeStatus.Paid() || n.IsRefund() {
		if n.OutBizNo != "" && !ValidID(n.OutBizNo) {
			// It only hurries the refund worker, which confirms by query.
			n.drop("out_biz_no %q: not an identifier of ours, not looked up", Clip(n.OutBizNo))
		}
		return n, nil
	}
	n.OutTradeNo = get("out_trade_no")
	if !ValidID(n.OutTradeNo) || len(n.OutTradeNo) > maxOutTradeNoLen {
		return n, fmt.Errorf("%w: out_trade_no %q: want 1 to %d visible ASCII characters without '&' or '='",
			ErrInvalidNotification, Clip(n.OutTradeNo), maxOutTradeNoLen)
	}
	n.TradeNo = get("trade_no")
	if !ValidID(n.TradeNo) {
		return n, fmt.Errorf("%w: trade_no %q: want 1 to %d visible ASCII characters without '&' or '='",
			ErrInvalidNotification, Clip(n.TradeNo), maxIDLen)
	}
	amount, err := ParseAmount(get("total_amount"))
	if err != nil {
		return n, fmt.Errorf("%w: total_amount: %v", ErrInvalidNotification, err)
	}
	n.TotalAmount = amount
	if s := get("gmt_payment"); s != "" {
		t, err := time.ParseInLocation(alipayTime, s, Beijing)
		switch {
		case err != nil:
			n.drop("gmt_payment %q: not a time in Alipay's layout %q", Clip(s), alipayTime)
		case t.Before(earliestPayment) || t.After(time.Now().Add(paymentSkew)):
			n.drop("gmt_payment %q: no Alipay payment is dated so (want 2004 to a day from now)", s)
		default:
			t = t.UTC()
			n.GmtPayment = &t
		}
	}
	return n, nil
}

// drop records a reference field left out, and why.
func (n *Notification) drop(format string, args ...any) {
	n.Dropped = append(n.Dropped, fmt.Sprintf(format, args...))
}

// ParseAmount parses a yuan amount as Alipay writes it ("100.00"), never
// through a float, and holds it to CheckAmount: positive, at most two
// decimals, at most MaxAmount.
func ParseAmount(s string) (decimal.Decimal, error) {
	if !isAmount(s) {
		return decimal.Decimal{}, fmt.Errorf("%q is not an amount with at most 2 decimals", Clip(s))
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, err
	}
	if err := CheckAmount(d); err != nil {
		return decimal.Decimal{}, err
	}
	return d, nil
}

// FormatAlipayTime writes t as Alipay does: Beijing wall time.
func FormatAlipayTime(t time.Time) string { return t.In(Beijing).Format(alipayTime) }
