package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
)

// countRefunds registers paynotify_refunds_total{result} and returns what
// counts into it, for service.Refunds.OnFinished. Both results are there
// from the start, so an alert on "failed" has a series to watch.
func countRefunds(reg prometheus.Registerer) func(model.RefundState) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_refunds_total",
		Help: "Refunds finished, by result: refunded, or failed (refused by Alipay, payment REFUND_FAILED: an operator has to look).",
	}, []string{"result"})
	reg.MustRegister(c)
	refunded, failed := c.WithLabelValues("refunded"), c.WithLabelValues("failed")
	return func(to model.RefundState) {
		if to == model.RefundFailed {
			failed.Inc()
			return
		}
		refunded.Inc()
	}
}
