package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
)

// WebhookReader reads what the webhook gauges report (dao.Store does).
type WebhookReader interface {
	WebhookEndpoints(ctx context.Context, enabledOnly bool) ([]model.WebhookEndpoint, error)
	DeliveryStats(ctx context.Context) ([]model.DeliveryStat, error)
}

// newWebhook defines the webhook attempts counter.
func (m *Metrics) newWebhook() {
	m.webhookAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_webhook_attempts_total",
		Help: "Webhook delivery attempts by endpoint id and result (delivered, status, gone, timeout, error).",
	}, []string{"endpoint", "result"})
	m.reg.MustRegister(m.webhookAttempts)
}

// WebhookAttempt counts one attempt to an endpoint.
func (m *Metrics) WebhookAttempt(endpointID int64, r model.AttemptResult) {
	if m == nil {
		return
	}
	m.webhookAttempts.WithLabelValues(strconv.FormatInt(endpointID, 10), string(r)).Inc()
}

// Endpoint states paynotify_webhook_endpoints counts endpoints by: an
// endpoint disabled by paynotify (410 Gone, or failing for
// WEBHOOK_DISABLE_AFTER) is told from one an operator disabled, which
// needs no one.
const (
	endpointEnabled             = "enabled"
	endpointDisabledByOperator  = "disabled_by_operator"
	endpointDisabledByPaynotify = "disabled_by_paynotify"
)

// WatchWebhooks registers the gauges read from the database at each
// scrape: paynotify_webhook_deliveries{endpoint,state} (PENDING and
// FAILED) and paynotify_webhook_oldest_pending_seconds{endpoint}, one
// series per endpoint (endpoints are few), zero when it has none, and
// paynotify_webhook_endpoints{state}. Each endpoint's
// paynotify_webhook_attempts_total series start at zero, so that an
// endpoint's first attempts count as an increase.
func (m *Metrics) WatchWebhooks(store WebhookReader) {
	m.reg.MustRegister(webhookGauges{
		store:      store,
		attempts:   m.webhookAttempts,
		deliveries: prometheus.NewDesc("paynotify_webhook_deliveries", "Webhook deliveries PENDING or FAILED, by endpoint id.", []string{"endpoint", "state"}, nil),
		oldest: prometheus.NewDesc("paynotify_webhook_oldest_pending_seconds",
			"Age of the endpoint's oldest PENDING delivery; 0 if it has none.", []string{"endpoint"}, nil),
		endpoints: prometheus.NewDesc("paynotify_webhook_endpoints",
			"Webhook endpoints by state: enabled, disabled_by_operator, disabled_by_paynotify (410 Gone or WEBHOOK_DISABLE_AFTER).", []string{"state"}, nil),
	})
}

type webhookGauges struct {
	store                         WebhookReader
	attempts                      *prometheus.CounterVec
	deliveries, oldest, endpoints *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (g webhookGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.deliveries
	ch <- g.oldest
	ch <- g.endpoints
}

// Collect implements prometheus.Collector. A read that fails reports no
// series (the readiness alert speaks for the database).
func (g webhookGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	endpoints, err := g.store.WebhookEndpoints(ctx, false)
	if err != nil {
		return
	}
	stats, err := g.store.DeliveryStats(ctx)
	if err != nil {
		return
	}
	type key struct {
		id    int64
		state model.DeliveryState
	}
	by := map[key]model.DeliveryStat{}
	for _, s := range stats {
		by[key{s.EndpointID, s.State}] = s
	}
	states := map[string]int{endpointEnabled: 0, endpointDisabledByOperator: 0, endpointDisabledByPaynotify: 0}
	for _, e := range endpoints {
		id := strconv.FormatInt(e.ID, 10)
		switch {
		case e.Enabled:
			states[endpointEnabled]++
		case e.DisabledReason != "":
			states[endpointDisabledByPaynotify]++
		default:
			states[endpointDisabledByOperator]++
		}
		for _, r := range model.AttemptResults {
			g.attempts.WithLabelValues(id, string(r))
		}
		for _, st := range []model.DeliveryState{model.DeliveryPending, model.DeliveryFailed} {
			ch <- prometheus.MustNewConstMetric(g.deliveries, prometheus.GaugeValue, float64(by[key{e.ID, st}].Count), id, string(st))
		}
		age := 0.0
		if p, ok := by[key{e.ID, model.DeliveryPending}]; ok && p.Count > 0 {
			age = max(time.Since(p.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, age, id)
	}
	for state, n := range states {
		ch <- prometheus.MustNewConstMetric(g.endpoints, prometheus.GaugeValue, float64(n), state)
	}
}
