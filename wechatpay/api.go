package wechatpay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/app"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/h5"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/jsapi"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"
	"github.com/wechatpay-apiv3/wechatpay-go/services/refunddomestic"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"paynotify/model"
)

// Method is how the buyer pays with WeChat Pay.
type Method string

// Methods.
const (
	// MethodNative: a QR code (code_url) the buyer scans.
	MethodNative Method = "native"
	// MethodH5: a URL (h5_url) for a phone browser outside WeChat.
	MethodH5 Method = "h5"
	// MethodJSAPI: inside WeChat (official account or mini program), for
	// the buyer's openid; the page calls WeixinJSBridge with Params.
	MethodJSAPI Method = "jsapi"
	// MethodApp: our app calls the WeChat SDK with Params.
	MethodApp Method = "app"
)

// Valid reports whether m is a known method.
func (m Method) Valid() bool {
	return m == MethodNative || m == MethodH5 || m == MethodJSAPI || m == MethodApp
}

// TradeState is where WeChat Pay says a transaction stands.
type TradeState string

// Trade states.
const (
	TradeSuccess    TradeState = "SUCCESS"
	TradeRefund     TradeState = "REFUND" // paid, then (partly) refunded
	TradeNotPay     TradeState = "NOTPAY"
	TradeClosed     TradeState = "CLOSED"
	TradeRevoked    TradeState = "REVOKED"
	TradeUserPaying TradeState = "USERPAYING"
	TradePayError   TradeState = "PAYERROR"
)

// Paid reports whether the buyer paid: SUCCESS, or REFUND (paid, then
// refunded).
func (s TradeState) Paid() bool { return s == TradeSuccess || s == TradeRefund }

// RefundStatus is where WeChat Pay says a refund stands.
type RefundStatus string

// Refund statuses. ABNORMAL: the money could not go back (the buyer's card
// is gone); an operator settles it in WeChat Pay's merchant platform.
const (
	RefundProcessing RefundStatus = "PROCESSING"
	RefundSuccess    RefundStatus = "SUCCESS"
	RefundClosed     RefundStatus = "CLOSED"
	RefundAbnormal   RefundStatus = "ABNORMAL"
)

// ErrNoRefund: WeChat Pay (signed) has no refund of that out_refund_no.
var ErrNoRefund = fmt.Errorf("%w: no such refund at WeChat Pay", model.ErrGatewayRefused)

// APIError is WeChat Pay's answer to a call that failed: an HTTP status
// of 4xx or 5xx with a code and a message. Signed says whether the answer
// carried WeChat Pay's valid signature; an unsigned one (a proxy's error
// page, a forgery) is never taken for WeChat Pay's word.
type APIError struct {
	Call       string
	StatusCode int
	Code       string
	Message    string
	Signed     bool
	kind       error
}

// Error implements error.
func (e *APIError) Error() string {
	s := "unsigned"
	if e.Signed {
		s = "signed"
	}
	return fmt.Sprintf("%v: wechatpay %s: %s HTTP %d %s %s", e.kind, e.Call, s, e.StatusCode, e.Code, clip(e.Message))
}

// Unwrap is the model error the failure means.
func (e *APIError) Unwrap() error { return e.kind }

// PayRequest opens a WeChat Pay transaction.
type PayRequest struct {
	Method      Method
	OutTradeNo  string
	Description string
	// Total is the amount in fen.
	Total int64
	// ExpireAt is time_expire: WeChat Pay takes no payment after it.
	ExpireAt  time.Time
	NotifyURL string
	// OpenID is the payer's, for MethodJSAPI.
	OpenID string
	// PayerIP is the buyer's IP, for MethodH5.
	PayerIP string
	// AppID is the app the buyer pays in (one of the merchant's); ""
	// means the client's first.
	AppID string
}

