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
	ReconQueueOf(ctx context.Context, provider model.Provider) (int64, error)
	LastReconciled(ctx context.Context, provider model.Provider) (string, bool, error)
	FirstPaidAt(ctx context.Context, provider model.Provider) (time.Time, bool, error)
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
	// One series per configured provider, read as the gauges above.
	perProvider := func(name, help string, f func(ctx context.Context, p model.Provider) (float64, error)) {
		m.reg.MustRegister(providerGauge{
			desc:      prometheus.NewDesc(name, help, []string{"provider"}, nil),
			providers: m.configured,
			read: func(p model.Provider) float64 {
				return read(func(ctx context.Context) (float64, error) { return f(ctx, p) })()
			},
		})
	}
	perProvider("paynotify_reconciliation_unresolved_items",
		"Reconciliation items an operator has to look at: unresolved, and not repaired, by configured provider.",
		func(ctx context.Context, p model.Provider) (float64, error) {
			n, err := store.ReconQueueOf(ctx, p)
			return float64(n), err
		})
	perProvider("paynotify_reconciliation_last_success_date",
		"The last bill date (Beijing midnight, as Unix time) reconciled without failing, by configured provider, from the runs; before the first, the day before the provider's first payment (yesterday with none): alert when it is older than two days.",
		func(ctx context.Context, p model.Provider) (float64, error) {
			date, ok, err := store.LastReconciled(ctx, p)
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
			first, ok, err := store.FirstPaidAt(ctx, p)
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

// providerGauge is a gauge read from the database for each configured
// provider: one series per provider Metrics.Providers names, read at each
// scrape (the providers are known only once the services are wired).
type providerGauge struct {
	desc      *prometheus.Desc
	providers func() []model.Provider
	read      func(model.Provider) float64
}

// Describe implements prometheus.Collector.
func (c providerGauge) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c providerGauge) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.providers() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.read(p), string(p))
	}
}
