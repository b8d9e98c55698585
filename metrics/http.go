package metrics

import (
	"context"
	"time"

	"paynotify/model"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func (m *Metrics) newHTTP() {
	m.notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_notifications_total",
		Help: "Notifications by provider (alipay, wechatpay) and outcome (applied, duplicate, refund_pending, ignored, or why they failed).",
	}, []string{"provider", "outcome"})
	m.notifyLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paynotify_notify_duration_seconds",
		Help:    "Time to answer a notification, by provider and outcome.",
		Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
	}, []string{"provider", "outcome"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_http_requests_total",
		Help: "HTTP requests by route template (unmatched for no route), method and status code.",
	}, []string{"route", "method", "status"})
	m.requestTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paynotify_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route template and method.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method"})
	m.answers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_notify_answers_total",
		Help: "Notifications by provider and answer: success (recorded: Alipay's \"success\", WeChat Pay's 2xx), or failure (the provider resends: Alipay's \"failure\", WeChat Pay's 4xx/5xx; alert on its share).",
	}, []string{"provider", "answer"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_notify_refused_total",
		Help: "Notifications refused for whom they name, by provider and reason: unknown_app (validly signed for an app or merchant this instance is not configured for: the buyer paid, the order waits; add the app to PROVIDERS_FILE).",
	}, []string{"provider", "reason"})
	m.reg.MustRegister(m.notifications, m.answers, m.notifyLatency, m.requests, m.requestTime, m.refused)
}

// RefusedUnknownApp is paynotify_notify_refused_total's reason for a
// notification naming an app or merchant not configured.
const RefusedUnknownApp = "unknown_app"

// NotifyRefused counts a provider's notification refused for reason.
func (m *Metrics) NotifyRefused(provider model.Provider, reason string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(string(provider), reason).Inc()
}

// The answers to a notification, paynotify_notify_answers_total's
// series: recorded, or to be sent again.
const (
	AnswerSuccess = "success"
	AnswerFailure = "failure"
)

// Notified counts a provider's notification of outcome, answered after
// took; answer is AnswerSuccess or AnswerFailure, or "" for a request
// that was no notification (WeChat Pay's signature probe, refused as it
// must be and never sent again).
func (m *Metrics) Notified(provider model.Provider, outcome, answer string, took time.Duration) {
	if m == nil {
		return
	}
	m.notifications.WithLabelValues(string(provider), outcome).Inc()
	if answer == AnswerSuccess || answer == AnswerFailure {
		m.answers.WithLabelValues(string(provider), answer).Inc()
	}
	m.notifyLatency.WithLabelValues(string(provider), outcome).Observe(took.Seconds())
}

// WatchReady registers paynotify_ready, read at every scrape: 1 when
// ready (what /readyz answers 200 for) says this instance can serve.
func (m *Metrics) WatchReady(ready func(context.Context) error) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "paynotify_ready",
		Help: "1 when this instance can serve (what /readyz answers 200 for), else 0.",
	}, func() float64 {
		if ready(context.Background()) != nil {
			return 0
		}
		return 1
	}))
}

// WatchLogDropped registers paynotify_log_lines_dropped_total, read at
// every scrape from dropped (nil: none are dropped).
func (m *Metrics) WatchLogDropped(dropped func() uint64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "paynotify_log_lines_dropped_total",
		Help: "Log lines dropped rather than block a request, because the log's output could not keep up.",
	}, func() float64 {
		if dropped == nil {
			return 0
		}
		return float64(dropped())
	}))
}

// Requested counts an HTTP request by its route's template, method and
// status, answered after took.
func (m *Metrics) Requested(route, method, status string, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, method, status).Inc()
	m.requestTime.WithLabelValues(route, method).Observe(took.Seconds())
}

// NotificationCounts is how many notifications this instance counted
// since it started, by outcome (every provider's together).
func (m *Metrics) NotificationCounts() map[string]float64 {
	out := map[string]float64{}
	if m == nil {
		return out
	}
	ch := make(chan prometheus.Metric)
	go func() {
		m.notifications.Collect(ch)
		close(ch)
	}()
	for c := range ch {
		var d dto.Metric
		if err := c.Write(&d); err != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "outcome" {
				out[l.GetValue()] += d.GetCounter().GetValue()
			}
		}
	}
	return out
}
