package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"paynotify/console"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// Two Alipay sellers: the Reconciliation page names each run's account
// (a run from before runs were kept per account is the first seller's)
// and links each to its own page, offers Run this day per account, and a
// run asked without its account (which of two?) is refused, nothing run.
func TestReconOfTwoAccounts(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		const one, two = "2088000000000081", "2088000000000082"
		noBill := service.BillSourceFunc(func(context.Context, time.Time) (model.Bill, error) { return nil, model.ErrNoBill })
		e := newEnv(t, store, func(d *console.Deps) {
			var recons []*service.BillReconciler
			for i, account := range []string{one, two} {
				r := service.NewBillReconciler(store, noBill, service.NewPayments(store), nil)
				r.Provider, r.Account, r.Accounts = model.ProviderAlipay, account, []string{account}
				if i == 0 {
					r.Accounts = []string{"", account}
				}
				recons = append(recons, r)
			}
			d.BillReconcilers = service.Reconcilers{model.ProviderAlipay: recons}
			d.Dashboard.Accounts = d.BillReconcilers.Accounts()
		})
		ctx := t.Context()
		for _, r := range []struct{ account, date string }{{"", "2026-11-28"}, {two, "2026-11-29"}} {
			run, attempt, err := store.ClaimRun(ctx, model.BillAccount{Provider: model.ProviderAlipay, Account: r.account}, r.date, "test", time.Now(), time.Minute, nil)
			if err == nil {
				err = store.FinishRun(ctx, run.ID, "test", attempt, dao.RunResult{State: model.ReconDone}, time.Now())
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		c := e.signedIn(t, "alice")
		queue := c.mustGet(t, "/console/queues/reconciliation", http.StatusOK)
		mustContain(t, queue.body,
			`<td>Alipay <code class="id">`+one+`</code></td><td><a href="/console/reconciliations/alipay/2026-11-28?account=`+one+`">`,
			`<td>Alipay <code class="id">`+two+`</code></td><td><a href="/console/reconciliations/alipay/2026-11-29?account=`+two+`">`,
			`formaction="/console/reconciliations/alipay/`, `/run?account=`+one+`">Run this day: Alipay `+one+`</button>`,
			`/run?account=`+two+`">Run this day: Alipay `+two+`</button>`)
		page := c.mustGet(t, "/console/reconciliations/alipay/2026-11-29?account="+two, http.StatusOK)
		mustContain(t, page.body, `<dt>account</dt><dd><code class="id">`+two+`</code></dd>`)
		c.mustGet(t, "/console/reconciliations/alipay/2026-11-28?account="+one, http.StatusOK)
		c.mustGet(t, "/console/reconciliations/alipay/2026-11-29?account="+one, http.StatusNotFound)

		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, queue.body)}, "date": {"2026-11-30"}}
		r := c.post(t, "/console/reconciliations/alipay/2026-11-30/run", form)
		if r.status != http.StatusBadRequest {
			t.Fatalf("a run of which account? %d %s", r.status, r.body)
		}
		mustContain(t, r.body, "Which account?", one, two)
		if _, err := store.ReconRun(ctx, model.BillAccount{Provider: model.ProviderAlipay, Account: one, Legacy: true}, "2026-11-30"); err == nil {
			t.Fatal("a run asked without its account was claimed")
		}
	})
}
