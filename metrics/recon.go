package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
)

func (m *Metrics) newRecon() {
	m.reconItems = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_items_total",
		Help: "Differences reconciliation recorded, by provider, account and outcome (MISSING_AT_PROVIDER, AMOUNT_DIFFERS, UNKNOWN_REFUND, ...).",
	}, []string{"provider", "account", "outcome"})
	m.reconRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_runs_total",
		Help: "Reconciliation attempts, by provider, account and how they ended: done (clean), differences, failed.",
	}, []string{"provider", "account", "result"})
	m.reconDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paynotify_reconciliation_duration_seconds",
		Help:    "How long a reconciliation attempt took, by provider and account.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600},
	}, []string{"provider", "account"})
	m.reg.MustRegister(m.reconItems, m.reconRuns, m.reconDuration)
}

// Recon is what counts one provider account's reconciliation, for
// service.BillReconciler.OnItem and OnFinished: items by outcome, attempts
// by how they ended and how long they took (the last bill date reconciled
// is read from the runs: WatchState). Every series of the account is
// there from the start.
func (m *Metrics) Recon(provider model.Provider, account string) (onItem func(model.ReconOutcome), onFinished func(model.ReconRun, time.Duration)) {
	p := string(provider)
	for _, o := range model.ReconOutcomes {
		m.reconItems.WithLabelValues(p, account, string(o))
	}
	for _, r := range []string{"done", "differences", "failed"} {
		m.reconRuns.WithLabelValues(p, account, r)
	}
	took := m.reconDuration.WithLabelValues(p, account)
	onItem = func(o model.ReconOutcome) { m.reconItems.WithLabelValues(p, account, string(o)).Inc() }
	onFinished = func(run model.ReconRun, d time.Duration) {
		took.Observe(d.Seconds())
		switch {
		case run.State == model.ReconFailed:
			m.reconRuns.WithLabelValues(p, account, "failed").Inc()
		case run.Unresolved > 0:
			m.reconRuns.WithLabelValues(p, account, "differences").Inc()
		default:
			m.reconRuns.WithLabelValues(p, account, "done").Inc()
		}
	}
	return onItem, onFinished
}
