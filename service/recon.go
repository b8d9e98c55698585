package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// BillReconciler checks our ledger against Alipay's trade bill, one
// Beijing day at a time, and repairs what the bill proves we missed —
// through exactly the notification path, Payments.Observe.
//
// A run is idempotent: one run row per (provider, account, bill date) —
// a bill covers one account — claimed by
// compare-and-set with a lease (so of several instances one runs a date at
// a time); re-running recomputes the date's items, and neither a repair nor
// a fee is done twice (a repaired payment is in the ledger the next time;
// a bill line's fee is booked with the line's first match, recon_seen).
type BillReconciler struct {
	store    *dao.Store
	bills    BillSource
	payments *Payments
	// Provider is whose bill this reconciles (Alipay's, unless set), and
	// Account the provider account it covers (its runs are that
	// account's; '' for a provider of one account with no id).
	Provider model.Provider
	Account  string
	// Accounts are the ledger accounts the bill covers: only their rows
	// are looked for in it. Empty, every row of the provider (one
	// account). A bill covers one account, and '' is a row written before
	// the ledger knew accounts: the provider's first (see AppSet).
	Accounts []string
	// apps are the provider's apps, to know a bill line's app by (nil:
	// a bare adapter's bill, whose lines' apps are not taken).
	apps  *AppSet
	log   *slog.Logger
	owner string
	// Batch is how many bill lines are matched per round trip, and
	// Workers how many batches at once.
	Batch, Workers int
	// Lease keeps a run from other instances; it is renewed every batch.
	Lease time.Duration
	// Grace is how far before midnight a day's ledger window ends (and the
	// day before's begins): Alipay may put a payment of 23:59:59 in the
	// next day's bill, so the last minutes of a day are checked against
	// the next day's bill instead.
	Grace time.Duration
	// At is when, after Beijing midnight, the daily job reconciles
	// yesterday (RunOnce): Alipay publishes a day's bill the next morning.
	At time.Duration
	// Interval is the pause between the daily job's rounds.
	Interval time.Duration
	// OnFinished, if set, is told of every finished attempt and how long
	// it took.
	OnFinished func(run model.ReconRun, took time.Duration)
	// OnItem, if set, is told of every item an attempt records.
	OnItem func(model.ReconOutcome)
	// Background ends what RunAsked leaves running when its request ends
	// (the service's lifetime; nil: never).
	Background context.Context
	now        func() time.Time
}

// NewBillReconciler returns the reconciliation use cases and job.
func NewBillReconciler(store *dao.Store, bills BillSource, payments *Payments, log *slog.Logger) *BillReconciler {
	host, _ := os.Hostname()
	return &BillReconciler{
		store: store, bills: bills, payments: payments, log: log, Provider: model.DefaultProvider,
		owner: clipOwner(host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)),
		Batch: 1000, Workers: 4, Lease: 10 * time.Minute, Grace: 15 * time.Minute, At: 9*time.Hour + 30*time.Minute, Interval: 5 * time.Minute, now: time.Now,
	}
}

func clipOwner(s string) string {
	if len(s) > 64 {
		return s[len(s)-64:]
	}
	return s
}

// Run reconciles one Beijing day (yyyy-MM-dd) and returns its run as it
// ended: DONE (with items, perhaps unresolved) or FAILED (with the reason;
// nothing repaired). model.ErrRunBusy when another instance holds the
// date; other errors when the database fails.
func (r *BillReconciler) Run(ctx context.Context, date string) (model.ReconRun, error) {
	c, err := r.claim(ctx, date, nil)
	if err != nil {
		return model.ReconRun{}, err
	}
	return r.finish(ctx, c)
}

// RunAs is RunAsked asked for by a console operator: act's key, operator
// and note go to admin_audit in the transaction that claims the run (a
// form posted twice is model.ErrAlreadyDone, and claims nothing).
func (r *BillReconciler) RunAs(ctx context.Context, act model.Act, date string) (run model.ReconRun, done bool, err error) {
	if err := checkAct(act, false); err != nil {
		return model.ReconRun{}, false, err
	}
	return r.runAsked(ctx, date, &act)
}

// RunAsked is Run asked for through the admin API: the ask is written to
// admin_audit as model.OperatorAdminAPI's in the transaction that claims
// the run. It waits for the run until a second before ctx's deadline (the
// request's); a run still going then — a big day — goes on in the
// background, ended only by Background and kept from other instances by
// its lease, and RunAsked returns it as claimed (RUNNING), done false.
func (r *BillReconciler) RunAsked(ctx context.Context, date string) (run model.ReconRun, done bool, err error) {
	return r.runAsked(ctx, date, nil)
}

