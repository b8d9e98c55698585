package service

import (
	"context"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/sync/errgroup"

	"paynotify/dao"
	"paynotify/model"
)

// Dashboard is the console's overview and the admin API's journal totals:
// what came in and went out, and what waits, in counts.
type Dashboard struct {
	store *dao.Store
	now   func() time.Time
	// Accounts are those whose latest reconciliation the overview shows,
	// in this order: the configured ones (NewDashboard: every provider,
	// as one account with no id).
	Accounts []model.BillAccount
}

// NewDashboard returns the overview over store.
func NewDashboard(store *dao.Store) *Dashboard {
	d := &Dashboard{store: store, now: time.Now}
	for _, p := range model.Providers() {
		d.Accounts = append(d.Accounts, model.BillAccount{Provider: p})
	}
	return d
}

// ChartMinutes is how many minutes the overview's chart covers.
const ChartMinutes = 120

// Overview is the console's first page: what came in and went out in a
// window, what waits in each queue, and notifications per minute.
type Overview struct {
	Today   Window
	Last24h Window
	Queues  QueueCounts
	// Chart has one bar per minute, oldest first, ending at the current
	// minute.
	Chart []ChartBar
}

// Window is what the ledger recorded since a time.
type Window struct {
	Since time.Time
	// By outcome when each payment arrived (model.OutcomeOf).
	Applied       model.Tally
	RefundPending model.Tally
	Unmatched     model.Tally
	// MoneyIn is every payment received, applied or not.
	MoneyIn  model.Tally
	Refunded model.Tally
}

// QueueCounts is what waits for the workers or for an operator.
type QueueCounts struct {
	PaymentsRefundPending model.QueueCount
	RefundsRefunding      model.QueueCount
	RefundsFailed         model.QueueCount
	OutboxPending         model.QueueCount
	OutboxFailed          model.QueueCount
	PaymentsUnmatched     model.QueueCount
	// ReconOpen counts reconciliation items an operator has to look at
	// (every provider's); LastRuns has each of Dashboard.Accounts' newest
	// run.
	ReconOpen model.QueueCount
	LastRuns  []ProviderRun
}

// ProviderRun is one provider account's newest reconciliation run: Run
// is nil before its first.
type ProviderRun struct {
	Provider model.Provider
	Account  string
	Run      *model.ReconRun
}

// ChartBar is one minute of payments recorded, by outcome.
type ChartBar struct {
	Minute        time.Time
	Applied       int
	RefundPending int
	Unmatched     int
}

// Total is every payment in the minute.
func (b ChartBar) Total() int { return b.Applied + b.RefundPending + b.Unmatched }

// Overview reads the overview: "today" starts at midnight in zone.
func (d *Dashboard) Overview(ctx context.Context, now time.Time, zone *time.Location) (Overview, error) {
	var ov Overview
	local := now.In(zone)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, zone)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { ov.Today, err = d.window(ctx, midnight); return })
	g.Go(func() (err error) { ov.Last24h, err = d.window(ctx, now.Add(-24*time.Hour)); return })
	g.Go(func() (err error) { ov.Queues, err = d.queues(ctx); return })
	g.Go(func() (err error) { ov.Chart, err = d.chart(ctx, now); return })
	return ov, g.Wait()
}

func (d *Dashboard) window(ctx context.Context, since time.Time) (Window, error) {
	w := Window{Since: since.UTC(), MoneyIn: model.Tally{Amount: decimal.Zero}}
	tallies, err := d.store.PaymentTallies(ctx, since)
	if err != nil {
		return w, err
	}
	for _, t := range tallies {
		w.MoneyIn = w.MoneyIn.Add(t.Count, t.Amount)
		switch t.NotifyOutcome() {
		case model.OutcomeApplied:
			w.Applied = w.Applied.Add(t.Count, t.Amount)
		case model.OutcomeUnmatched:
			w.Unmatched = w.Unmatched.Add(t.Count, t.Amount)
		default:
			w.RefundPending = w.RefundPending.Add(t.Count, t.Amount)
		}
	}
	w.Refunded, err = d.store.RefundedSince(ctx, since)
	return w, err
}

func (d *Dashboard) queues(ctx context.Context) (QueueCounts, error) {
	var q QueueCounts
	var err error
	if q.PaymentsRefundPending, err = d.store.PaymentQueue(ctx, model.PaymentRefundPending); err != nil {
		return q, err
	}
	if q.RefundsRefunding, err = d.store.RefundQueue(ctx, model.RefundRefunding); err != nil {
		return q, err
	}
	if q.RefundsFailed, err = d.store.RefundQueue(ctx, model.RefundFailed); err != nil {
		return q, err
	}
	if q.OutboxPending, err = d.store.OutboxQueue(ctx, model.OutboxPending); err != nil {
		return q, err
	}
	if q.OutboxFailed, err = d.store.OutboxQueue(ctx, model.OutboxFailed); err != nil {
		return q, err
	}
	if q.PaymentsUnmatched, err = d.store.PaymentQueue(ctx, model.PaymentUnmatched); err != nil {
		return q, err
	}
	if q.ReconOpen, err = d.store.ReconQueue(ctx); err != nil {
		return q, err
	}
	for _, a := range d.Accounts {
		runs, err := d.store.ReconRuns(ctx, a, 1)
		if err != nil {
			return q, err
		}
		last := ProviderRun{Provider: a.Provider, Account: a.Account}
		if len(runs) > 0 {
			runs[0].Account = a.Account // a run from before accounts is the first's
			last.Run = &runs[0]
		}
		q.LastRuns = append(q.LastRuns, last)
	}
	return q, nil
}

func (d *Dashboard) chart(ctx context.Context, now time.Time) ([]ChartBar, error) {
	end := now.UTC().Truncate(time.Minute)
	start := end.Add(-(ChartMinutes - 1) * time.Minute)
	marks, err := d.store.PaymentMarks(ctx, start)
	if err != nil {
		return nil, err
	}
	bars := make([]ChartBar, ChartMinutes)
	for i := range bars {
		bars[i].Minute = start.Add(time.Duration(i) * time.Minute)
	}
	for _, m := range marks {
		i := int(m.At.UTC().Sub(start) / time.Minute)
		if i < 0 || i >= len(bars) {
			continue // recorded after now (clock skew between instances)
		}
		switch model.OutcomeOf(m.State, m.Reason) {
		case model.OutcomeApplied:
			bars[i].Applied++
		case model.OutcomeUnmatched:
			bars[i].Unmatched++
		default:
			bars[i].RefundPending++
		}
	}
	return bars, nil
}

// JournalTotals sums the journal per account.
func (d *Dashboard) JournalTotals(ctx context.Context) ([]model.AccountTotal, error) {
	return d.store.JournalTotals(ctx)
}
