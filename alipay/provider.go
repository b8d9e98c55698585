package alipay

import (
	"context"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// Provider is the Alipay client as the service's payment provider
// (service.Provider): it starts payments with the notify and return URLs
// it was made with, and asks Alipay everything else through the Client.
// Its gateway errors are model.ProviderErrors of Alipay.
type Provider struct {
	*Client
	notifyURL, returnURL string
}

// NewProvider returns c as a provider whose trades notify notifyURL and,
// paid in a browser, return the buyer to returnURL.
func NewProvider(c *Client, notifyURL, returnURL string) *Provider {
	return &Provider{Client: c, notifyURL: notifyURL, returnURL: returnURL}
}

// Spec is Alipay as the ledger knows it (service.Adapter).
func (p *Provider) Spec() model.ProviderSpec {
	return model.ProviderSpec{Name: model.ProviderAlipay, Title: "Alipay", PayType: model.PayTypeAlipay}
}

// Accepts reports whether m is one of Alipay's: page, wap or qr.
func (p *Provider) Accepts(m model.PayMethod) bool {
	return m == model.PayPage || m == model.PayWap || m == model.PayQR
}

// SignsLocally reports whether a payment by m is a URL signed here (page
// and WAP): Alipay hears of the trade only when the buyer opens it.
func (p *Provider) SignsLocally(m model.PayMethod) bool {
	return m == model.PayPage || m == model.PayWap
}

// StartPayment returns the signed page or WAP URL, or asks Alipay for the
// QR code (alipay.trade.precreate).
func (p *Provider) StartPayment(ctx context.Context, s model.PayStart) (string, error) {
	switch s.Method {
	case model.PayPage:
		return p.PagePayURL(s.OutTradeNo, s.Subject, s.Amount, s.ExpireAt, p.notifyURL, p.returnURL)
	case model.PayWap:
		return p.WapPayURL(s.OutTradeNo, s.Subject, s.Amount, s.ExpireAt, p.notifyURL, p.returnURL)
	case model.PayQR:
		qr, err := p.Precreate(ctx, s.OutTradeNo, s.Subject, s.Amount, s.ExpireAt, p.notifyURL)
		return qr, tag(err)
	}
	return "", fmt.Errorf("%w: Alipay takes no method %q", model.ErrInvalidRequest, model.Clip(string(s.Method)))
}

// TradeBill is Client.TradeBill as the service reads a bill.
func (p *Provider) TradeBill(ctx context.Context, day time.Time) (model.Bill, error) {
	b, err := p.Client.TradeBill(ctx, day)
	if err != nil {
		return nil, tag(err) // never a nil *Bill in a non-nil interface
	}
	return b, nil
}

// QueryTrade is Client.QueryTrade for the service.
func (p *Provider) QueryTrade(ctx context.Context, outTradeNo string) (model.Trade, error) {
	t, err := p.Client.QueryTrade(ctx, outTradeNo)
	return t, tag(err)
}

// CloseTrade is Client.CloseTrade for the service.
func (p *Provider) CloseTrade(ctx context.Context, outTradeNo string) error {
	return tag(p.Client.CloseTrade(ctx, outTradeNo))
}

// Refund is Client.Refund for the service.
func (p *Provider) Refund(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal, reason string) error {
	return tag(p.Client.Refund(ctx, tradeNo, outRequestNo, amount, reason))
}

// RefundDone is Client.RefundDone for the service.
func (p *Provider) RefundDone(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal) (bool, error) {
	done, err := p.Client.RefundDone(ctx, tradeNo, outRequestNo, amount)
	return done, tag(err)
}

// tag marks a gateway error as Alipay's.
func tag(err error) error { return model.TagProvider(model.ProviderAlipay, err) }
