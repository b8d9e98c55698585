package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"paynotify/model"
	"paynotify/service"
)

type reconQueueData struct {
	page
	Runs []model.ReconRun
	// Yesterday is the default day of the Run this day form.
	Yesterday string
	Outcome   model.ReconOutcome
	Outcomes  []model.ReconOutcome
	Open      bool
	Rows      []model.ReconRow
	Count     int64
	Page      int
	HasNext   bool
	// Resolves are the provider accounts whose items this console
	// resolves and whose days it runs.
	Resolves service.Reconcilers
}

// reconQueue shows the latest reconciliation runs and the items they
// found: by default those an operator has to look at.
func (c *Console) reconQueue(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	outcome := model.ReconOutcomeNamed(strings.ToUpper(q.Get("outcome")))
	if outcome != "" && !outcome.Valid() {
		c.status(w, r, http.StatusBadRequest, "Unknown reconciliation outcome.")
		return
	}
	open := q.Get("all") == ""
	pageNo := pageParam(r, "page")
	runs, err := c.d.Queues.ReconRuns(r.Context(), 14)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	for i := range runs {
		runs[i] = c.d.BillReconcilers.Own(runs[i])
	}
	rows, n, err := c.d.Queues.ReconQueue(r.Context(), outcome, open, pageNo)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "recon", reconQueueData{page: c.page(r, "Reconciliation"), Runs: runs, Outcome: outcome,
		Yesterday: service.Yesterday(c.d.Now()),
		Outcomes:  model.ReconOutcomes, Open: open, Rows: rows, Count: n, Page: pageNo,
		HasNext: int64((pageNo+1)*service.QueuePage) < n, Resolves: c.d.BillReconcilers})
}

func (c *Console) resolveItem(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, model.ErrItemNotFound)
		return
	}
	// Through the item's own provider's reconciler: it finds the item's
	// order by that provider's trade_no.
	row, err := c.d.Lookup.ReconItem(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	rec, err := c.reconOf(row.Provider, row.Account)
	if err != nil {
		whose := row.Provider.Name()
		if row.Account != "" {
			whose += " account " + row.Account
		}
		c.fail(w, r, fmt.Errorf("%w: item %d is %s's; resolve it on an instance configured for %s",
			model.ErrProviderOff, id, whose, whose))
		return
	}
	_, err = rec.ResolveItemAs(r.Context(), act(r), id)
	c.done(w, r, err, back(r, Prefix+"/queues/reconciliation"), "resolved")
}

type reconRunData struct {
	page
	service.ReconRunPage
	Outcome  model.ReconOutcome
	Outcomes []model.ReconOutcome
	// Total is how many items the run has (of Outcome if set); Rows holds
	// at most service.ReconRunPageSize of them.
	Total int
	// Resolves are the provider accounts whose items this console
	// resolves.
	Resolves service.Reconcilers
}

// reconRun shows one provider account's run of one date (?account=ID:
// the provider's only account without it): what the bill and our ledger
// said, its attempts, and its items (of one outcome if asked).
func (c *Console) reconRun(w http.ResponseWriter, r *http.Request) {
	provider, err := model.ParseProvider(r.PathValue("provider"))
	if err != nil {
		c.status(w, r, http.StatusNotFound, "No such provider: reconciliation runs are alipay's or wechatpay's.")
		return
	}
	date := r.PathValue("date")
	if _, err := service.ParseBillDate(date); err != nil {
		c.status(w, r, http.StatusBadRequest, "A bill date is written yyyy-MM-dd (Beijing), such as 2026-11-30.")
		return
	}
	outcome := model.ReconOutcomeNamed(strings.ToUpper(r.URL.Query().Get("outcome")))
	if outcome != "" && !outcome.Valid() {
		c.status(w, r, http.StatusBadRequest, "Unknown reconciliation outcome.")
		return
	}
	account := model.BillAccount{Provider: provider, Account: r.URL.Query().Get("account")}
	if rec, err := c.reconOf(provider, account.Account); err == nil {
		account = rec.Of() // the first account's runs from before accounts too
	}
	p, err := c.d.Queues.ReconRun(r.Context(), account, date, outcome)
	if errors.Is(err, model.ErrRunNotFound) {
		c.status(w, r, http.StatusNotFound, provider.Name()+"'s bill of "+date+" has not been reconciled: there is no run of that date.")
		return
	}
	if err == nil {
		p.Run = c.d.BillReconcilers.Own(p.Run)
	}
	if err != nil {
		c.failAbout(w, r, err, Prefix+"/queues/reconciliation", "the reconciliation runs")
		return
	}
	d := reconRunData{page: c.page(r, provider.Name()+"'s reconciliation of "+date), ReconRunPage: p, Outcome: outcome,
		Outcomes: model.ReconOutcomes, Resolves: c.d.BillReconcilers}
	for o, n := range p.Run.Counts {
		if outcome == "" || o == outcome {
			d.Total += n
		}
	}
	c.render(w, r, http.StatusOK, "reconrun", d)
}

