package service

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// App is one app of a provider account and the adapter that acts for it:
// what the ledger records of a payment or attempt (Account, ID), and what
// its queries, closes and refunds go through — that app, never another.
type App struct {
	Provider model.Provider
	// Account is the provider account (Alipay's seller_id, WeChat Pay's
	// mchid), ID the app (Alipay's app_id, WeChat Pay's appid), Name the
	// name PROVIDERS_FILE gives it ("" when none).
	Account, ID, Name string
	// Methods limits what the app takes; empty, every method its adapter
	// accepts.
	Methods []model.PayMethod
	// Adapter speaks for the app alone (its own keys, its own app id).
	Adapter Provider
}

// Accepts reports whether a takes payment by m.
func (a App) Accepts(m model.PayMethod) bool {
	return a.Adapter.Accepts(m) && (len(a.Methods) == 0 || slices.Contains(a.Methods, m))
}

// label is how an error names a: its name, or its id.
func (a App) label() string {
	if a.Name != "" {
		return fmt.Sprintf("%q (%s)", a.Name, a.ID)
	}
	return fmt.Sprintf("%q", a.ID)
}

// AppSet is a provider's apps, every account's, in configuration order.
// As a Provider it is the first account's first app: the one a row that
// names no app (written before paynotify knew several) belongs to. Each
// account's bill is fetched through its first app (NewReconcilers).
//
// A reload of the configuration puts another set's apps in force in it
// at once (Swap): every reader holds the set, never a copy of its apps,
// and a call that has looked an app up goes on with that app's adapter.
type AppSet struct {
	apps atomic.Pointer[[]App]
}

// NewAppSet is the set of apps, the first the default; at least one.
func NewAppSet(apps ...App) *AppSet {
	if len(apps) == 0 {
		panic("service.NewAppSet: no app")
	}
	s := &AppSet{}
	apps = slices.Clip(apps)
	s.apps.Store(&apps)
	return s
}

// Spec is the provider the set's apps are of (service.Adapter): its
// first adapter's, or, for an adapter that says none, a name only.
func (s *AppSet) Spec() model.ProviderSpec {
	if a, ok := s.first().(Adapter); ok {
		return a.Spec()
	}
	p := s.list()[0].Provider
	return model.ProviderSpec{Name: p, Title: p.Name(), PayType: p.PayType()}
}

// Swap puts next's apps in force in s, all at once (a reload). Calls
// under way finish with the apps they looked up.
func (s *AppSet) Swap(next *AppSet) { s.apps.Store(next.apps.Load()) }

// list is the apps in force.
func (s *AppSet) list() []App { return *s.apps.Load() }

// first is the default app's adapter.
func (s *AppSet) first() Provider { return s.list()[0].Adapter }

// Apps are the set's apps, in order.
func (s *AppSet) Apps() []App { return slices.Clone(s.list()) }

// App is the app id of account, for a row that names them: "" for id is
// the account's first app ("" for account too: the provider's first
// account's first), "" for account any account's app id. An app no longer
// configured is model.ErrUnknownApp: its trades are never asked of another.
func (s *AppSet) App(account, id string) (App, error) {
	apps := s.list()
	for _, a := range apps {
		if (account == "" || a.Account == account) && (id == "" || a.ID == id) {
			return a, nil
		}
	}
	return App{}, fmt.Errorf("%w: %s account %q app %q", model.ErrUnknownApp, apps[0].Provider, model.Clip(account), model.Clip(id))
}

// Choose is the app a payment by m starts in: ref names it (its name or
// its id), or, empty, the first app of the provider's first account that
// accepts m. An app that does not exist or cannot take m is
// model.ErrInvalidRequest naming it.
func (s *AppSet) Choose(ref string, m model.PayMethod) (App, error) {
	apps := s.list()
	p := apps[0].Provider
	if ref == "" {
		for _, a := range apps {
			if a.Accepts(m) {
				return a, nil
			}
		}
		return App{}, fmt.Errorf("%w: no %s app takes method %q", model.ErrInvalidRequest, p.Name(), model.Clip(string(m)))
	}
	for _, a := range apps {
		if a.Name == ref || a.ID == ref {
			if !a.Accepts(m) {
				return App{}, fmt.Errorf("%w: %s app %s takes no method %q", model.ErrInvalidRequest, p.Name(), a.label(), model.Clip(string(m)))
			}
			return a, nil
		}
	}
	return App{}, fmt.Errorf("%w: %s has no app %q", model.ErrInvalidRequest, p.Name(), model.Clip(ref))
}

// app is the adapter of provider p's app (account, id) — a row's, "" the
// first (see AppSet.App). A provider configured as a bare adapter (tests)
// has one app, whatever the row says.
func (ps Providers) app(p model.Provider, account, id string) (Provider, error) {
	gw, err := ps.get(p)
	if err != nil {
		return nil, err
	}
	if set, ok := gw.(*AppSet); ok {
		a, err := set.App(account, id)
		return a.Adapter, err
	}
	return gw, nil
}

// choose is the app of provider p a payment by m starts in (see
// AppSet.Choose). A bare adapter is one app with no id: ref must be empty.
func (ps Providers) choose(p model.Provider, ref string, m model.PayMethod) (App, error) {
	gw, err := ps.get(p)
	if err != nil {
		return App{}, err
	}
	if set, ok := gw.(*AppSet); ok {
		return set.Choose(ref, m)
	}
	if ref != "" {
		return App{}, fmt.Errorf("%w: %s has no app %q", model.ErrInvalidRequest, p.Name(), model.Clip(ref))
	}
	if !gw.Accepts(m) {
		return App{}, fmt.Errorf("%w: %s takes no method %q", model.ErrInvalidRequest, p.Name(), model.Clip(string(m)))
	}
	return App{Provider: p, Adapter: gw}, nil
}

// The Provider methods of an AppSet are its default app's.

// Accepts is the default app's.
func (s *AppSet) Accepts(m model.PayMethod) bool { return s.first().Accepts(m) }

// SignsLocally is the default app's.
func (s *AppSet) SignsLocally(m model.PayMethod) bool { return s.first().SignsLocally(m) }

// StartPayment starts in the default app.
func (s *AppSet) StartPayment(ctx context.Context, ps model.PayStart) (string, error) {
	return s.first().StartPayment(ctx, ps)
}

// QueryTrade asks the default app.
func (s *AppSet) QueryTrade(ctx context.Context, outTradeNo string) (model.Trade, error) {
	return s.first().QueryTrade(ctx, outTradeNo)
}

// CloseTrade asks the default app.
func (s *AppSet) CloseTrade(ctx context.Context, outTradeNo string) error {
	return s.first().CloseTrade(ctx, outTradeNo)
}

// Refund asks the default app.
func (s *AppSet) Refund(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal, reason string) error {
	return s.first().Refund(ctx, tradeNo, outRequestNo, amount, reason)
}

// RefundDone asks the default app.
func (s *AppSet) RefundDone(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal) (bool, error) {
	return s.first().RefundDone(ctx, tradeNo, outRequestNo, amount)
}

// TradeBill fetches the default app's account's bill.
func (s *AppSet) TradeBill(ctx context.Context, day time.Time) (model.Bill, error) {
	return s.first().TradeBill(ctx, day)
}
