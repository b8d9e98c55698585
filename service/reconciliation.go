package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/sync/errgroup"

	"paynotify/dao"
	"paynotify/model"
)

// BillSource fetches a provider's trade bill of a Beijing day:
// model.ErrNoBill when it has none (no business that day). Every Provider
// is one.
type BillSource interface {
	TradeBill(ctx context.Context, day time.Time) (model.Bill, error)
}

// BillSourceFunc adapts a function to BillSource.
type BillSourceFunc func(ctx context.Context, day time.Time) (model.Bill, error)

// TradeBill calls f.
func (f BillSourceFunc) TradeBill(ctx context.Context, day time.Time) (model.Bill, error) {
	return f(ctx, day)
}

// Reconciliations checks our ledger against Alipay's trade bill, one
// Beijing day at a time, and repairs what the bill proves we missed —
// through exactly the notification path, Payments.Observe.
//
// A run is idempotent: one run row per (provider, bill date), claimed by
// compare-and-set with a lease (so of several instances one runs a date at
// a time); re-running recomputes the date's items, and neither a repair nor
// a fee is done twice (a repaired payment is in the ledger the next time;
// a bill line's fee is booked with the line's first match, recon_seen).
type Reconciliations struct {
	store    *dao.Store
	bills    BillSource
	payments *Payments
	// Provider is whose bill this reconciles (Alipay's, unless set).
	Provider model.Provider
	log      *slog.Logger
	owner    string
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

// NewReconciliations returns the reconciliation use cases and job.
func NewReconciliations(store *dao.Store, bills BillSource, payments *Payments, log *slog.Logger) *Reconciliations {
	host, _ := os.Hostname()
	return &Reconciliations{
		store: store, bills: bills, payments: payments, log: log, Provider: model.ProviderAlipay,
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

// ParseBillDate reads a yyyy-MM-dd Beijing date.
func ParseBillDate(s string) (time.Time, error) {
	t, err := time.ParseInLocation("2006-01-02", s, model.Beijing)
	if err != nil || t.Format("2006-01-02") != s {
		return time.Time{}, fmt.Errorf("%w: date %q is not yyyy-MM-dd", model.ErrInvalidRequest, s)
	}
	return t, nil
}

// FirstBillDate is the first day a bill can be asked for: Alipay opened
// in December 2004, and no provider has a bill of an earlier day.
const FirstBillDate = "2004-12-01"

// CheckBillDate reads a date a run is asked for (yyyy-MM-dd, Beijing) and
// refuses what cannot have a bill: a day before FirstBillDate, or one
// after yesterday as of now (a day's bill is published the next
// morning). It is the edge's check, before anything is claimed or
// fetched; errors wrap model.ErrInvalidRequest.
func CheckBillDate(s string, now time.Time) (time.Time, error) {
	day, err := ParseBillDate(s)
	if err != nil {
		return day, err
	}
	first, _ := ParseBillDate(FirstBillDate)
	if day.Before(first) {
		return time.Time{}, fmt.Errorf("%w: %s is before any bill (the first is of %s)", model.ErrInvalidRequest, s, FirstBillDate)
	}
	n := now.In(model.Beijing)
	if today := time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, model.Beijing); !day.Before(today) {
		return time.Time{}, fmt.Errorf("%w: %s has no bill yet (a day's bill is published the next morning; the latest is of %s)",
			model.ErrInvalidRequest, s, Yesterday(now))
	}
	return day, nil
}

// Yesterday is the Beijing date before now's.
func Yesterday(now time.Time) string {
	return now.In(model.Beijing).AddDate(0, 0, -1).Format("2006-01-02")
}

// Run reconciles one Beijing day (yyyy-MM-dd) and returns its run as it
// ended: DONE (with items, perhaps unresolved) or FAILED (with the reason;
// nothing repaired). model.ErrRunBusy when another instance holds the
// date; other errors when the database fails.
func (r *Reconciliations) Run(ctx context.Context, date string) (model.ReconRun, error) {
	c, err := r.claim(ctx, date, false)
	if err != nil {
		return model.ReconRun{}, err
	}
	return r.finish(ctx, c)
}

// RunAsked is Run asked for through the admin API: the ask is written to
// admin_audit as model.OperatorAdminAPI's in the transaction that claims
// the run. It waits for the run until a second before ctx's deadline (the
// request's); a run still going then — a big day — goes on in the
// background, ended only by Background and kept from other instances by
// its lease, and RunAsked returns it as claimed (RUNNING), done false.
func (r *Reconciliations) RunAsked(ctx context.Context, date string) (run model.ReconRun, done bool, err error) {
	c, err := r.claim(ctx, date, true)
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

// claim claims date's run for an attempt of this instance; asked, through
// the admin API, with the ask in admin_audit.
func (r *Reconciliations) claim(ctx context.Context, date string, asked bool) (claimed, error) {
	day, err := CheckBillDate(date, r.now())
	if err != nil {
		return claimed{}, err
	}
	started := r.now()
	var audit *model.Audit
	if asked {
		audit = &model.Audit{Key: apiKey(model.AuditReconRun, date, r.owner, strconv.FormatInt(started.UnixNano(), 10)),
			Operator: model.OperatorAdminAPI, Action: model.AuditReconRun, TargetKind: model.TargetReconRun, TargetID: date,
			After: model.AuditReconRunAsked}
	}
	run, attempt, err := r.store.ClaimRun(ctx, r.Provider, date, r.owner, started, r.Lease, audit)
	if err != nil {
		return claimed{}, err
	}
	return claimed{run: run, attempt: attempt, day: day, started: started}, nil
}

// finish runs a claimed attempt to its end and returns the run as it
// ended.
func (r *Reconciliations) finish(ctx context.Context, c claimed) (model.ReconRun, error) {
	run, attempt, date, started := c.run, c.attempt, c.run.BillDate, c.started
	res := r.attempt(ctx, run, attempt, c.day)
	if res.State == model.ReconFailed {
		r.log.Error("reconciliation failed", "bill_date", date, "attempt", attempt, "reason", res.Error)
	}
	if err := ctx.Err(); err != nil {
		// Stopped (SIGTERM): nothing more is waited for. The run stays
		// RUNNING until its lease ends; the next round takes it again.
		return model.ReconRun{}, err
	}
	if err := r.store.FinishRun(ctx, run.ID, r.owner, attempt, res, r.now()); err != nil {
		return model.ReconRun{}, err
	}
	out, err := r.store.ReconRun(ctx, r.Provider, date)
	if err != nil {
		return model.ReconRun{}, err
	}
	if r.OnFinished != nil {
		r.OnFinished(out, r.now().Sub(started))
	}
	if out.State == model.ReconDone && out.Unresolved > 0 {
		r.log.Warn("reconciliation found differences", "bill_date", date, "unresolved", out.Unresolved, "counts", out.Counts)
	} else if out.State == model.ReconDone {
		r.log.Info("reconciliation clean", "bill_date", date, "bill_payments", out.Bill.Payments, "ledger_payments", out.Ledger.Payments)
	}
	return out, nil
}

func (r *Reconciliations) today() time.Time {
	n := r.now().In(model.Beijing)
	return time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, model.Beijing)
}

// attempt does one attempt's work: fetch, match and repair, look for what
// the bill lacks, total up. Any error makes it FAILED with the reason.
func (r *Reconciliations) attempt(ctx context.Context, run model.ReconRun, attempt int, day time.Time) dao.RunResult {
	m := &matcher{r: r, run: run, attempt: attempt, date: run.BillDate}
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
		totals = bill.BillTotals()
		if err := m.matchAll(ctx, bill); err != nil {
			return fail(err)
		}
	}
	from, to := day.Add(-r.Grace), day.AddDate(0, 0, 1).Add(-r.Grace)
	if err := m.missing(ctx, from, to); err != nil {
		return fail(err)
	}
	ledger, err := r.store.LedgerTotals(ctx, r.Provider, day, day.AddDate(0, 0, 1))
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

// matcher matches one attempt's bill lines to the ledger, a batch at a
// time, Workers batches at once.
type matcher struct {
	r       *Reconciliations
	run     model.ReconRun
	attempt int
	date    string

	mu        sync.Mutex
	held      []model.BillEntry // refunds of payments not in the ledger yet
	items     int
	repaired  int
	renewedAt time.Time
}

// matchAll streams the bill's lines in batches to Workers goroutines. The
// database, not the CPU, is what a batch waits on (a commit's flush to
// disk, mostly), so batches overlap.
func (m *matcher) matchAll(ctx context.Context, bill model.Bill) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(m.r.Workers, 1))
	batch := make([]model.BillEntry, 0, m.r.Batch)
	send := func() {
		b := batch
		batch = make([]model.BillEntry, 0, m.r.Batch)
		g.Go(func() error { return m.flush(gctx, b) })
	}
	err := bill.Entries(func(e model.BillEntry) error {
		if err := gctx.Err(); err != nil {
			return err
		}
		batch = append(batch, e)
		if len(batch) == m.r.Batch {
			send()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		send()
	}
	if gerr := g.Wait(); gerr != nil {
		return gerr
	}
	if err != nil {
		return err
	}
	return m.unknownRefundsLater(ctx)
}

// renew extends the run's lease once a quarter of it has passed.
func (m *matcher) renew(ctx context.Context) error {
	r := m.r
	now := r.now()
	m.mu.Lock()
	due := now.Sub(m.renewedAt) >= r.Lease/4 || m.renewedAt.IsZero()
	if due {
		m.renewedAt = now
	}
	m.mu.Unlock()
	if !due {
		return nil
	}
	return r.store.RenewRun(ctx, m.run.ID, r.owner, now.Add(r.Lease))
}

// flush matches a batch: two reads (payments by trade_no, refunds by
// out_request_no), a repair per payment the ledger lacks, one write of
// the matched lines (booking their fees once) and one of the items.
func (m *matcher) flush(ctx context.Context, batch []model.BillEntry) error {
	r := m.r
	if err := m.renew(ctx); err != nil {
		return err
	}
	var tradeNos, requestNos []string
	for _, e := range batch {
		tradeNos = append(tradeNos, e.TradeNo)
		if e.Kind == model.BillRefund {
			requestNos = append(requestNos, e.OutRequestNo)
		}
	}
	pays, err := r.store.PaymentsByTradeNo(ctx, r.Provider, tradeNos)
	if err != nil {
		return err
	}
	refunds, err := r.store.RefundsByRequestNo(ctx, requestNos)
	if err != nil {
		return err
	}
	var items []model.ReconItem
	var seen []model.SeenLine
	// Payments first: a refund in the same batch may refund a payment
	// repaired here.
	for _, e := range batch {
		if e.Kind != model.BillPayment {
			continue
		}
		p, ok := pays[e.TradeNo]
		if !ok {
			it, p, err := m.repair(ctx, e)
			if err != nil {
				return err
			}
			items = append(items, it)
			if p == nil {
				continue // not recorded: not matched either, so never missing
			}
			pays[e.TradeNo] = *p
		} else {
			items = append(items, m.comparePayment(e, p)...)
		}
		seen = append(seen, model.SeenLine{Kind: model.BillPayment, Ref: e.TradeNo, TradeNo: e.TradeNo, Amount: e.Amount, Fee: e.Fee})
	}
	for _, e := range batch {
		if e.Kind != model.BillRefund {
			continue
		}
		amount := e.Amount.Neg()
		f, ok := refunds[e.OutRequestNo]
		if _, paid := pays[e.TradeNo]; !ok && !paid && m.later(e) {
			// Its payment may be a bill line another batch is repairing:
			// recorded once every batch is done (matchAll).
		} else if !ok {
			it, err := m.unknownRefund(ctx, e, pays)
			if err != nil {
				return err
			}
			items = append(items, it)
		} else if f.State == model.RefundFailed {
			it, err := m.settleFailed(ctx, e, f)
			if err != nil {
				return err
			}
			items = append(items, it)
		} else {
			items = append(items, m.compareRefund(e, f)...)
		}
		seen = append(seen, model.SeenLine{Kind: model.BillRefund, Ref: e.OutRequestNo, TradeNo: e.TradeNo, Amount: amount, Fee: e.Fee})
	}
	if _, err := r.store.RecordSeen(ctx, r.Provider, m.date, seen, m.feeEvent); err != nil {
		return err
	}
	return m.save(ctx, items)
}

// feeEvent is the event that books the fees of newly matched lines.
func (m *matcher) feeEvent(fresh []model.SeenLine) (*model.Event, error) {
	sum := decimal.Zero
	for _, l := range fresh {
		sum = sum.Add(l.Fee)
	}
	if sum.IsZero() {
		return nil, nil
	}
	ev, err := newEvent(model.EventFeesBooked, m.run.ID, model.FeeEventData{
		Provider: string(m.r.Provider), BillDate: m.date, Lines: len(fresh), Amount: sum.Neg().StringFixed(2),
	}, m.r.now())
	return &ev, err
}

func (m *matcher) save(ctx context.Context, items []model.ReconItem) error {
	for i := range items {
		items[i].RunID, items[i].AttemptNo = m.run.ID, m.attempt
		if m.r.OnItem != nil {
			m.r.OnItem(items[i].Outcome)
		}
	}
	if err := m.r.store.SaveItems(ctx, items); err != nil {
		return err
	}
	m.mu.Lock()
	m.items += len(items)
	m.mu.Unlock()
	return m.r.store.CountAttempt(ctx, m.run.ID, m.attempt, len(items), 0)
}

func amountPtr(d decimal.Decimal) *decimal.Decimal { return &d }

// repair records a bill payment the ledger lacks, through the
// notification path. The item says what became of it; the payment is nil
// when nothing could be recorded.
func (m *matcher) repair(ctx context.Context, e model.BillEntry) (model.ReconItem, *model.Payment, error) {
	at := e.FinishedAt
	n := model.Observation{Provider: m.r.Provider, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo, Amount: e.Amount,
		PaidAt: &at, Ref: model.BillRef(m.date)}
	it := model.ReconItem{Ref: e.TradeNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo, BillAmount: amountPtr(e.Amount)}
	pay, outcome, err := m.r.payments.Observe(ctx, n)
	switch {
	case errors.Is(err, model.ErrTradeConflict):
		it.Outcome, it.Detail = model.ReconRepairFailed, err.Error()
		m.r.log.Error("reconciliation cannot record a bill payment", "trade_no", e.TradeNo, "err", err)
		return it, nil, nil
	case err != nil:
		return it, nil, fmt.Errorf("repair %s: %w", e.TradeNo, err)
	}
	it.LedgerAmount = amountPtr(pay.Amount)
	switch outcome {
	case model.OutcomeUnmatched:
		it.Outcome, it.Detail = model.ReconUnmatched, "no order has out_trade_no "+e.OutTradeNo+": recorded UNMATCHED"
		m.r.log.Warn("reconciliation found a payment for no order: recorded UNMATCHED, refund it", "trade_no", e.TradeNo,
			"out_trade_no", e.OutTradeNo, "amount", e.Amount.StringFixed(2))
	case model.OutcomeDuplicate:
		// Recorded by a notification since our read: nothing to repair.
		return m.comparePaymentItem(e, pay), &pay, nil
	default:
		m.mu.Lock()
		m.repaired++
		m.mu.Unlock()
		// Counted as it committed (a stop asked for now does not skip
		// it): an attempt that never finishes still says what it did.
		if err := m.r.store.CountAttempt(context.WithoutCancel(ctx), m.run.ID, m.attempt, 0, 1); err != nil {
			return it, &pay, err
		}
		now := m.r.now().UTC()
		it.Outcome, it.Detail = model.ReconRepaired, "recorded from the bill as "+string(pay.State)
		it.ResolvedAt, it.ResolvedBy, it.Note = &now, "reconciliation", "repaired through the notification path"
		m.r.log.Warn("reconciliation repaired a payment the ledger lacked", "trade_no", e.TradeNo, "state", pay.State)
	}
	return it, &pay, nil
}

// comparePaymentItem is comparePayment's single item, or a REPAIRED-less
// placeholder: used when a repair found the payment recorded meanwhile.
func (m *matcher) comparePaymentItem(e model.BillEntry, p model.Payment) model.ReconItem {
	if its := m.comparePayment(e, p); len(its) > 0 {
		return its[0]
	}
	now := m.r.now().UTC()
	return model.ReconItem{Outcome: model.ReconRepaired, Ref: e.TradeNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		BillAmount: amountPtr(e.Amount), LedgerAmount: amountPtr(p.Amount), Detail: "recorded by a notification meanwhile",
		ResolvedAt: &now, ResolvedBy: "reconciliation"}
}

// comparePayment checks a bill payment against its ledger row.
func (m *matcher) comparePayment(e model.BillEntry, p model.Payment) []model.ReconItem {
	it := model.ReconItem{Ref: e.TradeNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		BillAmount: amountPtr(e.Amount), LedgerAmount: amountPtr(p.Amount)}
	var out []model.ReconItem
	if !p.Amount.Equal(e.Amount) {
		it.Outcome, it.Detail = model.ReconAmountDiffers, "the bill and the ledger disagree on the amount"
		m.r.log.Warn("reconciliation: amount differs", "trade_no", e.TradeNo, "bill", e.Amount, "ledger", p.Amount)
		out = append(out, it)
	}
	if p.State == model.PaymentUnmatched {
		it.Outcome, it.Detail = model.ReconUnmatched, "the payment is UNMATCHED: no order has out_trade_no "+p.OutTradeNo
		out = append(out, it)
	}
	return out
}

// compareRefund checks a bill refund against our refund.
func (m *matcher) compareRefund(e model.BillEntry, f model.Refund) []model.ReconItem {
	amount := e.Amount.Neg()
	it := model.ReconItem{Ref: e.OutRequestNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo, OutRequestNo: e.OutRequestNo,
		BillAmount: amountPtr(amount), LedgerAmount: amountPtr(f.Amount)}
	switch {
	case f.Kind == model.RefundConsole:
		it.Outcome, it.Detail = model.ReconUnknownRefund, "a refund we never asked for (merchant console); recorded against its payment"
		return []model.ReconItem{it}
	case settledFromBill(f):
		// A refund we held as FAILED, settled by settleFailed when a run
		// first saw it: still a difference until an operator resolves it.
		it.Outcome, it.Detail = model.ReconUnknownRefund, settledDetail
		return []model.ReconItem{it}
	case !f.Amount.Equal(amount):
		it.Outcome, it.Detail = model.ReconAmountDiffers, "the bill and our refund disagree on the amount"
		m.r.log.Warn("reconciliation: refund amount differs", "out_request_no", e.OutRequestNo, "bill", amount, "ledger", f.Amount)
		return []model.ReconItem{it}
	}
	return nil
}

// unknownRefund records a bill refund we never made against its payment,
// so later refunds never exceed what is left of it.
func (m *matcher) unknownRefund(ctx context.Context, e model.BillEntry, pays map[string]model.Payment) (model.ReconItem, error) {
	amount := e.Amount.Neg()
	it := model.ReconItem{Outcome: model.ReconUnknownRefund, Ref: e.OutRequestNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		OutRequestNo: e.OutRequestNo, BillAmount: amountPtr(amount)}
	m.r.log.Warn("reconciliation found a refund we never made", "trade_no", e.TradeNo, "out_request_no", e.OutRequestNo, "amount", amount)
	p, ok := pays[e.TradeNo]
	if !ok {
		it.Detail = "a refund we never asked for, of a payment neither in our ledger nor in this bill: reconcile the payment's day, then this one again"
		return it, nil
	}
	f := model.Refund{
		OutRequestNo: e.OutRequestNo, Kind: model.RefundConsole, Provider: p.Provider, TradeNo: p.TradeNo,
		OutTradeNo: p.OutTradeNo, OrderID: p.OrderID, Amount: amount, Reason: "found in " + m.r.Provider.Name() + "'s bill of " + m.date,
		State: model.RefundRefunded,
	}
	// Money left Alipay: the journal books it as a refund (payment.refunded,
	// kind CONSOLE) — once, with the refund's row.
	ev, err := newEvent(model.EventRefunded, p.OrderID, model.RefundEventData{
		OrderID: p.OrderID, Provider: string(p.Provider), TradeNo: p.TradeNo, OutTradeNo: p.OutTradeNo,
		OutRequestNo: e.OutRequestNo, Kind: string(model.RefundConsole), Amount: amount.StringFixed(2), Reason: f.Reason,
	}, m.r.now())
	if err != nil {
		return it, err
	}
	if err := m.r.store.RecordConsoleRefund(ctx, f, ev); err != nil {
		return it, fmt.Errorf("record console refund %s: %w", e.OutRequestNo, err)
	}
	it.LedgerAmount = amountPtr(amount)
	it.Detail = "a refund we never asked for (merchant console); recorded against its payment"
	return it, nil
}

// missing records the ledger's payments and refunds of [from, to) that no
// bill line matched — all of them, a page at a time. It changes nothing
// else: the money may never have moved, and only an operator can tell.
// The first maxMissingLogs of each side are logged one by one, the rest
// in one line.
func (m *matcher) missing(ctx context.Context, from, to time.Time) error {
	r := m.r
	page := max(r.Batch, 1)
	n := 0
	for after := ""; ; {
		pays, err := r.store.UnseenPayments(ctx, r.Provider, from, to, after, page)
		if err != nil {
			return err
		}
		items := make([]model.ReconItem, 0, len(pays))
		for _, p := range pays {
			if n++; n <= maxMissingLogs {
				r.log.Warn("payment in our ledger is missing from its provider's bill", "provider", r.Provider, "trade_no", p.TradeNo, "state", p.State, "amount", p.Amount)
			}
			items = append(items, model.ReconItem{Outcome: model.ReconMissingAtProvider, Ref: p.TradeNo, TradeNo: p.TradeNo,
				OutTradeNo: p.OutTradeNo, LedgerAmount: amountPtr(p.Amount),
				Detail: "our ledger has this payment as " + string(p.State) + "; " + r.Provider.Name() + "'s bill does not"})
		}
		if err := m.save(ctx, items); err != nil {
			return err
		}
		if len(pays) < page {
			break
		}
		after = pays[len(pays)-1].TradeNo
	}
	if n > maxMissingLogs {
		r.log.Warn("payments in our ledger missing from their provider's bill, in all", "provider", r.Provider, "bill_date", m.date, "count", n)
	}
	n = 0
	for after := ""; ; {
		refunds, err := r.store.UnseenRefunds(ctx, r.Provider, from, to, after, page)
		if err != nil {
			return err
		}
		items := make([]model.ReconItem, 0, len(refunds))
		for _, f := range refunds {
			if n++; n <= maxMissingLogs {
				r.log.Warn("refund we hold as REFUNDED is missing from its provider's bill", "provider", r.Provider, "out_request_no", f.OutRequestNo, "amount", f.Amount)
			}
			items = append(items, model.ReconItem{Outcome: model.ReconRefundMissingAtProvider, Ref: f.OutRequestNo, TradeNo: f.TradeNo,
				OutTradeNo: f.OutTradeNo, OutRequestNo: f.OutRequestNo, LedgerAmount: amountPtr(f.Amount),
				Detail: "we hold this refund as REFUNDED; Alipay's bill has no such refund"})
		}
		if err := m.save(ctx, items); err != nil {
			return err
		}
		if len(refunds) < page {
			break
		}
		after = refunds[len(refunds)-1].OutRequestNo
	}
	if n > maxMissingLogs {
		r.log.Warn("refunds we hold as REFUNDED missing from their provider's bill, in all", "provider", r.Provider, "bill_date", m.date, "count", n)
	}
	return nil
}

// maxMissingLogs is how many missing payments (and refunds) a run logs
// one by one; every one of them is an item all the same.
const maxMissingLogs = 100

// Runs lists the latest runs, newest date first.
func (r *Reconciliations) Runs(ctx context.Context, limit int) ([]model.ReconRun, error) {
	if limit <= 0 || limit > 366 {
		limit = 60
	}
	return r.store.ReconRuns(ctx, r.Provider, limit)
}

// RunDetail is a run with its attempts and its items.
type RunDetail struct {
	model.ReconRun
	History []model.ReconAttempt `json:"attempts_history"`
	Items   []model.ReconItem    `json:"items"`
}

// Detail reads the run of date with its attempts and up to limit items,
// of one outcome if outcome is not empty.
func (r *Reconciliations) Detail(ctx context.Context, date string, outcome model.ReconOutcome, limit int) (RunDetail, error) {
	if _, err := ParseBillDate(date); err != nil {
		return RunDetail{}, err
	}
	if outcome != "" && !outcome.Valid() {
		return RunDetail{}, fmt.Errorf("%w: outcome %q", model.ErrInvalidRequest, outcome)
	}
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	run, err := r.store.ReconRun(ctx, r.Provider, date)
	if err != nil {
		return RunDetail{}, err
	}
	d := RunDetail{ReconRun: run}
	if d.History, err = r.store.ReconAttempts(ctx, run.ID); err != nil {
		return RunDetail{}, err
	}
	d.Items, err = r.store.ReconItems(ctx, run.ID, outcome, limit)
	return d, err
}

// ResolveItem records that operator looked at item id of date's run and
// why it needs nothing more (note). The first resolution stands. It is
// the admin API's: the resolution is written to admin_audit in the
// item's transaction as model.OperatorAdminAPI's (operator is who the
// caller says it is, kept as the item's resolved_by).
func (r *Reconciliations) ResolveItem(ctx context.Context, date string, id int64, operator, note string) (model.ReconItem, error) {
	if _, err := ParseBillDate(date); err != nil {
		return model.ReconItem{}, err
	}
	if note == "" || len(note) > 1000 {
		return model.ReconItem{}, fmt.Errorf("%w: note must be 1 to 1000 bytes", model.ErrInvalidRequest)
	}
	if operator == "" || len(operator) > 64 {
		return model.ReconItem{}, fmt.Errorf("%w: operator must be 1 to 64 bytes", model.ErrInvalidRequest)
	}
	run, err := r.store.ReconRun(ctx, r.Provider, date)
	if err != nil {
		return model.ReconItem{}, err
	}
	row, err := r.store.ReconItem(ctx, id)
	if err == nil && row.RunID != run.ID {
		err = fmt.Errorf("%w: %d in %s", model.ErrItemNotFound, id, date)
	}
	if err != nil {
		return model.ReconItem{}, err
	}
	act := model.Act{Operator: model.OperatorAdminAPI, Key: apiKey(model.AuditReconResolve, strconv.FormatInt(id, 10)), Note: note}
	return r.resolveItem(ctx, row, act, operator, "resolved by "+operator, true)
}

// Payments is the payment use case repairs go through.
func (r *Reconciliations) Payments() *Payments { return r.payments }