// PayAnswer is what the buyer's client needs to pay.
type PayAnswer struct {
	// CodeURL (native) is the QR code's content.
	CodeURL string
	// H5URL (h5) is where the buyer's browser goes.
	H5URL string
	// PrepayID (jsapi, app) names the transaction.
	PrepayID string
	// Params (jsapi, app) are the signed parameters the client passes to
	// WeChat: appId, timeStamp, nonceStr, package, signType, paySign for
	// jsapi; appid, partnerid, prepayid, package, noncestr, timestamp,
	// sign for app.
	Params map[string]string
}

// Pay opens a transaction (POST /v3/pay/transactions/{method}).
func (c *Client) Pay(ctx context.Context, r PayRequest) (PayAnswer, error) {
	if err := checkOutTradeNo(r.OutTradeNo); err != nil {
		return PayAnswer{}, err
	}
	if r.Total <= 0 {
		return PayAnswer{}, fmt.Errorf("%w: amount %d fen", model.ErrInvalidRequest, r.Total)
	}
	var expire *time.Time
	if !r.ExpireAt.IsZero() {
		// WeChat Pay wants seconds and Beijing time is what its console
		// shows; the instant is what matters.
		t := r.ExpireAt.In(model.Beijing).Truncate(time.Second)
		expire = &t
	}
	appID := c.appID
	if r.AppID != "" {
		if !c.appIDs[r.AppID] {
			return PayAnswer{}, fmt.Errorf("%w: appid %q is not one of merchant %s's", model.ErrInvalidRequest, clip(r.AppID), c.mchID)
		}
		appID = r.AppID
	}
	cny := core.String("CNY")
	switch r.Method {
	case MethodNative:
		svc := native.NativeApiService{Client: c.sdk}
		rsp, _, err := svc.Prepay(ctx, native.PrepayRequest{
			Appid: &appID, Mchid: &c.mchID, Description: &r.Description, OutTradeNo: &r.OutTradeNo,
			TimeExpire: expire, NotifyUrl: &r.NotifyURL, Amount: &native.Amount{Total: &r.Total, Currency: cny},
		})
		if err != nil {
			return PayAnswer{}, c.failure("pay", err)
		}
		if deref(rsp.CodeUrl) == "" {
			return PayAnswer{}, fmt.Errorf("%w: wechatpay pay: no code_url", model.ErrGatewayUnknown)
		}
		return PayAnswer{CodeURL: *rsp.CodeUrl}, nil
	case MethodH5:
		if r.PayerIP == "" {
			return PayAnswer{}, fmt.Errorf("%w: h5 needs the payer's IP", model.ErrInvalidRequest)
		}
		svc := h5.H5ApiService{Client: c.sdk}
		rsp, _, err := svc.Prepay(ctx, h5.PrepayRequest{
			Appid: &appID, Mchid: &c.mchID, Description: &r.Description, OutTradeNo: &r.OutTradeNo,
			TimeExpire: expire, NotifyUrl: &r.NotifyURL, Amount: &h5.Amount{Total: &r.Total, Currency: cny},
			SceneInfo: &h5.SceneInfo{PayerClientIp: &r.PayerIP, H5Info: &h5.H5Info{Type: core.String("Wap")}},
		})
		if err != nil {
			return PayAnswer{}, c.failure("pay", err)
		}
		if deref(rsp.H5Url) == "" {
			return PayAnswer{}, fmt.Errorf("%w: wechatpay pay: no h5_url", model.ErrGatewayUnknown)
		}
		return PayAnswer{H5URL: *rsp.H5Url}, nil
	case MethodJSAPI:
		if r.OpenID == "" {
			return PayAnswer{}, fmt.Errorf("%w: jsapi needs the payer's openid", model.ErrInvalidRequest)
		}
		svc := jsapi.JsapiApiService{Client: c.sdk}
		rsp, _, err := svc.PrepayWithRequestPayment(ctx, jsapi.PrepayRequest{
			Appid: &appID, Mchid: &c.mchID, Description: &r.Description, OutTradeNo: &r.OutTradeNo,
			TimeExpire: expire, NotifyUrl: &r.NotifyURL, Amount: &jsapi.Amount{Total: &r.Total, Currency: cny},
			Payer: &jsapi.Payer{Openid: &r.OpenID},
		})
		if err != nil {
			return PayAnswer{}, c.failure("pay", err)
		}
		return PayAnswer{PrepayID: deref(rsp.PrepayId), Params: map[string]string{
			"appId": deref(rsp.Appid), "timeStamp": deref(rsp.TimeStamp), "nonceStr": deref(rsp.NonceStr),
			"package": deref(rsp.Package), "signType": deref(rsp.SignType), "paySign": deref(rsp.PaySign),
		}}, nil
	case MethodApp:
		svc := app.AppApiService{Client: c.sdk}
		rsp, _, err := svc.Prepay(ctx, app.PrepayRequest{
			Appid: &appID, Mchid: &c.mchID, Description: &r.Description, OutTradeNo: &r.OutTradeNo,
			TimeExpire: expire, NotifyUrl: &r.NotifyURL, Amount: &app.Amount{Total: &r.Total, Currency: cny},
		})
		if err != nil {
			return PayAnswer{}, c.failure("pay", err)
		}
		params, err := c.appParams(ctx, appID, deref(rsp.PrepayId))
		if err != nil {
			return PayAnswer{}, err
		}
		return PayAnswer{PrepayID: deref(rsp.PrepayId), Params: params}, nil
	}
	return PayAnswer{}, fmt.Errorf("%w: method %q (want native, h5, jsapi or app)", model.ErrInvalidRequest, clip(string(r.Method)))
}

