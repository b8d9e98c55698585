package service

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// Provider is what the service asks of a payment provider (alipay.Provider,
// wechatpay's, or a fake in tests and dev). An adapter only translates:
// what a payment does to its order is decided above it, once. Errors are
// model.ErrTradeNotExist, ErrTradeStatus, ErrGatewayRefused or
// ErrGatewayUnknown, wrapped with text that names the provider and
// tagged with it (model.TagProvider), so that API clients are told whose
// answer it was.
type Provider interface {
	// Accepts reports whether the provider takes payment by m.
	Accepts(m model.PayMethod) bool
	// SignsLocally reports whether starting a payment by m only signs what
	// the buyer opens, with no call to the provider: checkout stores it
	// with the attempt. Otherwise starting opens the trade at the provider,
	// which checkout does only once the attempt is stored.
	SignsLocally(m model.PayMethod) bool
	// StartPayment returns what the buyer's client needs to pay s: a URL,
	// a QR code's content, or the provider's own parameters.
	StartPayment(ctx context.Context, s model.PayStart) (string, error)
	// QueryTrade says where a trade stands.
	QueryTrade(ctx context.Context, outTradeNo string) (model.Trade, error)
	// CloseTrade closes a trade so that it takes no payment any more.
	CloseTrade(ctx context.Context, outTradeNo string) error
	// Refund gives amount of a trade back, once per outRequestNo however
	// often it is asked.
	Refund(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal, reason string) error
	// RefundDone says whether the refund outRequestNo went through.
	RefundDone(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal) (bool, error)
	// TradeBill fetches the provider's bill of a Beijing day:
	// model.ErrNoBill when it has none (no business that day).
	TradeBill(ctx context.Context, day time.Time) (model.Bill, error)
}

// BillKeeper is a bill source that keeps bills for a limited time
// (WeChat Pay: three months). CheckBillDay says why day's bill can no
// longer be had at now, or nil; a run of such a day is refused as a bad
// request before it is claimed, as a day after yesterday is.
type BillKeeper interface {
	CheckBillDay(day, now time.Time) error
}

// BillPublisher is a bill source that publishes a day's bill late:
// BillPublished is how long after Beijing midnight the previous day's bill
// is there (WeChat Pay: 10:00). The daily reconciliation waits for it,
// whatever its At says; a source that is no BillPublisher publishes by
// midnight.
type BillPublisher interface {
	BillPublished() time.Duration
}

// Adapter is a provider's adapter that says which provider it speaks for:
// what Providers.Add wires.
type Adapter interface {
	Provider
	// Spec is the provider's name, title and pay_type
	// (model.ProviderSpec).
	Spec() model.ProviderSpec
}

// Providers are the providers this merchant takes payment through, by
// name: built once, in main.
type Providers map[model.Provider]Provider

// Add wires adapter a as the provider it speaks for: the provider is made
// known to the ledger (model.RegisterProvider: its payments taken, its
// orders' pay_type, its name in routes) and configured here. It is the
// one line a provider needs beside its package.
func (ps Providers) Add(a Adapter) error {
	s := a.Spec()
	if err := model.RegisterProvider(s); err != nil {
		return err
	}
	if _, dup := ps[s.Name]; dup {
		return fmt.Errorf("provider %q added twice", s.Name)
	}
	ps[s.Name] = a
	return nil
}

// get is provider p, or an error saying it is not configured.
func (ps Providers) get(p model.Provider) (Provider, error) {
	if gw, ok := ps[p]; ok {
		return gw, nil
	}
	return nil, fmt.Errorf("%w: %q", model.ErrProviderOff, p)
}

// Names lists the configured providers in model.Providers()' order.
func (ps Providers) Names() []model.Provider {
	var out []model.Provider
	for _, p := range model.Providers() {
		if _, ok := ps[p]; ok {
			out = append(out, p)
		}
	}
	return slices.Clip(out)
}
