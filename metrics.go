package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
	"paynotify/service"
)

// countRefunds registers paynotify_refunds_total{provider,result} and
// returns what counts into it, for service.Refunds.OnFinished. Both
// results of every provider configured are there from the start, so an
// alert on "failed" has a series to watch.
func countRefunds(reg prometheus.Registerer, providers []model.Provider) func(model.Provider, model.RefundState) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_refunds_total",
		Help: "Refunds finished, by provider and result: refunded, or failed (refused by the provider, payment REFUND_FAILED: an operator has to look).",
	}, []string{"provider", "result"})
	reg.MustRegister(c)
	for _, p := range providers {
		c.WithLabelValues(string(p), "refunded")
		c.WithLabelValues(string(p), "failed")
	}
	return func(p model.Provider, to model.RefundState) {
		if to == model.RefundFailed {
			c.WithLabelValues(string(p), "failed").Inc()
			return
		}
		c.WithLabelValues(string(p), "refunded").Inc()
	}
}

// countGroups registers group apply's metrics and hooks them to p:
// paynotify_notify_group_size (notifications applied per group
// transaction) and paynotify_notify_group_fallbacks_total{reason}. Every
// reason's series is there from the start, and the notify path only adds
// to counters resolved here.
func countGroups(reg prometheus.Registerer, p *service.Payments) {
	size := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paynotify_notify_group_size",
		Help:    "Notifications applied per group transaction (group apply).",
		Buckets: []float64{2, 4, 8, 16, 32, 64},
	})
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_notify_group_fallbacks_total",
		Help: "Notifications group apply did not apply in a group transaction, by reason: run alone (duplicate_in_group, two_trades_one_order, not_eligible, alone, recorded_meanwhile, lock_wait, error, near_deadline) or answered failure (expired, busy).",
	}, []string{"reason"})
	reg.MustRegister(size, fallbacks)
	all := service.Fallbacks()
	byReason := make([]prometheus.Counter, len(all))
	for _, f := range all {
		byReason[f] = fallbacks.WithLabelValues(f.String())
	}
	p.OnGroup = func(applied int) { size.Observe(float64(applied)) }
	p.OnFallback = func(f service.Fallback) {
		if int(f) < len(byReason) {
			byReason[f].Inc()
		}
	}
}