// appParams signs what the app hands the WeChat SDK. The SDK's own
// PrepayWithRequestPayment for app leaves out the appid, which the app's
// PayReq needs, and names the fields in camelCase where WeChat's document
// has them lower-case.
func (c *Client) appParams(ctx context.Context, appID, prepayID string) (map[string]string, error) {
	if prepayID == "" {
		return nil, fmt.Errorf("%w: wechatpay pay: no prepay_id", model.ErrGatewayUnknown)
	}
	nonce, err := utils.GenerateNonce()
	if err != nil {
		return nil, fmt.Errorf("wechatpay pay: nonce: %w", err)
	}
	ts := strconv.FormatInt(c.now().Unix(), 10)
	sig, err := c.sdk.Sign(ctx, appID+"\n"+ts+"\n"+nonce+"\n"+prepayID+"\n")
	if err != nil {
		return nil, fmt.Errorf("wechatpay pay: sign: %w", err)
	}
	return map[string]string{
		"appid": appID, "partnerid": c.mchID, "prepayid": prepayID,
		"package": "Sign=WXPay", "noncestr": nonce, "timestamp": ts, "sign": sig.Signature,
	}, nil
}

// checkOutTradeNo refuses an out_trade_no WeChat Pay would: 6 to 32
// letters, digits, _ - | * (WeChat's document).
func checkOutTradeNo(s string) error {
	if len(s) < 6 || len(s) > 32 {
		return fmt.Errorf("%w: out_trade_no %q: WeChat Pay wants 6 to 32 characters", model.ErrInvalidRequest, clip(s))
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || r == '-' || r == '|' || r == '*') {
			return fmt.Errorf("%w: out_trade_no %q: WeChat Pay takes letters, digits and _-|* only", model.ErrInvalidRequest, clip(s))
		}
	}
	return nil
}

// TradeStatus is what a query says of a transaction.
type TradeStatus struct {
	State TradeState
	// Transaction is set, checked, when State.Paid().
	Transaction *Transaction
}

