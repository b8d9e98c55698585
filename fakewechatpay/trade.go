package fakewechatpay

import (
	"context"
	"fmt"
	"time"

	"paynotify/model"
	"paynotify/wechatpay"
)

// Trade is a transaction the fake holds.
type Trade struct {
	// AppID is the app the prepay named ("" for a trade not opened by a
	// prepay: the merchant's first).
	AppID                string
	OutTradeNo, PrepayID string
	// TransactionID is set once paid.
	TransactionID string
	// TradeType is NATIVE, MWEB, JSAPI or APP.
	TradeType, Description string
	// Total is in fen.
	Total     int64
	State     wechatpay.TradeState
	NotifyURL string
	OpenID    string
	ExpireAt  time.Time
	// Paid is when the buyer paid (zero if not).
	Paid time.Time
	// Refunded is the amount refunded so far, in fen.
	Refunded int64
}

// Refund is a refund the fake holds.
type Refund struct {
	OutRefundNo, RefundID     string
	TransactionID, OutTradeNo string
	// Refund and Total are in fen.
	Refund, Total int64
	Status        wechatpay.RefundStatus
	NotifyURL     string
	Created       time.Time
	Settled       time.Time
}

// Trade returns the trade of outTradeNo.
func (s *Server) Trade(outTradeNo string) (Trade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byOut[outTradeNo]
	if !ok {
		return Trade{}, false
	}
	return *t, true
}

// Refund returns the refund of outRefundNo.
func (s *Server) Refund(outRefundNo string) (Refund, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[outRefundNo]
	if !ok {
		return Refund{}, false
	}
	return *r, true
}

// SettleNextRefunds makes the next times refunds end status (CLOSED or
// ABNORMAL) instead of SUCCESS.
func (s *Server) SettleNextRefunds(status wechatpay.RefundStatus, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range times {
		s.settle = append(s.settle, status)
	}
}

// next is a fresh number: prefix, the day, a sequence.
func (s *Server) next(prefix string, width int) string {
	s.seq++
	day := s.now().In(model.Beijing).Format("20060102")
	return fmt.Sprintf("%s%s%0*d", prefix, day, width, s.seq)
}

// open records a new unpaid trade, or answers the same one again for a
// repeat of the same call.
func (s *Server) open(t Trade) (Trade, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byOut[t.OutTradeNo]; ok {
		switch {
		case old.State.Paid():
			return *old, errPaid
		case old.State == wechatpay.TradeClosed:
			return *old, errClosed
		case old.Total != t.Total || old.TradeType != t.TradeType:
			return *old, errOutTradeUsed
		}
		return *old, nil
	}
	t.PrepayID = s.next("wx", 14)
	s.byOut[t.OutTradeNo] = &t
	s.byPrepay[t.PrepayID] = &t
	return t, nil
}

// closeTrade closes an unpaid trade; an unknown or closed one is fine.
func (s *Server) closeTrade(outTradeNo string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byOut[outTradeNo]
	if !ok {
		return nil
	}
	if t.State.Paid() {
		return errPaid
	}
	t.State = wechatpay.TradeClosed
	return nil
}

// Pay has the buyer pay the trade of outTradeNo, and notifies the
// merchant before it returns (resends, if any, go on in the background).
// The error says why the trade could not be paid, or that the first
// notification was not acknowledged (ErrNotAcknowledged).
func (s *Server) Pay(ctx context.Context, outTradeNo string) error {
	t, err := s.markPaid(outTradeNo)
	if err != nil {
		return err
	}
	return s.notify(ctx, t.NotifyURL, wechatpay.EventTransactionSuccess, "支付成功", "transaction", s.transaction(t))
}

// markPaid makes the trade SUCCESS.
func (s *Server) markPaid(outTradeNo string) (Trade, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byOut[outTradeNo]
	switch {
	case !ok:
		return Trade{}, errNotExist
	case t.State.Paid():
		return *t, errPaid
	case t.State == wechatpay.TradeClosed:
		return *t, errClosed
	case !t.ExpireAt.IsZero() && s.now().After(t.ExpireAt):
		return *t, errExpired
	}
	t.State = wechatpay.TradeSuccess
	t.TransactionID = s.next("42000", 13)
	t.Paid = s.now()
	if t.OpenID == "" {
		t.OpenID = "oFAKE" + nonce(23)
	}
	return *t, nil
}

// makeRefund records a refund (PROCESSING in the answer), settles it and
// notifies its notify_url in the background. A repeat of an out_refund_no
// for the same refund answers the refund as it stands.
func (s *Server) makeRefund(r Refund) (Refund, error) {
	s.mu.Lock()
	if old, ok := s.refunds[r.OutRefundNo]; ok {
		s.mu.Unlock()
		if old.Refund != r.Refund {
			return Refund{}, errRefundUsed
		}
		return *old, nil
	}
	var t *Trade
	if r.TransactionID != "" {
		t = s.byTransaction(r.TransactionID)
	} else {
		t = s.byOut[r.OutTradeNo]
	}
	switch {
	case t == nil || !t.State.Paid():
		s.mu.Unlock()
		return Refund{}, errNoTrade
	case r.Total != t.Total:
		s.mu.Unlock()
		return Refund{}, fmt.Errorf("%w: 订单金额不一致 (amount.total %d, the order's %d)", errRefundAmount, r.Total, t.Total)
	case r.Refund <= 0 || t.Refunded+r.Refund > t.Total:
		s.mu.Unlock()
		return Refund{}, fmt.Errorf("%w: 申请退款金额超过订单可退金额", errRefundAmount)
	}
	r.TransactionID, r.OutTradeNo = t.TransactionID, t.OutTradeNo
	r.RefundID = s.next("50300", 13)
	r.Status = wechatpay.RefundProcessing
	r.Created = s.now()
	answered := r
	final := wechatpay.RefundSuccess
	if len(s.settle) > 0 {
		final, s.settle = s.settle[0], s.settle[1:]
	}
	r.Status, r.Settled = final, s.now()
	if final != wechatpay.RefundClosed {
		t.Refunded += r.Refund
		t.State = wechatpay.TradeRefund
	}
	s.refunds[r.OutRefundNo] = &r
	s.mu.Unlock()
	if r.NotifyURL != "" {
		event := "REFUND." + string(final)
		s.notifyLater(r.NotifyURL, event, "退款状态变更", "refund", s.refundResource(r))
	}
	return answered, nil
}

