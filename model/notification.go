package model

import (
	"fmt"
	"regexp"
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

var (
	// amountPattern: positive, at most 2 decimals, fits DECIMAL(18,2).
	amountPattern = regexp.MustCompile(`^[0-9]{1,16}(\.[0-9]{1,2})?$`)
	// idPattern: visible ASCII, but no '&' or '=': the signed content joins
	// "k=v" pairs with '&', so an identifier holding them could be a
	// neighbouring field glued onto it.
	idPattern = regexp.MustCompile(`^[\x21-\x25\x27-\x3c\x3e-\x7e]+$`)
)

// Notification is a verified Alipay notification, parsed and validated.
type Notification struct {
	NotifyID    string
	TradeStatus TradeStatus
	OutTradeNo  string
	TradeNo     string
	TotalAmount decimal.Decimal
	// GmtPayment is when the buyer paid, in UTC; nil if Alipay sent none.
	GmtPayment *time.Time
	// RefundFee and OutBizNo are set on refund notifications: Alipay resends
	// TRADE_SUCCESS (partial) or TRADE_CLOSED (full) with the refunded total
	// and the refund's out_request_no.
	RefundFee string
	OutBizNo  string
	GmtRefund string
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
// Errors wrap ErrInvalidNotification.
func ParseNotification(get func(string) string) (Notification, error) {
	n := Notification{NotifyID: get("notify_id"), TradeStatus: TradeStatus(get("trade_status")),
		RefundFee: get("refund_fee"), OutBizNo: get("out_biz_no"), GmtRefund: get("gmt_refund")}
	if !n.TradeStatus.Paid() || n.IsRefund() {
		return n, nil
	}
	n.OutTradeNo = get("out_trade_no")
	if len(n.OutTradeNo) > 64 || !idPattern.MatchString(n.OutTradeNo) {
		return n, fmt.Errorf("%w: out_trade_no %q", ErrInvalidNotification, clip(n.OutTradeNo))
	}
	n.TradeNo = get("trade_no")
	if len(n.TradeNo) > 128 || !idPattern.MatchString(n.TradeNo) {
		return n, fmt.Errorf("%w: trade_no %q", ErrInvalidNotification, clip(n.TradeNo))
	}
	amount, err := ParseAmount(get("total_amount"))
	if err != nil {
		return n, fmt.Errorf("%w: total_amount: %v", ErrInvalidNotification, err)
	}
	n.TotalAmount = amount
	if s := get("gmt_payment"); s != "" {
		t, err := time.ParseInLocation(alipayTime, s, Beijing)
		if err != nil {
			return n, fmt.Errorf("%w: gmt_payment %q", ErrInvalidNotification, clip(s))
		}
		t = t.UTC()
		n.GmtPayment = &t
	}
	return n, nil
}

// ParseAmount parses a yuan amount as Alipay writes it ("100.00"): positive,
// at most two decimals, never through a float.
func ParseAmount(s string) (decimal.Decimal, error) {
	if !amountPattern.MatchString(s) {
		return decimal.Decimal{}, fmt.Errorf("%q is not an amount with at most 2 decimals", clip(s))
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, err
	}
	if !d.IsPositive() {
		return decimal.Decimal{}, fmt.Errorf("%q is not positive", s)
	}
	return d, nil
}

// FormatAlipayTime writes t as Alipay does: Beijing wall time.
func FormatAlipayTime(t time.Time) string { return t.In(Beijing).Format(alipayTime) }

// clip keeps error messages (and logs) short whatever a client sends.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
