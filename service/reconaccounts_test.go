package service_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// Runs are per account — a bill covers a seller, every app of it — and
// fees are booked per account: two sellers, the first with two apps, are
// two reconcilers and two runs of one date, each over its own seller's
// bill and ledger rows; the run from before runs were kept per account is
// taken over by the first seller's; the second seller's fee goes to its
// own clearing sub-account.
func TestReconcilePerAccount(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newAppsRig(t, store)
		amounts := map[string]string{appWeb: "100.00", appMobile: "50.00", appGroup: "80.00"}
		for _, app := range []string{appWeb, appMobile, appGroup} {
			sn := newSN("ACC")
			mustOrder(t, store, sn, amounts[app])
			if _, err := r.checkout.StartIn(ctx, rigMember, sn, model.ProviderAlipay, model.PayQR, app, model.Payer{}); err != nil {
				t.Fatal(err)
			}
			if err := r.fake.Pay(ctx, sn); err != nil {
				t.Fatal(err)
			}
		}
		date := time.Now().In(model.Beijing).Format(time.DateOnly)
		// A run of the date from before runs were kept per account.
		legacy, attempt, err := store.ClaimRun(ctx, model.BillAccount{Provider: model.ProviderAlipay}, date, "old", time.Now(), time.Minute, nil)
		if err == nil {
			err = store.FinishRun(ctx, legacy.ID, "old", attempt, dao.RunResult{State: model.ReconFailed, Error: "old"}, time.Now())
		}
		if err != nil {
			t.Fatal(err)
		}

		recons := service.NewReconcilers(store, r.providers, r.payments, quietLog)
		all := recons[model.ProviderAlipay]
		if len(all) != 2 || all[0].Account != sellerOne || all[1].Account != sellerTwo ||
			all[0].Name() != "reconciliation" || all[1].Name() != "reconciliation_alipay_"+sellerTwo {
			t.Fatalf("reconcilers %v named %q and %q: want one per seller, the first's job named as before", recons.Accounts(), all[0].Name(), all[1].Name())
		}
		runs := map[string]model.ReconRun{}
		for _, rec := range all {
			rec.SetClock(func() time.Time { return time.Now().Add(24 * time.Hour) })
			run, err := rec.Run(ctx, date)
			if err != nil {
				t.Fatal(err)
			}
			runs[rec.Account] = run
		}
		one, two := runs[sellerOne], runs[sellerTwo]
		if one.ID != legacy.ID || one.Account != sellerOne || one.Attempts != 2 {
			t.Errorf("the first seller's run %+v: want the earlier run of the date (id %d) taken over", one, legacy.ID)
		}
		if two.ID == one.ID || two.Account != sellerTwo || two.Attempts != 1 {
			t.Errorf("the second seller's run %+v: want a run of its own", two)
		}
		for _, c := range []struct {
			run    model.ReconRun
			n      int
			amount string
		}{{one, 2, "150.00"}, {two, 1, "80.00"}} {
			if c.run.State != model.ReconDone || c.run.Unresolved != 0 || c.run.Bill.Payments != c.n || c.run.Ledger.Payments != c.n ||
				!c.run.Bill.PaymentReceived.Equal(dec(c.amount)) || !c.run.Ledger.PaymentAmount.Equal(dec(c.amount)) {
				t.Errorf("run of %s: %+v; want %d payments of %s in bill and ledger, nothing to look at", c.run.Account, c.run, c.n, c.amount)
			}
		}
		ledger := &reconRig{store: store}
		if n := ledger.count(t, "SELECT COUNT(*) FROM recon_run WHERE bill_date = ?", date); n != 2 {
			t.Errorf("%d runs of %s, want 2", n, date)
		}
		if n := ledger.count(t, "SELECT COUNT(*) FROM recon_seen WHERE account = ?", sellerTwo); n != 1 {
			t.Errorf("%d bill lines recorded under the second seller, want 1", n)
		}

		// Fees: each run's event names its account; the first seller's
		// money is in alipay_clearing, the second's in its sub-account.
		acct := service.NewAccounting(store)
		acct.First = map[model.Provider]string{model.ProviderAlipay: sellerOne}
		ledger.bookAll(t, acct)
		fee := func(amount string) string { return dec(amount).Mul(dec("0.006")).Round(2).StringFixed(2) }
		for _, c := range []struct{ account, paid, fees string }{
			{model.ClearingAccount(model.ProviderAlipay, ""), "150.00", dec(fee("100.00")).Add(dec(fee("50.00"))).StringFixed(2)},
			{model.ClearingAccount(model.ProviderAlipay, sellerTwo), "80.00", fee("80.00")},
		} {
			got := ledger.journalTotal(t, c.account)
			if !got.Debit.Equal(dec(c.paid)) || !got.Credit.Equal(dec(c.fees)) {
				t.Errorf("%s: %+v, want %s paid in and %s of fees out", c.account, got, c.paid, c.fees)
			}
		}

		// Which account: a choice when a provider has several.
		if _, err := recons.Of(model.ProviderAlipay, ""); !errors.Is(err, model.ErrInvalidRequest) ||
			!strings.Contains(err.Error(), sellerOne) || !strings.Contains(err.Error(), sellerTwo) {
			t.Errorf("no account of two: %v, want invalid naming both", err)
		}
		if _, err := recons.Of(model.ProviderAlipay, "2088000000000099"); !errors.Is(err, model.ErrInvalidRequest) {
			t.Errorf("an account not configured: %v", err)
		}
		if rec, err := recons.Of(model.ProviderAlipay, sellerTwo); err != nil || rec != all[1] {
			t.Errorf("the second seller: %v", err)
		}
	})
}