// QueryTrade asks where the transaction of outTradeNo stands
// (GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=). A trade
// WeChat Pay does not know is model.ErrTradeNotExist.
func (c *Client) QueryTrade(ctx context.Context, outTradeNo string) (TradeStatus, error) {
	svc := native.NativeApiService{Client: c.sdk}
	t, _, err := svc.QueryOrderByOutTradeNo(ctx, native.QueryOrderByOutTradeNoRequest{OutTradeNo: &outTradeNo, Mchid: &c.mchID})
	if err != nil {
		return TradeStatus{}, c.failure("query", err)
	}
	if got := deref(t.OutTradeNo); got != outTradeNo {
		return TradeStatus{}, fmt.Errorf("%w: wechatpay query for %q answered %q", model.ErrGatewayUnknown, outTradeNo, clip(got))
	}
	st := TradeStatus{State: TradeState(deref(t.TradeState))}
	if st.State.Paid() {
		// A refunded transaction was paid: check it as a paid one.
		paid := paidOf(*t)
		paid.TradeState = string(TradeSuccess)
		tx, err := c.transaction(paid)
		if err != nil {
			return TradeStatus{}, fmt.Errorf("%w: wechatpay query: %v", model.ErrGatewayUnknown, err)
		}
		st.Transaction = &tx
	}
	return st, nil
}

// CloseTrade closes an unpaid transaction
// (POST …/out-trade-no/{out_trade_no}/close). A transaction WeChat Pay
// does not know is closed already: it was never opened. Closing a paid one
// is model.ErrTradeStatus.
func (c *Client) CloseTrade(ctx context.Context, outTradeNo string) error {
	svc := native.NativeApiService{Client: c.sdk}
	_, err := svc.CloseOrder(ctx, native.CloseOrderRequest{OutTradeNo: &outTradeNo, Mchid: &c.mchID})
	if err != nil {
		err = c.failure("close", err)
		if errors.Is(err, model.ErrTradeNotExist) {
			return nil
		}
		return err
	}
	return nil
}

// RefundRequest asks for a refund of a transaction.
type RefundRequest struct {
	// TransactionID is WeChat Pay's number of the payment: the ledger's
	// key, exactly the money that moved.
	TransactionID string
	// OutRefundNo is ours; WeChat Pay refunds one out_refund_no once.
	OutRefundNo string
	// Refund and Total (the transaction's amount) are in fen.
	Refund, Total int64
	Reason        string
	// NotifyURL receives REFUND.* notifications ("" for none).
	NotifyURL string
}

// Refund is what WeChat Pay says of a refund.
type Refund struct {
	RefundID, OutRefundNo string
	Status                RefundStatus
	// Refund is the amount in fen.
	Refund int64
}

// Refund asks WeChat Pay to refund (POST /v3/refund/domestic/refunds).
// The answer's Status is usually PROCESSING: query the refund later.
func (c *Client) Refund(ctx context.Context, r RefundRequest) (Refund, error) {
	if r.Refund <= 0 || r.Refund > r.Total {
		return Refund{}, fmt.Errorf("%w: refund %d fen of %d", model.ErrInvalidRequest, r.Refund, r.Total)
	}
	req := refunddomestic.CreateRequest{
		TransactionId: &r.TransactionID,
		OutRefundNo:   &r.OutRefundNo,
		Amount:        &refunddomestic.AmountReq{Refund: &r.Refund, Total: &r.Total, Currency: core.String("CNY")},
	}
	if r.Reason != "" {
		req.Reason = &r.Reason
	}
	if r.NotifyURL != "" {
		req.NotifyUrl = &r.NotifyURL
	}
	svc := refunddomestic.RefundsApiService{Client: c.sdk}
	rsp, _, err := svc.Create(ctx, req)
	if err != nil {
		return Refund{}, c.failure("refund", err)
	}
	return refundOf("refund", r.OutRefundNo, rsp)
}

