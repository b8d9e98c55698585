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

// WatchWebhooks registers the gauges read from the database at each
// scrape: paynotify_webhook_deliveries{endpoint,state} (PENDING and
// FAILED) and paynotify_webhook_oldest_pending_seconds{endpoint}, one
// series per endpoint (endpoints are few), zero when it has none.
func (m *Metrics) WatchWebhooks(store WebhookReader) {
	m.reg.MustRegister(webhookGauges{
		store:      store,
		deliveries: prometheus.NewDesc("paynotify_webhook_deliveries", "Webhook deliveries PENDING or FAILED, by endpoint id.", []string{"endpoint", "state"}, nil),
		oldest: prometheus.NewDesc("paynotify_webhook_oldest_pending_seconds",
			"Age of the endpoint's oldest PENDING delivery; 0 if it has none.", []string{"endpoint"}, nil),
	})
}

type webhookGauges struct {
	store              WebhookReader
	deliveries, oldest *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (g webhookGauges) Describe(ch chan<- *prometheus.Desc) { ch <- g.deliveries; ch <- g.oldest }

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
	for _, e := range endpoints {
		id := strconv.FormatInt(e.ID, 10)
		for _, st := range []model.DeliveryState{model.DeliveryPending, model.DeliveryFailed} {
			ch <- prometheus.MustNewConstMetric(g.deliveries, prometheus.GaugeValue, float64(by[key{e.ID, st}].Count), id, string(st))
		}
		age := 0.0
		if p, ok := by[key{e.ID, model.DeliveryPending}]; ok && p.Count > 0 {
			age = max(time.Since(p.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, age, id)
	}
}
