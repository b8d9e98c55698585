package metrics

import (
	"context"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
	"paynotify/service"
)

// StateReader reads what the state gauges report (dao.Store does).
type StateReader interface {
	OldestPaymentIn(ctx context.Context, state model.PaymentState) (time.Time, bool, error)
	OldestUnsent(ctx context.Context) (time.Time, bool, error)
	ReconQueueOf(ctx context.Context, a model.BillAccount) (int64, error)
	LastReconciled(ctx context.Context, a model.BillAccount) (string, bool, error)
	FirstPaidAt(ctx context.Context, a model.BillAccount) (time.Time, bool, error)
}

// WatchState registers the gauges operators are alerted on that are read
// from the database at each scrape (deploy/prometheus/alerts.yml): every
// instance reports the same, and a restart forgets nothing. A gauge whose
// read fails reports NaN (unknown), which no alert's comparison matches:
// the instance's readiness alert speaks for it.
func (m *Metrics) WatchState(store StateReader) {
	read := func(f func(ctx context.Context) (float64, error)) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			v, err := f(ctx)
			if err != nil {
				return math.NaN()
			}
			return v
		}
	}
	age := func(t time.Time, ok bool, err error) (float64, error) {
		if err != nil || !ok {
			return 0, err
		}
		return max(time.Since(t).Seconds(), 0), nil
	}
	for _, state := range []model.PaymentState{model.PaymentRefundPending, model.PaymentRefunding} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "paynotify_payment_oldest_seconds",
			Help:        "How long the payment longest in a state (REFUND_PENDING, REFUNDING) has been in it; 0 if none is.",
			ConstLabels: prometheus.Labels{"state": string(state)},
		}, read(func(ctx context.Context) (float64, error) { return age(store.OldestPaymentIn(ctx, state)) })))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "paynotify_outbox_oldest_unsent_seconds",
		Help: "Age of the oldest outbox row not yet published (PENDING or FAILED); 0 if every row is sent.",
	}, read(func(ctx context.Context) (float64, error) { return age(store.OldestUnsent(ctx)) })))
	// One series per configured provider account, read as the gauges
	// above.
	perAccount := func(name, help string, f func(ctx context.Context, a model.BillAccount) (float64, error)) {
		m.reg.MustRegister(accountGauge{
			desc:     prometheus.NewDesc(name, help, []string{"provider", "account"}, nil),
			accounts: m.billAccounts,
			read: func(a model.BillAccount) float64 {
				return read(func(ctx context.Context) (float64, error) { return f(ctx, a) })()
			},
		})
	}
	perAccount("paynotify_reconciliation_unresolved_items",
		"Reconciliation items an operator has to look at: unresolved, and not repaired, by configured provider and account.",
		func(ctx context.Context, a model.BillAccount) (float64, error) {
			n, err := store.ReconQueueOf(ctx, a)
			return float64(n), err
		})
	perAccount("paynotify_reconciliation_last_success_date",
		"The last bill date (Beijing midnight, as Unix time) reconciled without failing, by configured provider and account, from the runs; before the first, the day before the account's first payment (yesterday with none): alert when it is older than two days.",
		func(ctx context.Context, a model.BillAccount) (float64, error) {
			date, ok, err := store.LastReconciled(ctx, a)
			if err != nil {
				return 0, err
			}
			if ok {
				day, err := service.ParseBillDate(date)
				return float64(day.Unix()), err
			}
			// No run has succeeded yet: every day before the first
			// payment's is as good as reconciled (nothing of ours to
			// check), so a fresh install is not a missed run, and a
			// ledger whose payments never got reconciled is.
			first, ok, err := store.FirstPaidAt(ctx, a)
			if err != nil {
				return 0, err
			}
			if !ok {
				first = time.Now()
			}
			day, err := service.ParseBillDate(service.Yesterday(first))
			return float64(day.Unix()), err
		})
}

// accountGauge is a gauge read from the database for each configured
// provider account: one series per account Metrics.BillAccounts names,
// read at each scrape (the accounts are known only once the services are
// wired).
type accountGauge struct {
	desc     *prometheus.Desc
	accounts func() []model.BillAccount
	read     func(model.BillAccount) float64
}

// Describe implements prometheus.Collector.
func (c accountGauge) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c accountGauge) Collect(ch chan<- prometheus.Metric) {
	for _, a := range c.accounts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.read(a), string(a.Provider), a.Account)
	}
}