// transaction is a trade as a query answers it and a notification's
// resource carries it.
func (s *Server) transaction(t Trade) map[string]any {
	appID := t.AppID
	if appID == "" {
		appID = s.cfg.AppID
	}
	m := map[string]any{
		"appid": appID, "mchid": s.cfg.MchID, "out_trade_no": t.OutTradeNo,
		"trade_type": t.TradeType, "trade_state": string(t.State), "trade_state_desc": stateDesc[t.State],
		"attach": "",
	}
	if t.State.Paid() {
		m["transaction_id"] = t.TransactionID
		m["bank_type"] = "OTHERS"
		m["success_time"] = t.Paid.In(model.Beijing).Format(time.RFC3339)
		m["payer"] = map[string]string{"openid": t.OpenID}
		m["amount"] = amount{Total: t.Total, PayerTotal: t.Total, Currency: "CNY", PayerCurrency: "CNY"}
	} else {
		m["amount"] = map[string]any{"payer_currency": "CNY"}
	}
	return m
}

// stateDesc is trade_state_desc.
var stateDesc = map[wechatpay.TradeState]string{
	wechatpay.TradeSuccess: "支付成功", wechatpay.TradeRefund: "转入退款", wechatpay.TradeNotPay: "未支付",
	wechatpay.TradeClosed: "已关闭",
}

// refundJSON is a refund as the refund call and its query answer it.
func (s *Server) refundJSON(r Refund) map[string]any {
	m := map[string]any{
		"refund_id": r.RefundID, "out_refund_no": r.OutRefundNo, "transaction_id": r.TransactionID,
		"out_trade_no": r.OutTradeNo, "channel": "ORIGINAL", "user_received_account": "支付用户零钱",
		"create_time": r.Created.In(model.Beijing).Format(time.RFC3339), "status": string(r.Status),
		"funds_account": "AVAILABLE",
		"amount": map[string]any{
			"total": r.Total, "refund": r.Refund, "payer_total": r.Total, "payer_refund": r.Refund,
			"settlement_refund": r.Refund, "settlement_total": r.Total, "discount_refund": 0, "currency": "CNY",
		},
	}
	if r.Status == wechatpay.RefundSuccess {
		m["success_time"] = r.Settled.In(model.Beijing).Format(time.RFC3339)
	}
	return m
}

// refundResource is a REFUND.* notification's resource.
func (s *Server) refundResource(r Refund) map[string]any {
	m := map[string]any{
		"mchid": s.cfg.MchID, "out_trade_no": r.OutTradeNo, "transaction_id": r.TransactionID,
		"out_refund_no": r.OutRefundNo, "refund_id": r.RefundID, "refund_status": string(r.Status),
		"user_received_account": "支付用户零钱",
		"amount":                map[string]int64{"total": r.Total, "refund": r.Refund, "payer_total": r.Total, "payer_refund": r.Refund},
	}
	if r.Status == wechatpay.RefundSuccess {
		m["success_time"] = r.Settled.In(model.Beijing).Format(time.RFC3339)
	}
	return m
}

// AddPaidTrade records a paid transaction WeChat Pay took without the fake
// having opened it (a replayed notification, a payment whose
// notification never came); a known out_trade_no is left as it is.
func (s *Server) AddPaidTrade(outTradeNo, transactionID string, fen int64, paidAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTransaction(transactionID) != nil {
		return
	}
	s.seq++
	t := &Trade{
		OutTradeNo: outTradeNo, PrepayID: fmt.Sprintf("wx%014d", s.seq), TransactionID: transactionID, TradeType: "NATIVE",
		Description: "Order " + outTradeNo, Total: fen, State: wechatpay.TradeSuccess, Paid: paidAt, OpenID: "oFAKE" + nonce(23),
	}
	if _, ok := s.byOut[outTradeNo]; ok {
		s.elsewhere = append(s.elsewhere, t)
		return
	}
	s.byOut[outTradeNo] = t
	s.byPrepay[t.PrepayID] = t
}

// trades is every transaction the fake holds: one per out_trade_no, and
// those told of elsewhere. The caller holds mu.
func (s *Server) trades() []*Trade {
	all := make([]*Trade, 0, len(s.byOut)+len(s.elsewhere))
	for _, t := range s.byOut {
		all = append(all, t)
	}
	return append(all, s.elsewhere...)
}

// byTransaction is the trade of WeChat Pay's transaction_id id, or nil.
// The caller holds mu.
func (s *Server) byTransaction(id string) *Trade {
	if id == "" {
		return nil
	}
	for _, t := range s.trades() {
		if t.TransactionID == id {
			return t
		}
	}
	return nil
}
