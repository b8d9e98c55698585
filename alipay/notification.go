package alipay

import (
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// alipayTimeLayout is the layout of gmt_payment, notify_time and friends.
const alipayTimeLayout = "2006-01-02 15:04:05"

// FormatTime writes t as Alipay writes its times: Beijing wall time.
func FormatTime(t time.Time) string { return t.In(model.Beijing).Format(alipayTimeLayout) }

// maxNotifyIDLen is notify_id's documented length, String(128); the column
// holds as much.
const maxNotifyIDLen = 128

// paymentSkew is how far gmt_payment may run ahead of our clock.
const paymentSkew = 24 * time.Hour

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

// State is s in the ledger's terms: WAIT_BUYER_PAY open, TRADE_SUCCESS
// and TRADE_FINISHED paid, TRADE_CLOSED closed; any other an error.
func (s TradeStatus) State() (model.TradeState, error) {
	switch s {
	case TradeWaitBuyerPay:
		return model.TradeOpen, nil
	case TradeSuccess, TradeFinished:
		return model.TradePaid, nil
	case TradeClosed:
		return model.TradeClosed, nil
	}
	return "", fmt.Errorf("trade_status %q", model.Clip(string(s)))
}

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
// The fields that decide must be identifiers (model.ValidID) — out_trade_no of
// at most 64 characters, as Alipay documents, trade_no of at most 128, as
// its column holds — and total_amount a positive amount with at most two
// decimals; errors wrap model.ErrInvalidNotification. Fields kept
// only for reference never refuse a payment: a notify_id that is not 1 to
// 128 visible ASCII characters, and a gmt_payment that is not a time in
// Alipay's layout between 2004 and a day from now, are left out and named
// in Dropped (payment_time is then when the payment was observed).
func ParseNotification(get func(string) string) (Notification, error) {
	n := Notification{TradeStatus: TradeStatus(get("trade_status")), AppID: get("app_id"), SellerID: get("seller_id"),
		RefundFee: get("refund_fee"), OutBizNo: get("out_biz_no"), GmtRefund: get("gmt_refund")}
	if id := get("notify_id"); len(id) <= maxNotifyIDLen && model.VisibleASCII(id) {
		n.NotifyID = id
	} else if id != "" {
		n.drop("notify_id %q (%d bytes): not 1 to %d visible ASCII characters", model.Clip(id), len(id), maxNotifyIDLen)
	}
	if !n.TradeStatus.Paid() || n.IsRefund() {
		if n.OutBizNo != "" && !model.ValidID(n.OutBizNo) {
			// It only hurries the refund worker, which confirms by query.
			n.drop("out_biz_no %q: not an identifier of ours, not looked up", model.Clip(n.OutBizNo))
		}
		return n, nil
	}
	n.OutTradeNo = get("out_trade_no")
	if !model.ValidID(n.OutTradeNo) || len(n.OutTradeNo) > model.MaxRefLen {
		return n, fmt.Errorf("%w: out_trade_no %q: want 1 to %d visible ASCII characters without '&' or '='",
			model.ErrInvalidNotification, model.Clip(n.OutTradeNo), model.MaxRefLen)
	}
	n.TradeNo = get("trade_no")
	if !model.ValidID(n.TradeNo) {
		return n, fmt.Errorf("%w: trade_no %q: want 1 to %d visible ASCII characters without '&' or '='",
			model.ErrInvalidNotification, model.Clip(n.TradeNo), model.MaxTradeNoLen)
	}
	amount, err := model.ParseAmount(get("total_amount"))
	if err != nil {
		return n, fmt.Errorf("%w: total_amount: %v", model.ErrInvalidNotification, err)
	}
	n.TotalAmount = amount
	if s := get("gmt_payment"); s != "" {
		t, err := time.ParseInLocation(alipayTimeLayout, s, model.Beijing)
		switch {
		case err != nil:
			n.drop("gmt_payment %q: not a time in Alipay's layout %q", model.Clip(s), alipayTimeLayout)
		case t.Before(model.EarliestPayment) || t.After(time.Now().Add(paymentSkew)):
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

// Observation is a paid notification as the ledger takes it.
func (n Notification) Observation() model.Observation {
	return model.Observation{Provider: model.ProviderAlipay, TradeNo: n.TradeNo, OutTradeNo: n.OutTradeNo,
		Amount: n.TotalAmount, PaidAt: n.GmtPayment, Ref: n.NotifyID, Account: n.SellerID, App: n.AppID, Status: string(n.TradeStatus)}
}

// Notice is n in the ledger's terms (model.Notice): a paid trade's
// Payment, a refund's RefundNo (our out_request_no, Alipay's out_biz_no,
// when it is an id of ours), or, for a trade no money moved in
// (WAIT_BUYER_PAY, TRADE_CLOSED), neither.
func (n Notification) Notice() model.Notice {
	out := model.Notice{ID: n.NotifyID, Status: string(n.TradeStatus), Dropped: n.Dropped}
	switch {
	case n.IsRefund():
		out.Refund = true
		if model.ValidID(n.OutBizNo) {
			out.RefundNo = n.OutBizNo
		}
	case n.TradeStatus.Paid():
		out.Payment = n.Observation()
	}
	return out
}
