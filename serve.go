package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"paynotify/alipay"
	"paynotify/broker"
	"paynotify/config"
	"paynotify/console"
	"paynotify/dao"
	"paynotify/handler"
	"paynotify/lock"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// serve runs the service as an operator deploys it.
func serve(ctx context.Context, env environment) error {
	if err := parseFlags(newFlags("serve", serveUsage), env, 0); err != nil {
		return err
	}
	// Every problem at once: the general settings' and Alipay's.
	cfg, err := config.Load(env.environ)
	acfg, aerr := cfg.Alipay(devKeys())
	if err := config.Join(err, aerr); err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	log.Info("starting", "config", cfg)
	client, err := alipay.New(acfg)
	if err != nil {
		return err
	}
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns, IOTimeout: cfg.DBTimeout})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := schemaCurrent(ctx, store); err != nil {
		return err
	}
	return listenAndServe(ctx, log, env, app{cfg: cfg, store: store, alipay: client})
}

// schemaCurrent refuses a database whose schema is behind this binary:
// serve and reconcile run no migrations of their own.
func schemaCurrent(ctx context.Context, store *dao.Store) error {
	pending, err := store.MigrationsPending(ctx)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if pending {
		return errors.New("the database schema is behind this binary: run `paynotify migrate` first")
	}
	return nil
}

// migrate applies the schema and exits.
func migrate(ctx context.Context, env environment) error {
	if err := parseFlags(newFlags("migrate", migrateUsage), env, 0); err != nil {
		return err
	}
	cfg, err := config.Load(env.environ)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	// No read timeout: an ALTER of a big table may take many minutes, and
	// a timeout would report a failure (the version unrecorded) while the
	// server goes on with it. Ctrl-C (the context) still ends the wait.
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: 2, IOTimeout: dao.NoIOTimeout})
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

// app is what listenAndServe runs.
type app struct {
	cfg    config.Config
	store  *dao.Store
	alipay *alipay.Client
	// consume runs the accounting consumer in-process too (dev).
	consume bool
	// mounts are extra handlers by path prefix (dev's fake Alipay).
	mounts map[string]http.Handler
	// ln, if set, is the listener to serve on (else HTTP_ADDR).
	ln net.Listener
	// verifier, if set, checks notifications instead of alipay (dev's
	// also tells its fake Alipay about each trade).
	verifier handler.Verifier
}

