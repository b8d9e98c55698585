package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
)

func (m *Metrics) newRecon() {
	m.reconItems = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_items_total",
		Help: "Differences reconciliation recorded, by outcome (MISSING_AT_PROVIDER, AMOUNT_DIFFERS, UNKNOWN_REFUND, ...).",
	}, []string{"outcome"})
	m.reconRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_runs_total",
		Help: "Reconciliation attempts, by how they ended: done (clean), differences, failed.",
	}, []string{"result"})
	m.reconDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paynotify_reconciliation_duration_seconds",
		Help:    "How long a reconciliation attempt took.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600},
	})
	m.reg.MustRegister(m.reconItems, m.reconRuns, m.reconDuration)
	for _, o := range model.ReconOutcomes {
		m.reconItems.WithLabelValues(string(o))
	}
	for _, r := range []string{"done", "differences", "failed"} {
		m.reconRuns.WithLabelValues(r)
	}
}

// ReconItem counts an item an attempt recorded (for
// service.BillReconciler.OnItem).
func (m *Metrics) ReconItem(o model.ReconOutcome) {
	if m != nil {
		m.reconItems.WithLabelValues(string(o)).Inc()
	}
}

// ReconFinished counts a finished attempt by how it ended and observes how
// long it took (for service.BillReconciler.OnFinished); the last bill
// date reconciled is read from the runs (WatchState).
func (m *Metrics) ReconFinished(run model.ReconRun, took time.Duration) {
	if m == nil {
		return
	}
	m.reconDuration.Observe(took.Seconds())
	switch {
	case run.State == model.ReconFailed:
		m.reconRuns.WithLabelValues("failed").Inc()
	case run.Unresolved > 0:
		m.reconRuns.WithLabelValues("differences").Inc()
	default:
		m.reconRuns.WithLabelValues("done").Inc()
	}
}
