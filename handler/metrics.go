package handler

import "github.com/prometheus/client_golang/prometheus"

// metrics are the notify endpoint's counters; the pool and runtime
// collectors are registered by whoever owns the registry.
type metrics struct {
	notifications *prometheus.CounterVec
	latency       *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paynotify_notifications_total",
			Help: "Alipay notifications by outcome (applied, duplicate, refund_pending, ignored, or why they failed).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paynotify_notify_duration_seconds",
			Help:    "Time to answer an Alipay notification, by outcome.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.notifications, m.latency)
	return m
}
