package handler

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the HTTP surface's counters; the pool and runtime
// collectors are registered by whoever owns the registry.
type metrics struct {
	notifications *prometheus.CounterVec
	answers       map[string]prometheus.Counter
	latency       *prometheus.HistogramVec
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paynotify_notifications_total",
			Help: "Notifications by provider (alipay, wechatpay) and outcome (applied, duplicate, refund_pending, ignored, or why they failed).",
		}, []string{"provider", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paynotify_notify_duration_seconds",
			Help:    "Time to answer a notification, by provider and outcome.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
		}, []string{"provider", "outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paynotify_http_requests_total",
			Help: "HTTP requests by route template (unmatched for no route), method and status code.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paynotify_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template and method.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
	answers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_notify_answers_total",
		Help: "Alipay notifications by answer: success (processed), or failure (Alipay resends; alert on its share).",
	}, []string{"answer"})
	m.answers = map[string]prometheus.Counter{
		answerSuccess: answers.WithLabelValues(answerSuccess), answerFailure: answers.WithLabelValues(answerFailure),
	}
	reg.MustRegister(m.notifications, answers, m.latency, m.requests, m.duration)
	return m
}

// routeUnmatched is the route label of a request no route matched: the
// raw path would give every scanner's probe a series of its own.
const routeUnmatched = "unmatched"

// countRequests counts every request by its route's template (gin's
// FullPath, "/api/v1/orders/:sn" — never the path itself), method and
// status, and times it. It runs outside recovery, so a panic counts as
// the 500 it became.
func (m *metrics) countRequests() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = routeUnmatched
		}
		method := knownMethod(c.Request.Method)
		m.requests.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status())).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	}
}

// knownMethod keeps the method label to the methods HTTP defines: a
// client can send any token there.
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}
