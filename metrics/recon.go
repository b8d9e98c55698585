package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
)

func (m *Metrics) newRecon() {
	m.reconItems = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_items_total",
		Help: "Differences reconciliation recorded, by provider and outcome (MISSING_AT_PROVIDER, AMOUNT_DIFFERS, UNKNOWN_REFUND, ...).",
	}, []string{"provider", "outcome"})
	m.reconRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_runs_total",
		Help: "Reconciliation attempts, by provider and how they ended: done (clean), differences, failed.",
	}, []string{"provider", "result"})
	m.reconDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paynotify_reconciliation_duration_seconds",
		Help:    "How long a reconciliation attempt took, by provider.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600},
	}, []string{"provider"})
	m.reg.MustRegister(m.reconItems, m.reconRuns, m.reconDuration)
}

// Recon is what counts one provider's reconciliation, for
// service.BillReconciler.OnItem and OnFinished: items by outcome, attempts
// by how they ended and how long they took (the last bill date reconciled
// is read from the runs: WatchState). Every series of the provider is
// there from the start.
func (m *Metrics) Recon(provider model.Provider) (onItem func(model.ReconOutcome), onFinished func(model.ReconRun, time.Duration)) {
	p := string(provider)
	for _, o := range model.ReconOutcomes {
		m.reconItems.WithLabelValues(p, string(o))
	}
	for _, r := range []string{"done", "differences", "failed"} {
		m.reconRuns.WithLabelValues(p, r)
	}
	took := m.reconDuration.WithLabelValues(p)
	onItem = func(o model.ReconOutcome) { m.reconItems.WithLabelValues(p, string(o)).Inc() }
	onFinished = func(run model.ReconRun, d time.Duration) {
		took.Observe(d.Seconds())
		switch {
		case run.State == model.ReconFailed:
			m.reconRuns.WithLabelValues(p, "failed").Inc()
		case run.Unresolved > 0:
			m.reconRuns.WithLabelValues(p, "differences").Inc()
		default:
			m.reconRuns.WithLabelValues(p, "done").Inc()
		}
	}
	return onItem, onFinished
}