// runAsked claims date's run with the ask in admin_audit — act's, or the
// admin API's when act is nil — and waits for it as RunAsked says.
func (r *BillReconciler) runAsked(ctx context.Context, date string, act *model.Act) (run model.ReconRun, done bool, err error) {
	if act == nil {
		act = &model.Act{Operator: model.OperatorAdminAPI}
	}
	c, err := r.claim(ctx, date, act)
	if err != nil {
		return model.ReconRun{}, false, err
	}
	type result struct {
		run model.ReconRun
		err error
	}
	finished, answered := make(chan result), make(chan struct{})
	bg := r.Background
	if bg == nil {
		bg = context.Background()
	}
	go func() {
		run, err := r.finish(bg, c)
		select {
		case finished <- result{run, err}:
		case <-answered:
			// The request was answered RUNNING: nobody else hears of this.
			if err != nil {
				r.log.Error("reconciliation asked for through the admin API failed after its request", "bill_date", date, "attempt", c.attempt, "err", err)
			}
		}
	}()
	var waited <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(max(time.Until(dl)-time.Second, 0))
		defer t.Stop()
		waited = t.C
	}
	select {
	case res := <-finished:
		if res.err != nil && bg.Err() != nil {
			// Stopped with the service: the run resumes after its lease.
			return model.ReconRun{}, false, fmt.Errorf("%w: the service is stopping; %s is reconciled again once its lease ends", model.ErrUnavailable, date)
		}
		return res.run, true, res.err
	case <-waited:
	case <-ctx.Done():
	}
	close(answered)
	// Claimed, not yet counted: the totals in the row are the last
	// attempt's.
	run = c.run
	run.Bill, run.Ledger, run.Counts, run.Unresolved = model.ReconRun{}.Bill, model.ReconRun{}.Ledger, nil, 0
	return run, false, nil
}

// claimed is a run claimed for one attempt.
type claimed struct {
	run     model.ReconRun
	attempt int
	day     time.Time
	started time.Time
}

// CheckDate refuses, as model.ErrInvalidRequest, a date this provider
// cannot have a bill of (CheckBillDate, and a BillKeeper's horizon).
func (r *BillReconciler) CheckDate(date string) (time.Time, error) {
	now := r.now()
	day, err := CheckBillDate(date, now)
	if err != nil {
		return day, err
	}
	if k, ok := r.bills.(BillKeeper); ok {
		if err := k.CheckBillDay(day, now); err != nil {
			return time.Time{}, fmt.Errorf("%w: %w", model.ErrInvalidRequest, err)
		}
	}
	return day, nil
}

// claim claims date's run for an attempt of this instance; asked by an
// operator or the admin API (act set), with the ask in admin_audit, its
// target the provider's run of date (provider/date).
func (r *BillReconciler) claim(ctx context.Context, date string, act *model.Act) (claimed, error) {
	day, err := r.CheckDate(date)
	if err != nil {
		return claimed{}, err
	}
	started := r.now()
	var audit *model.Audit
	if act != nil {
		key := act.Key
		if key == "" {
			key = apiKey(model.AuditReconRun, string(r.Provider), r.Account, date, r.owner, strconv.FormatInt(started.UnixNano(), 10))
		}
		audit = &model.Audit{Key: key, Operator: act.Operator, Action: model.AuditReconRun, TargetKind: model.TargetReconRun,
			TargetID: model.RunTarget(r.Provider, r.Account, date), After: model.AuditReconRunAsked, Note: act.Note}
	}
	run, attempt, err := r.store.ClaimRun(ctx, r.Of(), date, r.owner, started, r.Lease, audit)
	if err != nil {
		return claimed{}, err
	}
	return claimed{run: run, attempt: attempt, day: day, started: started}, nil
}

