package fakealipay

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"time"

	"paynotify/model"
)

// Time layouts Alipay writes.
const (
	alipayTime       = "2006-01-02 15:04:05"
	alipayTimeMillis = "2006-01-02 15:04:05.000" // gmt_refund
)

// beijing writes t as Alipay does.
func beijing(t time.Time, layout string) string {
	if t.IsZero() {
		return ""
	}
	return t.In(model.Beijing).Format(layout)
}

// paidAmount is what the buyer paid, as Alipay writes it: "0.00" until
// the trade is paid.
func paidAmount(t Trade) string {
	if t.Paid.IsZero() {
		return "0.00"
	}
	return t.TotalAmount.StringFixed(2)
}

// tradeForm is the trade_status_sync notification of t as it is now, with
// the fields Alipay sends (see testdata/alipay-real-samples), unsigned. The
// caller holds s.mu.
func (s *Server) tradeForm(t *Trade, now time.Time) url.Values {
	amount := t.TotalAmount.StringFixed(2)
	f := url.Values{
		"notify_type":      {"trade_status_sync"},
		"notify_id":        {notifyID(now)},
		"notify_time":      {beijing(now, alipayTime)},
		"app_id":           {t.AppID},
		"auth_app_id":      {t.AppID},
		"seller_id":        {t.SellerID},
		"charset":          {"utf-8"},
		"version":          {"1.0"},
		"trade_no":         {t.TradeNo},
		"out_trade_no":     {t.OutTradeNo},
		"trade_status":     {string(t.Status)},
		"subject":          {t.Subject},
		"total_amount":     {amount},
		"receipt_amount":   {amount},
		"invoice_amount":   {amount},
		"buyer_pay_amount": {amount},
		"point_amount":     {"0.00"},
		"buyer_id":         {buyerID},
		"buyer_logon_id":   {buyerLogonID},
		"fund_bill_list":   {fmt.Sprintf(`[{"amount":"%s","fundChannel":"ALIPAYACCOUNT"}]`, amount)},
		"gmt_create":       {beijing(t.Created, alipayTime)},
		"gmt_payment":      {beijing(t.Paid, alipayTime)},
	}
	if !t.Closed.IsZero() {
		f.Set("gmt_close", beijing(t.Closed, alipayTime))
	}
	return f
}

// refundForm is the notification Alipay sends after refund r: status
// TRADE_SUCCESS while money is left, TRADE_CLOSED once all is refunded,
// refund_fee the total refunded so far, out_biz_no the refund's
// out_request_no. The caller holds s.mu.
func (s *Server) refundForm(t *Trade, r Refund, now time.Time) url.Values {
	f := s.tradeForm(t, now)
	f.Set("refund_fee", t.Refunded().StringFixed(2))
	f.Set("gmt_refund", beijing(r.At, alipayTimeMillis))
	f.Set("out_biz_no", r.OutRequestNo)
	return f
}

// returnForm is what Alipay appends to return_url when it sends the buyer
// back after paying, unsigned.
func (s *Server) returnForm(t Trade) url.Values {
	return url.Values{
		"method":       {t.Method + ".return"},
		"app_id":       {t.AppID},
		"auth_app_id":  {t.AppID},
		"seller_id":    {t.SellerID},
		"charset":      {"utf-8"},
		"version":      {"1.0"},
		"timestamp":    {beijing(s.now(), alipayTime)},
		"out_trade_no": {t.OutTradeNo},
		"trade_no":     {t.TradeNo},
		"total_amount": {t.TotalAmount.StringFixed(2)},
	}
}

// notifyID is shaped like Alipay's: the Beijing date, "00222", the time of
// day and 15 digits.
func notifyID(now time.Time) string {
	return beijing(now, "20060102") + "00222" + beijing(now, "150405") + fmt.Sprintf("%015d", rand.Int64N(1e15))
}
