package wechatpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/shopspring/decimal"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"

	"paynotify/model"
)

// Provider is the WeChat Pay client as the service's payment provider
// (service.Provider): it starts payments with the notify URL it was made
// with, and translates everything else between the service's terms (yuan,
// Alipay's trade states) and WeChat Pay's (fen, its own). Its gateway
// errors are model.ProviderErrors of WeChat Pay.
type Provider struct {
	*Client
	notifyURL string
	// appID is the app payments start in: "" the client's first.
	appID string
}

// NewProvider returns c as a provider whose trades notify notifyURL.
func NewProvider(c *Client, notifyURL string) *Provider {
	return &Provider{Client: c, notifyURL: notifyURL}
}

// ForApp is p starting payments in the merchant's app appID (one of the
// client's): everything else a merchant's apps share.
func (p *Provider) ForApp(appID string) *Provider {
	q := *p
	q.appID = appID
	return &q
}

// MchID is the merchant p is: the ledger's account.
func (c *Client) MchID() string { return c.mchID }

// AppID is the merchant's first appid: a payment's default app.
func (c *Client) AppID() string { return c.appID }

// Spec is WeChat Pay as the ledger knows it (service.Adapter).
func (p *Provider) Spec() model.ProviderSpec {
	return model.ProviderSpec{Name: model.ProviderWechatpay, Title: "WeChat Pay", PayType: model.PayTypeWechatpay}
}

// Accepts reports whether m is one of WeChat Pay's: native, h5, jsapi or
// app.
func (p *Provider) Accepts(m model.PayMethod) bool {
	return m == model.PayNative || m == model.PayH5 || m == model.PayJSAPI || m == model.PayApp
}

// SignsLocally is false: every WeChat Pay method opens the trade at WeChat
// Pay first.
func (p *Provider) SignsLocally(model.PayMethod) bool { return false }

// StartPayment opens the transaction and returns the answer the attempt
// keeps: native's code_url, h5's h5_url, or for jsapi and app the
// prepay_id and signed parameters as model.ClientPay in JSON.
func (p *Provider) StartPayment(ctx context.Context, s model.PayStart) (string, error) {
	fen, err := Fen(s.Amount)
	if err != nil {
		return "", err
	}
	a, err := p.Pay(ctx, PayRequest{
		Method: Method(s.Method), OutTradeNo: s.OutTradeNo, Description: s.Subject, Total: fen,
		ExpireAt: s.ExpireAt, NotifyURL: p.notifyURL, OpenID: s.Payer.OpenID, PayerIP: s.Payer.IP, AppID: p.appID,
	})
	if err != nil {
		return "", tag(err)
	}
	switch Method(s.Method) {
	case MethodNative:
		return a.CodeURL, nil
	case MethodH5:
		return a.H5URL, nil
	}
	b, err := json.Marshal(model.ClientPay{PrepayID: a.PrepayID, Params: a.Params})
	return string(b), err
}

// Fen is a yuan amount in fen, refusing one model.CheckAmount refuses
// (more than two decimals, not positive, over model.MaxAmount).
func Fen(yuan decimal.Decimal) (int64, error) {
	if err := model.CheckAmount(yuan); err != nil {
		return 0, fmt.Errorf("%w: %v", model.ErrInvalidRequest, err)
	}
	return yuan.Shift(2).IntPart(), nil
}

// Yuan is fen as a yuan amount.
func Yuan(fen int64) decimal.Decimal { return decimal.New(fen, -2) }

// Observation is a paid transaction as the ledger takes it; ref is the
// notification's id, or model.QueryRef for a query's.
func (t Transaction) Observation() model.Observation {
	at := t.SuccessTime
	ref := t.NotifyID
	if ref == "" {
		ref = model.QueryRef(t.TransactionID)
	}
	return model.Observation{Provider: model.ProviderWechatpay, TradeNo: t.TransactionID, OutTradeNo: t.OutTradeNo,
		Amount: Yuan(t.Total), PaidAt: &at, Ref: ref, Account: t.MchID, App: t.AppID, Status: string(TradeSuccess)}
}

// QueryTrade is Client.QueryTrade in the service's terms: SUCCESS and
// REFUND are TRADE_SUCCESS (paid), NOTPAY and USERPAYING WAIT_BUYER_PAY,
// CLOSED, REVOKED and PAYERROR TRADE_CLOSED.
func (p *Provider) QueryTrade(ctx context.Context, outTradeNo string) (model.Trade, error) {
	st, err := p.Client.QueryTrade(ctx, outTradeNo)
	if err != nil {
		return model.Trade{}, tag(err)
	}
	t := model.Trade{Provider: model.ProviderWechatpay, OutTradeNo: outTradeNo}
	switch st.State {
	case TradeSuccess, TradeRefund:
		t.Status = model.TradePaid
		t.TradeNo, t.Amount = st.Transaction.TransactionID, Yuan(st.Transaction.Total)
		at := st.Transaction.SuccessTime
		t.PaidAt = &at
	case TradeNotPay, TradeUserPaying:
		t.Status = model.TradeOpen
	case TradeClosed, TradeRevoked, TradePayError:
		t.Status = model.TradeClosed
	default:
		return model.Trade{}, tag(fmt.Errorf("%w: wechatpay query %s: trade_state %q", model.ErrGatewayUnknown, outTradeNo, clip(string(st.State))))
	}
	return t, nil
}

