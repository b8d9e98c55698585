package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
	"paynotify/service"
)

// countUnmatched registers paynotify_payments_unmatched_total and returns
// what counts into it and logs, for service.Payments.OnUnmatched: money we
// hold with no order is an operator's to refund.
func countUnmatched(reg prometheus.Registerer, log *slog.Logger) func(model.Payment) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paynotify_payments_unmatched_total",
		Help: "Verified payments whose out_trade_no names no order, recorded UNMATCHED: refund them (POST /admin/payments/{trade_no}/refund).",
	})
	reg.MustRegister(c)
	return func(p model.Payment) {
		c.Inc()
		log.Warn("payment for no order recorded UNMATCHED: refund it", "trade_no", p.TradeNo, "out_trade_no", p.OutTradeNo,
			"amount", p.Amount.StringFixed(2))
	}
}

// countBillReconciler registers reconciliation's metrics and hooks them
// to recon: items by outcome, runs by state and their duration, and the
// last bill date reconciled successfully.
func countBillReconciler(reg prometheus.Registerer, recon *service.BillReconciler) {
	items := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_items_total",
		Help: "Differences reconciliation recorded, by outcome (MISSING_AT_ALIPAY, AMOUNT_DIFFERS, UNKNOWN_REFUND, ...).",
	}, []string{"outcome"})
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_reconciliation_runs_total",
		Help: "Reconciliation attempts, by how they ended: done (clean), differences, failed.",
	}, []string{"result"})
	duration := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paynotify_reconciliation_duration_seconds",
		Help:    "How long a reconciliation attempt took.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600},
	})
	last := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paynotify_reconciliation_last_success_date",
		Help: "The last bill date (Beijing midnight, as Unix time) reconciled without failing: alert when it is older than two days.",
	})
	reg.MustRegister(items, runs, duration, last)
	for _, o := range model.ReconOutcomes {
		items.WithLabelValues(string(o))
	}
	for _, r := range []string{"done", "differences", "failed"} {
		runs.WithLabelValues(r)
	}
	var mu sync.Mutex
	var lastDay int64
	recon.OnItem = func(o model.ReconOutcome) { items.WithLabelValues(string(o)).Inc() }
	recon.OnFinished = func(run model.ReconRun, took time.Duration) {
		duration.Observe(took.Seconds())
		switch {
		case run.State == model.ReconFailed:
			runs.WithLabelValues("failed").Inc()
			return
		case run.Unresolved > 0:
			runs.WithLabelValues("differences").Inc()
		default:
			runs.WithLabelValues("done").Inc()
		}
		if day, err := service.ParseBillDate(run.BillDate); err == nil {
			mu.Lock()
			if day.Unix() > lastDay {
				lastDay = day.Unix()
				last.Set(float64(lastDay))
			}
			mu.Unlock()
		}
	}
}
