package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"paynotify/broker"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/model"
	"paynotify/service"
)

// workers are what runs beside the HTTP server: every background job
// (the order closer, the retention job, the Alipay jobs, the outbox relay when NATS_URL is
// set) through service.RunJobs, and, in dev, the accounting consumer — all
// in one errgroup, stopped by one context.
type workers struct {
	cancel context.CancelFunc
	group  *errgroup.Group
	broker *broker.JetStream
}

// startWorkers starts the background jobs: the closer, the retention job
// and the relay, made here from the configuration, and the jobs given.
// They stop with stop(), not with the server's context, so they outlive
// the HTTP drain.
func startWorkers(ctx context.Context, log *slog.Logger, cfg config.Config, store *dao.Store, reg prometheus.Registerer, consume bool, jobs ...service.Job) (*workers, error) {
	m := newWorkerMetrics(reg, store)
	closer := service.NewCloser(store, log)
	closer.PayTimeout, closer.Interval, closer.Batch = cfg.OrderPayTimeout, cfg.OrderCloseInterval, cfg.OrderCloseBatch
	retention := service.NewRetention(store)
	retention.Outbox, retention.Recon = cfg.OutboxRetention, cfg.ReconRetention
	retention.OnPurged = func(t service.PurgeTable, n int) { m.purged.WithLabelValues(string(t)).Add(float64(n)) }
	retention.OnOverdue = func(t service.PurgeTable, d time.Duration) { m.overdue.WithLabelValues(string(t)).Set(d.Seconds()) }
	jobs = append([]service.Job{closer.Job(), retention.Job()}, jobs...)
	m.closerJob = closer.Job().Name

	var b *broker.JetStream
	if cfg.NATSURL == "" {
		log.Warn(service.ErrNoBroker.Error())
	} else {
		var err error
		if b, err = broker.Connect(ctx, cfg.NATSURL, broker.DefaultStream, broker.DefaultPrefix, log,
			broker.Replicas(cfg.NATSStreamReplicas)); err != nil {
			return nil, err
		}
		relay := service.NewRelay(store, b, log)
		relay.OnPublished = func(sent, failed int) {
			m.published.WithLabelValues("sent").Add(float64(sent))
			m.published.WithLabelValues("failed").Add(float64(failed))
		}
		jobs = append(jobs, relay.Job())
		log.Info("outbox relay started", "nats", broker.Redact(cfg.NATSURL), "stream", broker.DefaultStream, "replicas", cfg.NATSStreamReplicas)
	}

	wctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(wctx)
	w := &workers{cancel: cancel, group: g, broker: b}
	g.Go(func() error { return service.RunJobs(gctx, log, m.round, jobs...) })
	if b != nil && consume {
		acct := service.NewAccounting(store)
		acct.OnBooked = func(dup bool) {
			if dup {
				m.consumed.WithLabelValues("duplicate").Inc()
			} else {
				m.consumed.WithLabelValues("booked").Inc()
			}
		}
		g.Go(func() error {
			if err := b.Consume(gctx, accountingDurable, service.AccountingEvents, acct.Book); err != nil {
				log.Error("accounting consumer stopped", "err", err)
			}
			return nil
		})
		log.Info("accounting consumer started", "durable", accountingDurable)
	}
	return w, nil
}

// accountingDurable is the JetStream durable consumer of the journal.
const accountingDurable = "paynotify-accounting"

// stop ends the jobs and waits for them.
func (w *workers) stop() {
	w.cancel()
	_ = w.group.Wait()
	if w.broker != nil {
		w.broker.Close()
	}
}

type workerMetrics struct {
	closerJob string
	rounds    *prometheus.CounterVec
	rows      *prometheus.CounterVec
	closed    prometheus.Counter
	published *prometheus.CounterVec
	consumed  *prometheus.CounterVec
	purged    *prometheus.CounterVec
	overdue   *prometheus.GaugeVec
}

func newWorkerMetrics(reg prometheus.Registerer, store *dao.Store) *workerMetrics {
	m := &workerMetrics{
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paynotify_job_rounds_total", Help: "Rounds of each background job, by result (ok, error).",
		}, []string{"job", "result"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paynotify_job_rows_total", Help: "Rows each background job finished.",
		}, []string{"job"}),
		closed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paynotify_orders_closed_total", Help: "Unpaid orders closed by the timeout closer.",
		}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paynotify_outbox_published_total", Help: "Outbox rows the relay published (sent) or failed to.",
		}, []string{"result"}),
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paynotify_accounting_events_total", Help: "Events the accounting consumer booked, or found booked already.",
		}, []string{"result"}),
	}
	m.purged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_retention_deleted_total", Help: "Rows the retention job deleted, by table.",
	}, []string{"table"})
	m.overdue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paynotify_retention_overdue_seconds",
		Help: "How long past its retention the oldest row the retention job has still to delete is, by table (0: caught up), as of its last round.",
	}, []string{"table"})
	for _, t := range service.PurgeTables {
		m.purged.WithLabelValues(string(t))
	}
	reg.MustRegister(m.rounds, m.rows, m.closed, m.published, m.consumed, m.purged, m.overdue)
	for _, state := range []model.OutboxState{model.OutboxPending, model.OutboxFailed} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "paynotify_outbox_rows",
			Help:        "Outbox rows waiting to be published (pending) or failing repeatedly (failed).",
			ConstLabels: prometheus.Labels{"state": string(state)},
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n, err := store.OutboxCount(ctx, state)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

// round counts one round of a job.
func (m *workerMetrics) round(r service.Round) {
	result := "ok"
	if r.Err != nil {
		result = "error"
	}
	m.rounds.WithLabelValues(r.Job, result).Inc()
	m.rows.WithLabelValues(r.Job).Add(float64(r.Rows))
	if r.Job == m.closerJob {
		m.closed.Add(float64(r.Rows))
	}
}
