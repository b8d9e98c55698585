package service

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Reconcilers are the bill reconcilers of each configured provider, one
// per account (a bill covers an account, not an app), the provider's
// first account first.
type Reconcilers map[model.Provider][]*BillReconciler

// NewReconcilers makes one reconciler per account of every provider in
// ps: each fetches its bill through the account's first app and looks
// for the account's rows in it — the first account's rows that name no
// account too (written before the ledger knew accounts). A provider
// configured as a bare adapter (tests) is one account with no id, whose
// bill covers every row.
func NewReconcilers(store *dao.Store, ps Providers, payments *Payments, log *slog.Logger) Reconcilers {
	rs := Reconcilers{}
	for _, p := range ps.Names() {
		set, ok := ps[p].(*AppSet)
		if !ok {
			r := NewBillReconciler(store, ps[p], payments, log)
			r.Provider = p
			rs[p] = []*BillReconciler{r}
			continue
		}
		for _, a := range set.list() {
			if slices.ContainsFunc(rs[p], func(r *BillReconciler) bool { return r.Account == a.Account }) {
				continue // the account's first app fetches its bill
			}
			r := NewBillReconciler(store, accountBills{set: set, account: a.Account}, payments, log)
			r.Provider, r.Account, r.Accounts, r.apps = p, a.Account, []string{a.Account}, set
			if len(rs[p]) == 0 {
				r.Accounts = []string{"", a.Account}
			}
			rs[p] = append(rs[p], r)
		}
	}
	return rs
}

// All are every reconciler, provider by provider (model.Providers()'
// order), each provider's accounts in order.
func (rs Reconcilers) All() []*BillReconciler {
	var out []*BillReconciler
	for _, p := range model.Providers() {
		out = append(out, rs[p]...)
	}
	return out
}

// Of is provider p's reconciler of account. account may be empty only
// when p has one account: with several, which one is a choice the caller
// must make, and the error (model.ErrInvalidRequest) names the choices,
// as it does for an account p does not have. A provider not configured
// is model.ErrProviderOff.
func (rs Reconcilers) Of(p model.Provider, account string) (*BillReconciler, error) {
	all := rs[p]
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: %s", model.ErrProviderOff, p.Name())
	}
	if account == "" && len(all) == 1 {
		return all[0], nil
	}
	for _, r := range all {
		if account != "" && r.Account == account {
			return r, nil
		}
	}
	var ids []string
	for _, r := range all {
		ids = append(ids, r.Account)
	}
	if account == "" {
		return nil, fmt.Errorf("%w: %s has %d accounts: name one with account (one of %s)", model.ErrInvalidRequest, p.Name(), len(all), strings.Join(ids, ", "))
	}
	return nil, fmt.Errorf("%w: %s has no account %q (its accounts: %s)", model.ErrInvalidRequest, p.Name(), model.Clip(account), strings.Join(ids, ", "))
}

// Own is run as its provider's reconcilers show it: a run from before
// runs were kept per account is the provider's first account's.
func (rs Reconcilers) Own(run model.ReconRun) model.ReconRun {
	if all := rs[run.Provider]; len(all) > 0 {
		return all[0].own(run)
	}
	return run
}

// First is each provider's first account: the one whose money the
// journal books to the provider's clearing account itself (Accounting).
func (rs Reconcilers) First() map[model.Provider]string {
	first := map[model.Provider]string{}
	for p, all := range rs {
		first[p] = all[0].Account
	}
	return first
}

// Accounts are the accounts rs reconcile, in All's order.
func (rs Reconcilers) Accounts() []model.BillAccount {
	var out []model.BillAccount
	for _, r := range rs.All() {
		out = append(out, r.Of())
	}
	return out
}

// accountBills is one account's bill source: its first app as it is in
// force when each bill is fetched (a reload may change its keys, never its
// adapter's kind). It is a BillKeeper and a BillPublisher whatever that
// adapter is — one that is neither keeps every bill and publishes at
// midnight, which is what the reconciler assumes of a source that is
// neither.
type accountBills struct {
	set     *AppSet
	account string
}

// adapter is the account's first app's adapter now.
func (b accountBills) adapter() (Provider, error) {
	a, err := b.set.App(b.account, "")
	return a.Adapter, err
}

// TradeBill fetches the account's bill of day.
func (b accountBills) TradeBill(ctx context.Context, day time.Time) (model.Bill, error) {
	p, err := b.adapter()
	if err != nil {
		return nil, err
	}
	return p.TradeBill(ctx, day)
}

// CheckBillDay is the adapter's, if it keeps bills for a while only.
func (b accountBills) CheckBillDay(day, now time.Time) error {
	if p, err := b.adapter(); err == nil {
		if k, ok := p.(BillKeeper); ok {
			return k.CheckBillDay(day, now)
		}
	}
	return nil
}

// BillPublished is the adapter's, if it publishes a day's bill late.
func (b accountBills) BillPublished() time.Duration {
	if p, err := b.adapter(); err == nil {
		if pub, ok := p.(BillPublisher); ok {
			return pub.BillPublished()
		}
	}
	return 0
}