// runDay reconciles one provider account's day now (?account=ID: the
// provider's only account without it), as the daily job would, with the
// operator's ask in admin_audit: back to the run's page, which shows how
// it ended (or that it is still running, for a big day).
func (c *Console) runDay(w http.ResponseWriter, r *http.Request) {
	provider, err := model.ParseProvider(r.PathValue("provider"))
	if err != nil || c.d.BillReconcilers[provider] == nil {
		c.status(w, r, http.StatusNotFound, "No such provider here: this instance reconciles "+c.reconNames()+".")
		return
	}
	rec, err := c.d.BillReconcilers.Of(provider, r.URL.Query().Get("account"))
	if err != nil {
		c.status(w, r, http.StatusBadRequest, "Which account? "+strings.TrimPrefix(err.Error(), model.ErrInvalidRequest.Error()+": "))
		return
	}
	date := r.PathValue("date")
	if r.PostFormValue("date") != "" {
		date = r.PostFormValue("date")
	}
	if _, err := service.ParseBillDate(date); err != nil {
		c.status(w, r, http.StatusBadRequest, "A bill date is written yyyy-MM-dd (Beijing), such as 2026-11-30.")
		return
	}
	run, done, err := rec.RunAs(r.Context(), act(r), date)
	flash := "ran"
	if err == nil && !done {
		flash = "running"
	}
	if err == nil {
		date = run.BillDate
	}
	c.done(w, r, err, runLink(provider, rec.Account, date), flash)
}

// reconOf is provider's reconciler of account: "" is a run's from before
// runs were kept per account, the provider's first account's.
func (c *Console) reconOf(provider model.Provider, account string) (*service.BillReconciler, error) {
	if all := c.d.BillReconcilers[provider]; account == "" && len(all) > 0 {
		return all[0], nil
	}
	return c.d.BillReconcilers.Of(provider, account)
}

// reconNames names the providers this console reconciles.
func (c *Console) reconNames() string {
	var names []string
	for _, p := range model.Providers() {
		if c.d.BillReconcilers[p] != nil {
			names = append(names, p.Name()+"'s")
		}
	}
	if len(names) == 0 {
		return "no provider's bill"
	}
	return strings.Join(names, " and ") + " bills"
}

// runLink is the console page of provider account's run of date.
func runLink(provider model.Provider, account, date string) string {
	link := Prefix + "/reconciliations/" + pathEscape(string(provider)) + "/" + pathEscape(date)
	if account != "" {
		link += "?account=" + url.QueryEscape(account)
	}
	return link
}

// outcomeLink is runLink showing the items of one outcome.
func outcomeLink(provider model.Provider, account, date string, o model.ReconOutcome) string {
	link := runLink(provider, account, date)
	if account != "" {
		return link + "&outcome=" + url.QueryEscape(string(o))
	}
	return link + "?outcome=" + url.QueryEscape(string(o))
}

// runDayLink is where the form that runs r's day of date posts.
func runDayLink(r *service.BillReconciler, date string) string {
	link := Prefix + "/reconciliations/" + pathEscape(string(r.Provider)) + "/" + pathEscape(date) + "/run"
	if r.Account != "" {
		link += "?account=" + url.QueryEscape(r.Account)
	}
	return link
}

// targetRun is the page of the run an audit row's target names
// ("wechatpay/2026-11-30", "wechatpay/2026-11-30/1900012345"); rows
// written before the target named its provider lead to the runs' list.
func targetRun(id string) string {
	provider, rest, ok := strings.Cut(id, "/")
	if !ok {
		return Prefix + "/queues/reconciliation?all=1"
	}
	date, account, _ := strings.Cut(rest, "/")
	return runLink(model.Provider(provider), account, date)
}
