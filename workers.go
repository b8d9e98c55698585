package main

import (
	"context"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"paynotify/broker"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// workers are what runs beside the HTTP server: every background job
// (the order closer, the retention job, the providers' jobs, the outbox
// relay when NATS_URL is set) through service.RunJobs, and, in dev, the accounting consumer — all
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
//
// The in-process consumer (consume) books each provider's first account
// (first) to its clearing account itself, as paynotify consume does.
func startWorkers(ctx context.Context, log *slog.Logger, cfg config.Config, store *dao.Store, m *metrics.Metrics, consume bool,
	first map[model.Provider]string, jobs ...service.Job) (*workers, error) {
	m.WatchOutbox(store)
	closer := service.NewCloser(store, log)
	closer.PayTimeout, closer.Interval, closer.Batch = cfg.OrderPayTimeout, cfg.OrderCloseInterval, cfg.OrderCloseBatch
	retention := service.NewRetention(store)
	retention.Outbox, retention.Recon, retention.Webhooks = cfg.OutboxRetention, cfg.ReconRetention, cfg.Webhook.Retention
	retention.OnPurged, retention.OnOverdue = m.RetentionPurged, m.RetentionOverdue
	jobs = append([]service.Job{closer.Job(), retention.Job()}, jobs...)

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
		relay.OnPublished = m.Published
		jobs = append(jobs, relay.Job())
		log.Info("outbox relay started", "nats", broker.Redact(cfg.NATSURL), "stream", broker.DefaultStream, "replicas", cfg.NATSStreamReplicas)
	}

	wctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(wctx)
	w := &workers{cancel: cancel, group: g, broker: b}
	m.Jobs(jobs...)
	g.Go(func() error { return service.RunJobs(gctx, log, m.JobRound, jobs...) })
	if b != nil && consume {
		acct := service.NewAccounting(store)
		acct.OnBooked, acct.First = m.Booked, first
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