// finish runs a claimed attempt to its end and returns the run as it
// ended.
func (r *BillReconciler) finish(ctx context.Context, c claimed) (model.ReconRun, error) {
	run, attempt, date, started := c.run, c.attempt, c.run.BillDate, c.started
	res := r.attempt(ctx, run, attempt, c.day)
	if res.State == model.ReconFailed {
		r.log.Error("reconciliation failed", "provider", r.Provider, "account", r.Account, "bill_date", date, "attempt", attempt, "reason", res.Error)
	}
	if err := ctx.Err(); err != nil {
		// Stopped (SIGTERM): nothing more is waited for. The run stays
		// RUNNING until its lease ends; the next round takes it again.
		return model.ReconRun{}, err
	}
	if err := r.store.FinishRun(ctx, run.ID, r.owner, attempt, res, r.now()); err != nil {
		return model.ReconRun{}, err
	}
	out, err := r.store.ReconRun(ctx, r.Of(), date)
	if err != nil {
		return model.ReconRun{}, err
	}
	out = r.own(out)
	if r.OnFinished != nil {
		r.OnFinished(out, r.now().Sub(started))
	}
	if out.State == model.ReconDone && out.Unresolved > 0 {
		r.log.Warn("reconciliation found differences", "provider", r.Provider, "account", r.Account, "bill_date", date, "unresolved", out.Unresolved, "counts", out.Counts)
	} else if out.State == model.ReconDone {
		r.log.Info("reconciliation clean", "provider", r.Provider, "account", r.Account, "bill_date", date, "bill_payments", out.Bill.Payments, "ledger_payments", out.Ledger.Payments)
	}
	return out, nil
}

func (r *BillReconciler) today() time.Time {
	n := r.now().In(model.Beijing)
	return time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, model.Beijing)
}

// attempt does one attempt's work: fetch, match and repair, look for what
// the bill lacks, total up. Any error makes it FAILED with the reason.
func (r *BillReconciler) attempt(ctx context.Context, run model.ReconRun, attempt int, day time.Time) dao.RunResult {
	m := &matcher{r: r, run: run, attempt: attempt, date: run.BillDate, from: day.Add(-r.Grace), to: day.AddDate(0, 0, 1)}
	fail := func(err error) dao.RunResult {
		return dao.RunResult{State: model.ReconFailed, Error: err.Error(), Items: m.items, Repaired: m.repaired}
	}
	var totals model.BillTotals
	bill, err := r.bills.TradeBill(ctx, day)
	switch {
	case errors.Is(err, model.ErrNoBill):
		// No business that day, says Alipay: whatever our ledger holds for
		// it is missing at Alipay.
	case err != nil:
		return fail(err)
	default:
		defer bill.Close()
		if err := checkBill(ctx, bill); err != nil {
			return fail(err)
		}
		totals = bill.BillTotals()
		if err := m.matchAll(ctx, bill); err != nil {
			return fail(err)
		}
	}
	from, to := day.Add(-r.Grace), day.AddDate(0, 0, 1).Add(-r.Grace)
	if err := m.missing(ctx, from, to); err != nil {
		return fail(err)
	}
	ledger, err := r.store.LedgerTotals(ctx, r.Provider, r.Accounts, day, day.AddDate(0, 0, 1))
	if err != nil {
		return fail(err)
	}
	// What other days' runs called missing and this bill holds (a refund
	// we confirmed hours after Alipay made it, a payment near midnight,
	// when the days ran out of order) is missing no more.
	from7, to7 := day.AddDate(0, 0, -reconLookback).Format("2006-01-02"), day.AddDate(0, 0, reconLookback).Format("2006-01-02")
	found, err := r.store.ResolveFoundElsewhere(ctx, r.Provider, run.ID, from7, to7, "found in "+r.Provider.Name()+"'s bill of "+run.BillDate, r.now())
	if err != nil {
		return fail(err)
	}
	if found > 0 {
		r.log.Info("reconciliation found in this bill what other days' runs called missing", "bill_date", run.BillDate, "resolved", found)
	}
	return dao.RunResult{State: model.ReconDone, Bill: totals, Ledger: ledger, Items: m.items, Repaired: m.repaired}
}

// Of is the account whose runs these are: its first account's, for a
// reconciler of the rows that name no account too (Accounts holds "").
func (r *BillReconciler) Of() model.BillAccount {
	return model.BillAccount{Provider: r.Provider, Account: r.Account, Legacy: slices.Contains(r.Accounts, "")}
}

// own is run as this reconciler shows it: a run from before runs were
// kept per account is its account's.
func (r *BillReconciler) own(run model.ReconRun) model.ReconRun {
	if run.Account == "" {
		run.Account = r.Account
	}
	return run
}

// Payments is the payment use case repairs go through.
func (r *BillReconciler) Payments() *Payments { return r.payments }
