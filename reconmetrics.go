package main

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
	"paynotify/service"
)

// countUnmatched registers paynotify_payments_unmatched_total and returns
// what counts into it and logs, for service.Payments.OnUnmatched: money we
// hold with no order is an operator's to refund.
func countUnmatched(reg prometheus.Registerer, log *slog.Logger) func(model.Payment) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_payments_unmatched_total",
		Help: "Verified payments whose out_trade_no names no order, recorded UNMATCHED, by provider: refund them (POST /admin/payments/{provider}/{trade_no}/refund).",
	}, []string{"provider"})
	reg.MustRegister(c)
	return func(p model.Payment) {
		c.WithLabelValues(string(p.Provider)).Inc()
		log.Warn("payment for no order recorded UNMATCHED: refund it", "provider", p.Provider, "trade_no", p.TradeNo, "out_trade_no", p.OutTradeNo,
			"amount", p.Amount.StringFixed(2))
	}
}

// countReconciliations registers reconciliation's metrics, by provider,
// and hooks them to each of recons: items by outcome, runs by state and
// their duration (the last bill date reconciled is read from the runs:
// stateGauges).
func countReconciliations(reg prometheus.Registerer, recons ...*service.Reconciliations) {
	items := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_items_total",
		Help: "Differences reconciliation recorded, by provider and outcome (MISSING_AT_PROVIDER, AMOUNT_DIFFERS, UNKNOWN_REFUND, ...).",
	}, []string{"provider", "outcome"})
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_runs_total",
		Help: "Reconciliation attempts, by provider and how they ended: done (clean), differences, failed.",
	}, []string{"provider", "result"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paynotify_reconciliation_duration_seconds",
		Help:    "How long a reconciliation attempt took, by provider.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600},
	}, []string{"provider"})
	reg.MustRegister(items, runs, duration)
	for _, recon := range recons {
		p := string(recon.Provider)
		for _, o := range model.ReconOutcomes {
			items.WithLabelValues(p, string(o))
		}
		for _, r := range []string{"done", "differences", "failed"} {
			runs.WithLabelValues(p, r)
		}
		took := duration.WithLabelValues(p)
		recon.OnItem = func(o model.ReconOutcome) { items.WithLabelValues(p, string(o)).Inc() }
		recon.OnFinished = func(run model.ReconRun, d time.Duration) {
			took.Observe(d.Seconds())
			switch {
			case run.State == model.ReconFailed:
				runs.WithLabelValues(p, "failed").Inc()
			case run.Unresolved > 0:
				runs.WithLabelValues(p, "differences").Inc()
			default:
				runs.WithLabelValues(p, "done").Inc()
			}
		}
	}
}
