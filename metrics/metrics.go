// Package metrics owns every Prometheus metric paynotify exports: their
// names, help, labels and buckets are defined here and nowhere else, and
// the rest of the program counts through Metrics' methods (the service's
// On* hooks are wired to them in main; the HTTP surface calls them). A
// page that shows a count reads it through a method too, never by the
// metric's name.
//
// To add a metric: a field here, its definition and registration in New,
// and a method that counts into it. To add a label (a provider, say): add
// it to the definition's label list and a parameter to the method, so
// every caller is told by the compiler.
package metrics

import (
	"database/sql"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"paynotify/model"
)

// Metrics is every metric of one instance, registered on one registry.
// A nil *Metrics counts nothing.
type Metrics struct {
	// The HTTP surface (http.go).
	notifications *prometheus.CounterVec
	answers       *prometheus.CounterVec
	notifyLatency *prometheus.HistogramVec
	requests      *prometheus.CounterVec
	requestTime   *prometheus.HistogramVec
	refused       *prometheus.CounterVec

	// Payments, refunds and checkout (payment.go).
	unmatched      *prometheus.CounterVec
	groupSize      prometheus.Histogram
	groupFallbacks []prometheus.Counter // by service.Fallback
	refunds        *prometheus.CounterVec
	unguarded      prometheus.Counter

	// Reconciliation (recon.go).
	reconItems    *prometheus.CounterVec
	reconRuns     *prometheus.CounterVec
	reconDuration *prometheus.HistogramVec

	// Background jobs, the outbox and the accounting consumer (job.go).
	jobRounds *prometheus.CounterVec
	jobRows   *prometheus.CounterVec
	closed    prometheus.Counter
	published *prometheus.CounterVec
	consumed  *prometheus.CounterVec
	purged    *prometheus.CounterVec
	overdue   *prometheus.GaugeVec
	lastRound *prometheus.GaugeVec
	interval  *prometheus.GaugeVec

	// Webhooks (webhook.go).
	webhookAttempts *prometheus.CounterVec

	// Configuration reloads (config.go).
	reloadOK, reloadAt prometheus.Gauge

	// accounts are the configured provider accounts (BillAccounts), read
	// at each scrape.
	mu       sync.Mutex
	accounts []model.BillAccount

	reg prometheus.Registerer
}

// New defines every metric and registers it on reg. Every label value
// known in advance has its series from the start, so an alert has a
// series to watch before the first event.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{reg: reg}
	m.newHTTP()
	m.newPayment()
	m.newRecon()
	m.newJob()
	m.newWebhook()
	m.newConfig()
	return m
}

// NewRegistry is a registry with the Go runtime's, the process's and db's
// pool collectors; New adds paynotify's own.
func NewRegistry(db *sql.DB) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(db, "paynotify"),
	)
	return reg
}
