package fakewechatpay

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"paynotify/wechatpay"
)

// failure is a WeChat Pay error answer's body.
type failure struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

// fail is a failure answer.
func fail(status int, code, message string) (int, any) {
	return status, failure{status: status, Code: code, Message: message}
}

// handler serves one call: the status and the body to sign and send (nil:
// none, as 204 has).
type handler func(r *http.Request, body []byte) (int, any)

// api wraps a call's handler: count it, check its Authorization, suffer
// its fault, sign its answer.
func (s *Server) api(call string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return
		}
		f := s.faults.Arrive(call)
		if s.merchant != nil {
			if why := s.verifyCall(r, body); why != "" {
				s.reply(w, false)(fail(http.StatusUnauthorized, "SIGN_ERROR", why))
				return
			}
		}
		switch f.kind {
		case faultDrop:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
			return
		case faultFail:
			s.reply(w, false)(fail(f.status, f.code, "fault injected by fakewechatpay"))
			return
		}
		status, out := h(r, body)
		if f.kind == faultForgeFail {
			status, out = fail(f.status, f.code, "fault injected by fakewechatpay")
		}
		if f.kind == faultTimeout {
			s.bg.Sleep(r.Context(), f.delay)
		}
		s.reply(w, f.kind == faultForge || f.kind == faultForgeFail)(status, out)
	}
}

// reply returns a writer of a signed answer (forged: signed over another
// body, so it does not verify).
func (s *Server) reply(w http.ResponseWriter, forged bool) func(int, any) {
	return func(status int, out any) {
		var b []byte
		if out != nil {
			var err error
			if b, err = json.Marshal(out); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		signed := b
		if forged {
			signed = append([]byte("forged"), b...)
		}
		s.sign(signed).Set(w.Header())
		w.Header().Set("Request-ID", nonce(24))
		if out != nil {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		w.Write(b)
	}
}

// amount is a request's or an answer's amount.
type amount struct {
	Total         int64  `json:"total"`
	PayerTotal    int64  `json:"payer_total,omitempty"`
	Currency      string `json:"currency,omitempty"`
	PayerCurrency string `json:"payer_currency,omitempty"`
}

// prepayBody is a pay call's body.
type prepayBody struct {
	AppID       string     `json:"appid"`
	MchID       string     `json:"mchid"`
	Description string     `json:"description"`
	OutTradeNo  string     `json:"out_trade_no"`
	TimeExpire  *time.Time `json:"time_expire"`
	NotifyURL   string     `json:"notify_url"`
	Amount      *amount    `json:"amount"`
	Payer       *struct {
		OpenID string `json:"openid"`
	} `json:"payer"`
	SceneInfo *struct {
		PayerClientIP string `json:"payer_client_ip"`
	} `json:"scene_info"`
}

// tradeTypes maps the URL's method to trade_type.
var tradeTypes = map[string]string{"native": "NATIVE", "h5": "MWEB", "jsapi": "JSAPI", "app": "APP"}

// prepay serves POST /v3/pay/transactions/{native,h5,jsapi,app}.
func (s *Server) prepay(r *http.Request, body []byte) (int, any) {
	method := r.PathValue("method")
	tradeType, ok := tradeTypes[method]
	if !ok {
		return fail(http.StatusNotFound, "NOT_FOUND", "no such API")
	}
	var p prepayBody
	if err := json.Unmarshal(body, &p); err != nil {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "body is not JSON")
	}
	if (p.AppID != s.cfg.AppID && !slices.Contains(s.cfg.AppIDs, p.AppID)) || p.MchID != s.cfg.MchID {
		return fail(http.StatusBadRequest, "APPID_MCHID_NOT_MATCH", "appid and mchid do not match")
	}
	switch {
	case p.OutTradeNo == "" || p.Description == "" || p.Amount == nil || p.Amount.Total <= 0:
		return fail(http.StatusBadRequest, "PARAM_ERROR", "out_trade_no, description and amount.total are required")
	case len(p.OutTradeNo) < 6 || len(p.OutTradeNo) > 32:
		return fail(http.StatusBadRequest, "PARAM_ERROR", "out_trade_no must be 6 to 32 characters")
	case p.NotifyURL == "" && s.cfg.NotifyURL == "":
		return fail(http.StatusBadRequest, "PARAM_ERROR", "notify_url is required")
	case method == "jsapi" && (p.Payer == nil || p.Payer.OpenID == ""):
		return fail(http.StatusBadRequest, "PARAM_ERROR", "payer.openid is required")
	case method == "h5" && (p.SceneInfo == nil || p.SceneInfo.PayerClientIP == ""):
		return fail(http.StatusBadRequest, "PARAM_ERROR", "scene_info.payer_client_ip is required")
	}
	t := Trade{
		AppID: p.AppID, OutTradeNo: p.OutTradeNo, TradeType: tradeType, Description: p.Description,
		Total: p.Amount.Total, NotifyURL: p.NotifyURL, State: wechatpay.TradeNotPay,
	}
	if t.NotifyURL == "" {
		t.NotifyURL = s.cfg.NotifyURL
	}
	if p.TimeExpire != nil {
		t.ExpireAt = *p.TimeExpire
	}
	if p.Payer != nil {
		t.OpenID = p.Payer.OpenID
	}
	t, err := s.open(t)
	if err != nil {
		return failureOf(err)
	}
	switch method {
	case "native":
		return http.StatusOK, map[string]string{"code_url": s.cashierURL(r, t)}
	case "h5":
		return http.StatusOK, map[string]string{"h5_url": s.cashierURL(r, t)}
	}
	return http.StatusOK, map[string]string{"prepay_id": t.PrepayID}
}

// cashierURL is the trade's cashier page on the host the call came to.
func (s *Server) cashierURL(r *http.Request, t Trade) string {
	return "http://" + r.Host + "/cashier/" + t.PrepayID
}

// mchidOf checks the ?mchid= of a query or the mchid of a close.
func (s *Server) mchidOf(mchID string) bool { return mchID == s.cfg.MchID }

// query serves GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=.
func (s *Server) query(r *http.Request, _ []byte) (int, any) {
	if !s.mchidOf(r.URL.Query().Get("mchid")) {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "mchid does not match")
	}
	t, ok := s.Trade(r.PathValue("out_trade_no"))
	if !ok {
		return fail(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	}
	return http.StatusOK, s.transaction(t)
}

// queryByID serves GET /v3/pay/transactions/id/{transaction_id}?mchid=.
func (s *Server) queryByID(r *http.Request, _ []byte) (int, any) {
	if !s.mchidOf(r.URL.Query().Get("mchid")) {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "mchid does not match")
	}
	id := r.PathValue("transaction_id")
	s.mu.Lock()
	found := s.byTransaction(id)
	var t Trade
	if found != nil {
		t = *found
	}
	s.mu.Unlock()
	if found == nil {
		return fail(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	}
	return http.StatusOK, s.transaction(t)
}

// close serves POST …/out-trade-no/{out_trade_no}/close.
func (s *Server) close(r *http.Request, body []byte) (int, any) {
	var p struct {
		MchID string `json:"mchid"`
	}
	if err := json.Unmarshal(body, &p); err != nil || !s.mchidOf(p.MchID) {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "mchid does not match")
	}
	if err := s.closeTrade(r.PathValue("out_trade_no")); err != nil {
		return failureOf(err)
	}
	return http.StatusNoContent, nil
}

