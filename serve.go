package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"paynotify/alipay"
	"paynotify/broker"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/handler"
	"paynotify/service"
)

// shutdownGrace is how long requests in flight may take to finish after
// SIGTERM.
const shutdownGrace = 20 * time.Second

// serve runs the service as an operator deploys it.
func serve(ctx context.Context, env environment) error {
	cfg, err := config.Load(env.environ)
	if err != nil {
		return err
	}
	acfg, err := cfg.Alipay(devKeys())
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	log.Info("starting", "config", cfg)
	client, err := alipay.New(acfg)
	if err != nil {
		return err
	}
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns})
	if err != nil {
		return err
	}
	defer store.Close()
	pending, err := store.MigrationsPending(ctx)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if pending {
		return errors.New("the database schema is behind this binary: run `paynotify migrate` first")
	}
	return listenAndServe(ctx, log, env, cfg, store, client, false)
}

// migrate applies the schema and exits.
func migrate(ctx context.Context, env environment) error {
	cfg, err := config.Load(env.environ)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	log.Info("migrations applied", "db_driver", cfg.DBDriver)
	return nil
}

// listenAndServe wires the HTTP surface and the background workers (with
// the accounting consumer too if consume) and serves until ctx ends, then
// lets requests in flight finish.
func listenAndServe(ctx context.Context, log *slog.Logger, env environment, cfg config.Config, store *dao.Store, verifier handler.Verifier, consume bool) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(store.SQL(), "paynotify"),
	)
	if cfg.APIJWTSecret == "" {
		log.Warn("order API disabled: API_JWT_SECRET is not set")
	}
	h := handler.New(handler.Deps{
		Log:           log,
		Verifier:      verifier,
		Payments:      service.NewPayments(store),
		Orders:        service.NewOrders(store),
		JWTSecret:     []byte(cfg.APIJWTSecret),
		AdminToken:    cfg.AdminToken,
		Ops:           service.NewOps(store),
		DB:            store,
		Registry:      reg,
		NotifyTimeout: cfg.NotifyTimeout,
	})
	w, err := startWorkers(ctx, log, cfg, store, reg, consume)
	if err != nil {
		return err
	}
	defer w.stop()

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())
	if env.listening != nil {
		env.listening(ln.Addr().String())
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// newLogger logs JSON for machines (serve) or text for people (dev).
func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// consumeCmd runs the accounting consumer until SIGTERM.
func consumeCmd(ctx context.Context, env environment) error {
	cfg, err := config.Load(env.environ)
	if err != nil {
		return err
	}
	if cfg.NATSURL == "" {
		return errors.New("consume needs NATS_URL")
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns})
	if err != nil {
		return err
	}
	defer store.Close()
	b, err := broker.Connect(ctx, cfg.NATSURL, broker.DefaultStream, broker.DefaultPrefix, log)
	if err != nil {
		return err
	}
	defer b.Close()
	log.Info("accounting consumer running", "durable", accountingDurable)
	return b.Consume(ctx, accountingDurable, service.AccountingEvents, service.NewAccounting(store).Book)
}
