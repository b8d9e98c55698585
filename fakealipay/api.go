package fakealipay

import (
	"net/url"
)

// Answers of the JSON methods, as smartwalle's response types read them.
type (
	precreateAnswer struct {
		result
		OutTradeNo string `json:"out_trade_no"`
		QRCode     string `json:"qr_code"`
	}
	queryAnswer struct {
		result
		TradeNo        string `json:"trade_no"`
		OutTradeNo     string `json:"out_trade_no"`
		BuyerLogonID   string `json:"buyer_logon_id,omitempty"`
		BuyerUserID    string `json:"buyer_user_id,omitempty"`
		TradeStatus    string `json:"trade_status"`
		TotalAmount    string `json:"total_amount"`
		BuyerPayAmount string `json:"buyer_pay_amount"`
		PointAmount    string `json:"point_amount"`
		InvoiceAmount  string `json:"invoice_amount"`
		ReceiptAmount  string `json:"receipt_amount"`
		SendPayDate    string `json:"send_pay_date,omitempty"`
		Subject        string `json:"subject"`
	}
	closeAnswer struct {
		result
		TradeNo    string `json:"trade_no"`
		OutTradeNo string `json:"out_trade_no"`
	}
	refundAnswer struct {
		result
		TradeNo      string `json:"trade_no"`
		OutTradeNo   string `json:"out_trade_no"`
		BuyerLogonID string `json:"buyer_logon_id"`
		BuyerUserID  string `json:"buyer_user_id"`
		FundChange   string `json:"fund_change"`
		RefundFee    string `json:"refund_fee"`
		GmtRefundPay string `json:"gmt_refund_pay"`
	}
	refundQueryAnswer struct {
		result
		TradeNo      string `json:"trade_no"`
		OutTradeNo   string `json:"out_trade_no"`
		OutRequestNo string `json:"out_request_no"`
		TotalAmount  string `json:"total_amount,omitempty"`
		RefundAmount string `json:"refund_amount,omitempty"`
		RefundStatus string `json:"refund_status,omitempty"`
		GmtRefundPay string `json:"gmt_refund_pay,omitempty"`
	}
)

// order reads what a creating call asks for.
func (c *call) order() (order, error) {
	amount, err := parseAmount(c.biz.TotalAmount)
	if err != nil || c.biz.OutTradeNo == "" || c.biz.Subject == "" {
		return order{}, errInvalidParameter
	}
	return order{
		outTradeNo: c.biz.OutTradeNo,
		subject:    c.biz.Subject,
		amount:     amount,
		notifyURL:  c.form.Get("notify_url"),
		returnURL:  c.form.Get("return_url"),
		method:     c.method,
		app:        c.app,
	}, nil
}

// precreate opens a trade and answers with its QR code: here, the URL of
// the fake's cashier page for it.
func (s *Server) precreate(c *call) (any, error) {
	o, err := c.order()
	if err != nil {
		return nil, err
	}
	t, err := s.create(o)
	if err != nil {
		return nil, err
	}
	return precreateAnswer{
		result:     success,
		OutTradeNo: t.OutTradeNo,
		QRCode:     c.base + "cashier/" + url.PathEscape(t.TradeNo),
	}, nil
}

// query answers with the trade as it is.
func (s *Server) query(c *call) (any, error) {
	t, err := s.lookup(c.app.id, c.biz.OutTradeNo, c.biz.TradeNo)
	if err != nil {
		return nil, err
	}
	a := queryAnswer{
		result:         success,
		TradeNo:        t.TradeNo,
		OutTradeNo:     t.OutTradeNo,
		TradeStatus:    string(t.Status),
		TotalAmount:    t.TotalAmount.StringFixed(2),
		BuyerPayAmount: paidAmount(t),
		PointAmount:    "0.00",
		InvoiceAmount:  paidAmount(t),
		ReceiptAmount:  paidAmount(t),
		SendPayDate:    beijing(t.Paid, alipayTime),
		Subject:        t.Subject,
	}
	if !t.Paid.IsZero() {
		a.BuyerLogonID, a.BuyerUserID = buyerLogonID, buyerID
	}
	return a, nil
}

// closeCall closes an unpaid trade.
func (s *Server) closeCall(c *call) (any, error) {
	t, err := s.closeTrade(c.app.id, c.biz.OutTradeNo, c.biz.TradeNo)
	if err != nil {
		return nil, err
	}
	return closeAnswer{result: success, TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo}, nil
}

// refundCall refunds, then sends the refund notification in the
// background, after the answer.
func (s *Server) refundCall(c *call) (any, error) {
	amount, err := parseAmount(c.biz.RefundAmount)
	if err != nil {
		return nil, err
	}
	out, err := s.refundTrade(c.app.id, c.biz.OutTradeNo, c.biz.TradeNo, c.biz.OutRequestNo, amount)
	if err != nil {
		return nil, err
	}
	if out.fundChange {
		s.notifyLater(out.notifyURL, out.form)
	}
	// A replay answers success with fund_change "N", as Alipay does: the
	// money moved on the first call.
	fundChange := "N"
	if out.fundChange {
		fundChange = "Y"
	}
	return refundAnswer{
		result:       success,
		TradeNo:      out.trade.TradeNo,
		OutTradeNo:   out.trade.OutTradeNo,
		BuyerLogonID: buyerLogonID,
		BuyerUserID:  buyerID,
		FundChange:   fundChange,
		RefundFee:    out.trade.Refunded().StringFixed(2),
		GmtRefundPay: beijing(out.refund.At, alipayTime),
	}, nil
}

// refundQuery answers with one refund. As Alipay, it answers 10000 without
// refund_status or refund_amount when there is no such refund: success of
// the query, not of a refund.
func (s *Server) refundQuery(c *call) (any, error) {
	t, r, ok, err := s.findRefund(c.app.id, c.biz.OutTradeNo, c.biz.TradeNo, c.biz.OutRequestNo)
	if err != nil {
		return nil, err
	}
	a := refundQueryAnswer{
		result:       success,
		TradeNo:      t.TradeNo,
		OutTradeNo:   t.OutTradeNo,
		OutRequestNo: c.biz.OutRequestNo,
	}
	if ok {
		a.OutRequestNo = r.OutRequestNo
		a.TotalAmount = t.TotalAmount.StringFixed(2)
		a.RefundAmount = r.Amount.StringFixed(2)
		a.RefundStatus = "REFUND_SUCCESS"
		a.GmtRefundPay = beijing(r.At, alipayTime)
	}
	return a, nil
}