// QueryRefund asks where the refund outRefundNo stands
// (GET /v3/refund/domestic/refunds/{out_refund_no}). One WeChat Pay does
// not know is ErrNoRefund: it was never made, and may be asked again.
func (c *Client) QueryRefund(ctx context.Context, outRefundNo string) (Refund, error) {
	svc := refunddomestic.RefundsApiService{Client: c.sdk}
	rsp, _, err := svc.QueryByOutRefundNo(ctx, refunddomestic.QueryByOutRefundNoRequest{OutRefundNo: &outRefundNo})
	if err != nil {
		err = c.failure("refund query", err)
		var ae *APIError
		if errors.As(err, &ae) && ae.Signed && ae.Code == "RESOURCE_NOT_EXISTS" {
			return Refund{}, fmt.Errorf("%w: %s", ErrNoRefund, outRefundNo)
		}
		return Refund{}, err
	}
	return refundOf("refund query", outRefundNo, rsp)
}

// refundOf checks a refund answer.
func refundOf(call, outRefundNo string, rsp *refunddomestic.Refund) (Refund, error) {
	if rsp == nil || deref(rsp.OutRefundNo) != outRefundNo || rsp.Status == nil {
		return Refund{}, fmt.Errorf("%w: wechatpay %s %s: answer names another refund or no status", model.ErrGatewayUnknown, call, outRefundNo)
	}
	r := Refund{RefundID: deref(rsp.RefundId), OutRefundNo: outRefundNo, Status: RefundStatus(*rsp.Status)}
	switch r.Status {
	case RefundProcessing, RefundSuccess, RefundClosed, RefundAbnormal:
	default:
		return Refund{}, fmt.Errorf("%w: wechatpay %s %s: status %q", model.ErrGatewayUnknown, call, outRefundNo, clip(string(r.Status)))
	}
	if rsp.Amount != nil && rsp.Amount.Refund != nil {
		if err := model.CheckAmount(Yuan(*rsp.Amount.Refund)); err != nil {
			return Refund{}, fmt.Errorf("%w: wechatpay %s %s: amount.refund %d fen: %v", model.ErrGatewayUnknown, call, outRefundNo, *rsp.Amount.Refund, err)
		}
		r.Refund = *rsp.Amount.Refund
	}
	return r, nil
}

// failure sorts a failed call: a signed 4xx/5xx answer is WeChat Pay's
// word (its code says whether to try again); anything else — no answer, a
// 2xx whose signature failed, an unsigned error page — leaves the outcome
// unknown. The SDK returns a 4xx/5xx as *core.APIError without checking
// its signature, so it is checked here.
func (c *Client) failure(call string, err error) error {
	var sdkErr *core.APIError
	if !errors.As(err, &sdkErr) {
		return fmt.Errorf("%w: wechatpay %s: %v", model.ErrGatewayUnknown, call, err)
	}
	e := &APIError{Call: call, StatusCode: sdkErr.StatusCode, Code: sdkErr.Code, Message: sdkErr.Message}
	e.Signed = c.verifySigned(sdkErr.Header, []byte(sdkErr.Body)) == nil
	switch {
	case !e.Signed, e.StatusCode >= 500, e.StatusCode == http.StatusTooManyRequests:
		e.kind = model.ErrGatewayUnknown
	case e.Code == "ORDER_NOT_EXIST" || (e.Code == "RESOURCE_NOT_EXISTS" && call != "refund query"):
		e.kind = model.ErrTradeNotExist
	case e.Code == "ORDERPAID" || e.Code == "ORDER_CLOSED" || e.Code == "TRADE_ERROR" || e.Code == "ORDERNOTEXIST":
		e.kind = model.ErrTradeStatus
	case e.Code == "SYSTEM_ERROR" || e.Code == "SYSTEMERROR" || e.Code == "FREQUENCY_LIMITED" || e.Code == "BANK_ERROR":
		e.kind = model.ErrGatewayUnknown // WeChat Pay's own word: try again
	default:
		e.kind = model.ErrGatewayRefused
	}
	return e
}