// refundBody is a refund call's body.
type refundBody struct {
	TransactionID string `json:"transaction_id"`
	OutTradeNo    string `json:"out_trade_no"`
	OutRefundNo   string `json:"out_refund_no"`
	Reason        string `json:"reason"`
	NotifyURL     string `json:"notify_url"`
	Amount        *struct {
		Refund   int64  `json:"refund"`
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

// refund serves POST /v3/refund/domestic/refunds.
func (s *Server) refund(r *http.Request, body []byte) (int, any) {
	var p refundBody
	if err := json.Unmarshal(body, &p); err != nil {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "body is not JSON")
	}
	if p.OutRefundNo == "" || p.Amount == nil || (p.TransactionID == "" && p.OutTradeNo == "") {
		return fail(http.StatusBadRequest, "PARAM_ERROR", "out_refund_no, amount and transaction_id or out_trade_no are required")
	}
	rf, err := s.makeRefund(Refund{
		TransactionID: p.TransactionID, OutTradeNo: p.OutTradeNo, OutRefundNo: p.OutRefundNo,
		Refund: p.Amount.Refund, Total: p.Amount.Total, NotifyURL: p.NotifyURL,
	})
	if err != nil {
		return failureOf(err)
	}
	return http.StatusOK, s.refundJSON(rf)
}

// refundQuery serves GET /v3/refund/domestic/refunds/{out_refund_no}.
func (s *Server) refundQuery(r *http.Request, _ []byte) (int, any) {
	rf, ok := s.Refund(r.PathValue("out_refund_no"))
	if !ok {
		return fail(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "退款单不存在")
	}
	return http.StatusOK, s.refundJSON(rf)
}

// Trade errors, each answered as WeChat Pay does.
var (
	errNotExist     = errors.New("ORDER_NOT_EXIST")
	errPaid         = errors.New("ORDERPAID")
	errClosed       = errors.New("ORDER_CLOSED")
	errOutTradeUsed = errors.New("OUT_TRADE_NO_USED")
	errExpired      = errors.New("ORDER_EXPIRED")
	errNoTrade      = errors.New("RESOURCE_NOT_EXISTS")
	errRefundAmount = errors.New("INVALID_REQUEST")
	errRefundUsed   = errors.New("OUT_REFUND_NO_USED")
)

// failureOf answers a trade error.
func failureOf(err error) (int, any) {
	switch {
	case errors.Is(err, errNotExist):
		return fail(http.StatusNotFound, "ORDER_NOT_EXIST", "订单不存在")
	case errors.Is(err, errPaid):
		return fail(http.StatusBadRequest, "ORDERPAID", "该订单已支付")
	case errors.Is(err, errClosed), errors.Is(err, errExpired):
		return fail(http.StatusBadRequest, "ORDER_CLOSED", "订单已关闭")
	case errors.Is(err, errOutTradeUsed):
		return fail(http.StatusBadRequest, "INVALID_REQUEST", "201 商户订单号重复")
	case errors.Is(err, errNoTrade):
		return fail(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "订单不存在")
	case errors.Is(err, errRefundAmount):
		return fail(http.StatusBadRequest, "INVALID_REQUEST", strings.TrimPrefix(err.Error(), "INVALID_REQUEST: "))
	case errors.Is(err, errRefundUsed):
		return fail(http.StatusBadRequest, "INVALID_REQUEST", "退款单号已用于另一笔退款")
	}
	return fail(http.StatusInternalServerError, "SYSTEM_ERROR", err.Error())
}