// Refund asks WeChat Pay to refund amount of the transaction tradeNo
// under outRequestNo (its out_refund_no). WeChat Pay wants the
// transaction's total too, so it is asked for first. SUCCESS is done;
// PROCESSING, WeChat Pay's usual answer, is an unknown outcome the worker
// queries later; ABNORMAL (the buyer's card is gone) and CLOSED are
// refusals an operator settles in WeChat Pay's merchant platform.
func (p *Provider) Refund(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal, reason string) error {
	fen, err := Fen(amount)
	if err != nil {
		return err
	}
	total, err := p.transactionTotal(ctx, tradeNo)
	if err != nil {
		return tag(err)
	}
	r, err := p.Client.Refund(ctx, RefundRequest{TransactionID: tradeNo, OutRefundNo: outRequestNo, Refund: fen, Total: total, Reason: reason})
	if err != nil {
		return tag(err)
	}
	return tag(refundOutcome(r))
}

// CloseTrade is Client.CloseTrade for the service.
func (p *Provider) CloseTrade(ctx context.Context, outTradeNo string) error {
	return tag(p.Client.CloseTrade(ctx, outTradeNo))
}

// tag marks a gateway error as WeChat Pay's.
func tag(err error) error { return model.TagProvider(model.ProviderWechatpay, err) }

// refundOutcome is what a refund's status means to the refund worker.
func refundOutcome(r Refund) error {
	switch r.Status {
	case RefundSuccess:
		return nil
	case RefundProcessing:
		return fmt.Errorf("%w: wechatpay refund %s is PROCESSING", model.ErrGatewayUnknown, r.OutRefundNo)
	case RefundAbnormal:
		return fmt.Errorf("%w: wechatpay refund %s is ABNORMAL: the buyer's account cannot take it back; settle it in WeChat Pay's merchant platform", model.ErrRefundStuck, r.OutRefundNo)
	}
	return fmt.Errorf("%w: wechatpay refund %s is %s", model.ErrRefundStuck, r.OutRefundNo, r.Status)
}

// RefundDone says whether the refund outRequestNo went through: true when
// SUCCESS; false with no error when WeChat Pay has no such refund (it may
// be asked); ABNORMAL or CLOSED is model.ErrRefundStuck — asking again
// with the same out_refund_no would only answer the same refund, so it
// waits for an operator; PROCESSING is still unknown.
func (p *Provider) RefundDone(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal) (bool, error) {
	r, err := p.QueryRefund(ctx, outRequestNo)
	switch {
	case errors.Is(err, ErrNoRefund):
		return false, nil
	case err != nil:
		return false, tag(err)
	case r.Status != RefundSuccess:
		return false, tag(refundOutcome(r))
	}
	return true, nil
}

// transactionTotal asks WeChat Pay for a transaction's amount in fen
// (GET /v3/pay/transactions/id/{transaction_id}?mchid=).
func (c *Client) transactionTotal(ctx context.Context, transactionID string) (int64, error) {
	svc := native.NativeApiService{Client: c.sdk}
	t, _, err := svc.QueryOrderById(ctx, native.QueryOrderByIdRequest{TransactionId: &transactionID, Mchid: &c.mchID})
	if err != nil {
		return 0, c.failure("query by transaction_id", err)
	}
	if deref(t.TransactionId) != transactionID || t.Amount == nil || t.Amount.Total == nil {
		return 0, fmt.Errorf("%w: wechatpay query of %s: another transaction, or no amount", model.ErrGatewayUnknown, transactionID)
	}
	if err := model.CheckAmount(Yuan(*t.Amount.Total)); err != nil {
		return 0, fmt.Errorf("%w: wechatpay query of %s: amount.total %d fen: %v", model.ErrGatewayUnknown, transactionID, *t.Amount.Total, err)
	}
	return *t.Amount.Total, nil
}

// TradeBill is Client.TradeBill as the service reads a bill.
func (p *Provider) TradeBill(ctx context.Context, day time.Time) (model.Bill, error) {
	b, err := p.Client.TradeBill(ctx, day)
	if err != nil {
		return nil, tag(err) // never a nil *Bill in a non-nil interface
	}
	return b, nil
}

// CheckBillDay refuses a day WeChat Pay no longer has a bill of at now
// (service.BillKeeper): it keeps them three months, so a run of an older
// day is refused before it is claimed, with the reason.
func (p *Provider) CheckBillDay(day, now time.Time) error {
	if oldest := oldestBillAt(now); day.In(model.Beijing).Before(oldest) {
		return fmt.Errorf("WeChat Pay keeps trade bills for %d months: %s is before %s", billMonths,
			day.In(model.Beijing).Format(time.DateOnly), oldest.Format(time.DateOnly))
	}
	return nil
}

// BillPublished is when WeChat Pay has published the previous day's trade
// bill: from 10:00 Beijing (service.BillPublisher).
func (p *Provider) BillPublished() time.Duration { return 10 * time.Hour }

// Notice verifies a notification (VerifyNotification) and says it in the
// service's terms, for the notify handler.
func (p *Provider) Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error) {
	n, err := p.VerifyNotification(ctx, h, body)
	if err != nil {
		return model.Notice{}, err
	}
	out := model.Notice{ID: n.ID}
	if n.Refund != nil {
		out.RefundNo = n.Refund.OutRefundNo
	} else {
		out.Payment = n.Payment.Observation()
	}
	return out, nil
}
