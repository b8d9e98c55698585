package model

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Provider names who moved the money: the name its adapter registers
// (RegisterProvider), stored with every payment, attempt, refund and run.
type Provider string

// The providers paynotify ships adapters for. Their names are in stored
// rows, so they are known before any adapter registers: a row of a
// provider no longer configured still reads as that provider's.
const (
	ProviderAlipay    Provider = "alipay"
	ProviderWechatpay Provider = "wechatpay"
)

// DefaultProvider is the provider meant where none is named: a route or
// request of the form paynotify had before it knew several providers, a
// row or event written then. This is the one place that rule lives.
const DefaultProvider = ProviderAlipay

// OrDefault is p, or DefaultProvider when p is empty.
func (p Provider) OrDefault() Provider {
	if p == "" {
		return DefaultProvider
	}
	return p
}

// ProviderSpec is what the ledger knows of a provider beside its adapter:
// its name as stored and as routes spell it, how an operator reads it, and
// the order's pay_type for a payment by it (the mall's numbering).
type ProviderSpec struct {
	Name    Provider
	Title   string
	PayType PayType
}

// providerTable is every provider known, in registration order; never
// changed once published (RegisterProvider copies it).
type providerTable struct {
	list   []ProviderSpec
	byName map[Provider]ProviderSpec
}

var (
	// known is read on every payment (PayType, Check): one atomic load,
	// no lock. It starts with the shipped providers.
	known      = shipped()
	registerMu sync.Mutex // serialises RegisterProvider's copy-and-swap
)

// shipped is the table of the providers paynotify ships adapters for.
func shipped() *atomic.Pointer[providerTable] {
	t := &providerTable{byName: map[Provider]ProviderSpec{}}
	for _, s := range []ProviderSpec{
		{Name: ProviderAlipay, Title: "Alipay", PayType: PayTypeAlipay},
		{Name: ProviderWechatpay, Title: "WeChat Pay", PayType: PayTypeWechatpay},
	} {
		t.list, t.byName[s.Name] = append(t.list, s), s
	}
	var p atomic.Pointer[providerTable]
	p.Store(t)
	return &p
}

// table is the providers known now.
func table() *providerTable { return known.Load() }

// maxProviderLen is the provider columns' width, VARCHAR(16).
const maxProviderLen = 16

// RegisterProvider makes s's provider known to the ledger: its payments
// are taken (Observation.Check), its orders get s.PayType, routes parse
// its name. The same spec again is no change; a name registered with
// another spec, or a pay type another provider has, is an error. An
// adapter's spec is registered where providers are wired
// (service.Providers.Add), never at package load.
func RegisterProvider(s ProviderSpec) error {
	if err := s.check(); err != nil {
		return err
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	old := known.Load()
	if have, ok := old.byName[s.Name]; ok {
		if have != s {
			return fmt.Errorf("provider %q is registered as %+v, not %+v", s.Name, have, s)
		}
		return nil
	}
	for _, have := range old.list {
		if have.PayType == s.PayType {
			return fmt.Errorf("provider %q: pay_type %d is %s's", s.Name, s.PayType, have.Name)
		}
	}
	t := &providerTable{list: append(slices.Clip(old.list), s), byName: make(map[Provider]ProviderSpec, len(old.byName)+1)}
	for k, v := range old.byName {
		t.byName[k] = v
	}
	t.byName[s.Name] = s
	known.Store(t)
	return nil
}

// check refuses a spec the ledger could not store or route.
func (s ProviderSpec) check() error {
	name := string(s.Name)
	if name == "" || len(name) > maxProviderLen || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return fmt.Errorf("provider %q: a name is 1 to %d lower-case letters and digits", Clip(name), maxProviderLen)
	}
	if s.Title == "" {
		return fmt.Errorf("provider %q: no title", name)
	}
	if s.PayType <= PayTypeNone {
		return fmt.Errorf("provider %q: pay_type %d, want a positive number", name, s.PayType)
	}
	return nil
}

// Providers are every provider known, in the order paynotify lists them:
// the shipped two, then those registered.
func Providers() []Provider {
	t := table()
	out := make([]Provider, len(t.list))
	for i, s := range t.list {
		out[i] = s.Name
	}
	return out
}

// ParseProvider reads a provider's name as routes and requests spell it.
func ParseProvider(s string) (Provider, error) {
	if _, ok := table().byName[Provider(s)]; ok {
		return Provider(s), nil
	}
	var names []string
	for _, p := range Providers() {
		names = append(names, string(p))
	}
	return "", fmt.Errorf("%w: provider %q: want %s", ErrInvalidRequest, Clip(s), strings.Join(names, " or "))
}

// Name is how an operator reads the provider's name.
func (p Provider) Name() string {
	if s, ok := table().byName[p]; ok {
		return s.Title
	}
	return string(p)
}

// PayType is the order's pay_type for a payment by p; PayTypeNone for a
// provider not known.
func (p Provider) PayType() PayType { return table().byName[p].PayType }
