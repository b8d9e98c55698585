package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/broker"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/model"
	"paynotify/service"
)

// workers are the background jobs that run beside the HTTP server: the
// order closer, the outbox relay (when NATS_URL is set) and, in dev, the
// accounting consumer.
type workers struct {
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	broker *broker.JetStream
}

// startWorkers starts the background jobs. They stop with stop(), not with
// the server's context, so they outlive the HTTP drain.
func startWorkers(ctx context.Context, log *slog.Logger, cfg config.Config, store *dao.Store, reg prometheus.Registerer, consume bool) (*workers, error) {
	wctx, cancel := context.WithCancel(context.Background())
	w := &workers{ctx: wctx, cancel: cancel}
	m := newWorkerMetrics(reg, store)

	closer := service.NewCloser(store, log, cfg.OrderPayTimeout, cfg.OrderCloseInterval, cfg.OrderCloseBatch)
	closer.OnClosed = func(n int) { m.closed.Add(float64(n)) }
	w.go_(func() { closer.Run(wctx) })

	if cfg.NATSURL == "" {
		log.Warn(service.ErrNoBroker.Error())
		return w, nil
	}
	b, err := broker.Connect(ctx, cfg.NATSURL, broker.DefaultStream, broker.DefaultPrefix, log)
	if err != nil {
		w.stop()
		return nil, err
	}
	w.broker = b
	relay := service.NewRelay(store, b, log)
	relay.OnPublished = func(sent, failed int) {
		m.published.WithLabelValues("sent").Add(float64(sent))
		m.published.WithLabelValues("failed").Add(float64(failed))
	}
	w.go_(func() { relay.Run(wctx) })
	log.Info("outbox relay started", "nats", cfg.NATSURL, "stream", broker.DefaultStream)
	if consume {
		w.startConsumer(wctx, log, b, store, m)
	}
	return w, nil
}

func (w *workers) startConsumer(ctx context.Context, log *slog.Logger, b *broker.JetStream, store *dao.Store, m *workerMetrics) {
	acct := service.NewAccounting(store)
	acct.OnBooked = func(dup bool) {
		if dup {
			m.consumed.WithLabelValues("duplicate").Inc()
		} else {
			m.consumed.WithLabelValues("booked").Inc()
		}
	}
	w.go_(func() {
		if err := b.Consume(ctx, accountingDurable, service.AccountingEvents, acct.Book); err != nil {
			log.Error("accounting consumer stopped", "err", err)
		}
	})
	log.Info("accounting consumer started", "durable", accountingDurable)
}

// accountingDurable is the JetStream durable consumer of the journal.
const accountingDurable = "paynotify-accounting"

func (w *workers) go_(f func()) {
	w.wg.Add(1)
	go func() { defer w.wg.Done(); f() }()
}

// stop ends the jobs and waits for them.
func (w *workers) stop() {
	w.cancel()
	w.wg.Wait()
	if w.broker != nil {
		w.broker.Close()
	}
}

type workerMetrics struct {
	closed    prometheus.Counter
	published *prometheus.CounterVec
	consumed  *prometheus.CounterVec
}

func newWorkerMetrics(reg prometheus.Registerer, store *dao.Store) *workerMetrics {
	m := &workerMetrics{
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
	reg.MustRegister(m.closed, m.published, m.consumed)
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