// listenAndServe wires the HTTP surface and the background workers and
// serves until ctx ends, then lets requests in flight finish.
func listenAndServe(ctx context.Context, log *slog.Logger, env environment, a app) error {
	cfg, store := a.cfg, a.store
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(store.SQL(), "paynotify"),
	)
	m := metrics.New(reg)
	if cfg.APIJWTSecret == "" {
		log.Warn("order API disabled: API_JWT_SECRET is not set")
	}
	payments := service.NewPayments(store, service.GroupApply(cfg.NotifyGroupApply == "on"))
	payments.OnUnmatched = func(p model.Payment) {
		m.PaymentUnmatched(p)
		log.Warn("payment for no order recorded UNMATCHED: refund it", "trade_no", p.TradeNo, "out_trade_no", p.OutTradeNo,
			"amount", p.Amount.StringFixed(2))
	}
	payments.OnGroup, payments.OnFallback = m.GroupApplied, m.GroupFallback
	// Payment Providers: one adapter per provider configured, by name.
	providers := service.Providers{
		model.ProviderAlipay: alipay.NewProvider(a.alipay, strings.TrimRight(cfg.PublicURL, "/")+"/alipay/notify", cfg.PayReturnURL),
	}
	refunds := service.NewRefunds(store, providers, log)
	refunds.OnFinished = m.RefundFinished
	recon := service.NewBillReconciler(store, providers[model.ProviderAlipay], payments, log)
	recon.Background = ctx // a run an admin asked for outlives its request, not the service
	recon.OnItem, recon.OnFinished = m.ReconItem, m.ReconFinished
	var checkout *service.Checkout
	var locker *lock.Redis
	if cfg.PublicURL == "" {
		log.Warn("pay endpoint disabled: PUBLIC_URL (where Alipay sends notifications) is not set")
	} else {
		var l service.Locker
		if cfg.RedisAddr != "" {
			locker = lock.New(cfg.RedisAddr, log)
			defer locker.Close()
			l = locker
		} else {
			log.Warn("REDIS_ADDR not set: payment starts are guarded in-process and by the database only")
		}
		checkout = service.NewCheckout(store, providers, payments, l, log)
		checkout.PayTimeout = cfg.OrderPayTimeout
	}
	var verifier handler.Verifier = a.alipay
	if a.verifier != nil {
		verifier = a.verifier
	}
	dashboard, queues, lookup := service.NewDashboard(store), service.NewQueues(store), service.NewLookup(store)
	var cons http.Handler
	cdeps := console.Deps{
		Log: log, Dashboard: dashboard, Queues: queues, Lookup: lookup, Sessions: service.NewSessions(store, cfg.ConsoleSessionTTL), Refunds: refunds, BillReconciler: recon,
		Operators: cfg.Operators, AdminToken: cfg.AdminToken, Metrics: m,
		SecureCookies: strings.HasPrefix(cfg.PublicURL, "https://"), PublicHost: publicHost(cfg.PublicURL),
	}
	if cdeps.Enabled() {
		c, err := console.New(cdeps)
		if err != nil {
			return err
		}
		cons = c
	} else {
		log.Warn("console disabled: neither CONSOLE_OPERATORS nor ADMIN_TOKEN is set")
	}
	h := handler.New(handler.Deps{
		Log:            log,
		Verifier:       verifier,
		Payments:       payments,
		Orders:         service.NewOrders(store),
		Checkout:       checkout,
		Refunds:        refunds,
		BillReconciler: recon,
		JWTSecret:      []byte(cfg.APIJWTSecret),
		AdminToken:     cfg.AdminToken,
		Dashboard:      dashboard, Queues: queues, Lookup: lookup,
		Console:       cons,
		DB:            store,
		Registry:      reg,
		Metrics:       m,
		NotifyTimeout: cfg.NotifyTimeout,
		APITimeout:    cfg.APITimeout,
	})
	if len(a.mounts) > 0 {
		mux := http.NewServeMux()
		for prefix, m := range a.mounts {
			mux.Handle(prefix+"/", http.StripPrefix(prefix, m))
		}
		mux.Handle("/", h)
		h = mux
	}
	trades := service.NewOpenTrades(store, providers, payments, log)
	trades.Interval, refunds.Interval = cfg.AlipayJobsInterval, cfg.AlipayJobsInterval
	jobs := []service.Job{trades.QueryJob(), trades.CloseJob(), refunds.Job()}
	if at, on, _ := cfg.ReconTime(); on {
		recon.At = at
		jobs = append(jobs, recon.Job())
	} else {
		log.Warn("daily reconciliation off (RECON_AT=off): run paynotify reconcile from cron instead")
	}
	w, err := startWorkers(ctx, log, cfg, store, m, a.consume, jobs...)
	if err != nil {
		return err
	}
	defer w.stop()
	if checkout != nil {
		checkout.OnUnguarded = m.PayStartUnguarded
	}

	ln := a.ln
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return err
		}
	}
	// Requests end with their own deadline (NOTIFY_TIMEOUT, API_TIMEOUT,
	// both shorter than the grace); endRequests ends any left a second
	// before the grace does, so each is still answered within it.
	reqCtx, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
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
	sctx, cancel := context.WithTimeout(context.Background(), config.ShutdownGrace)
	defer cancel()
	backstop := time.AfterFunc(config.ShutdownGrace-time.Second, endRequests)
	defer backstop.Stop()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: requests still running after %v: %w", config.ShutdownGrace, err)
	}
	log.Info("stopped")
	return nil
}

// newLogger logs JSON for machines (serve) or text for people (dev).
// The MySQL driver's own reports go to it too (dao.RouteDriverLog).
func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	log := slog.New(slog.NewTextHandler(w, opts))
	if json {
		log = slog.New(slog.NewJSONHandler(w, opts))
	}
	dao.SetDriverLogger(log)
	return log
}

// consumeCmd runs the accounting consumer until SIGTERM.
func consumeCmd(ctx context.Context, env environment) error {
	if err := parseFlags(newFlags("consume", consumeUsage), env, 0); err != nil {
		return err
	}
	cfg, err := config.Load(env.environ)
	if cfg.NATSURL == "" {
		err = config.Join(err, errors.New("NATS_URL is required: consume reads the event stream from NATS JetStream (e.g. nats://127.0.0.1:4222)"))
	}
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns, IOTimeout: cfg.DBTimeout})
	if err != nil {
		return err
	}
	defer store.Close()
	b, err := broker.Connect(ctx, cfg.NATSURL, broker.DefaultStream, broker.DefaultPrefix, log, broker.Replicas(cfg.NATSStreamReplicas))
	if err != nil {
		return err
	}
	defer b.Close()
	log.Info("accounting consumer running", "durable", accountingDurable)
	return b.Consume(ctx, accountingDurable, service.AccountingEvents, service.NewAccounting(store).Book)
}

// publicHost is the host of PUBLIC_URL, or "".
func publicHost(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return ""
	}
	return u.Host
}
