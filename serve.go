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
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

// serve runs the service as an operator deploys it.
func serve(ctx context.Context, env environment) error {
	if err := parseFlags(newFlags("serve", serveUsage), env, 0); err != nil {
		return err
	}
	// Every problem at once: the general settings' and each provider's.
	// A provider is on when its variables are set; with none set, Alipay's
	// are named as missing, as before WeChat Pay.
	cfg, err := config.Load(env.environ)
	var (
		acfg     alipay.Config
		aerr     error
		alipayOn = cfg.AlipayOn() || !cfg.WeChatPay.On()
	)
	if alipayOn {
		acfg, aerr = cfg.Alipay(devKeys())
	}
	wcfg, weChatOn, werr := cfg.WeChatPayClient(devKeys())
	if err := config.Join(err, cfg.Providers(), aerr, werr); err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	log.Info("starting", "config", cfg)
	a := app{cfg: cfg}
	if alipayOn {
		if a.alipay, err = alipay.New(acfg); err != nil {
			return err
		}
	}
	if weChatOn {
		wc, err := wechatpay.New(wcfg)
		if err != nil {
			return err
		}
		a.wechatpay = wechatpay.NewProvider(wc, strings.TrimRight(cfg.PublicURL, "/")+"/wechatpay/notify")
	}
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns, IOTimeout: cfg.DBTimeout})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := schemaCurrent(ctx, store); err != nil {
		return err
	}
	warnAuditGrants(ctx, log, store)
	a.store = store
	return listenAndServe(ctx, log, env, a)
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
	warnAuditGrants(ctx, log, store)
	return nil
}

// auditGrants is what serve's database user needs, and all it should hold.
const auditGrants = "GRANT SELECT, INSERT, UPDATE, DELETE ON <database>.* TO <serve's user> (docs/production.md)"

// warnAuditGrants says so when the store's user could TRUNCATE admin_audit
// (it holds DROP): migrate's user needs DROP, serve's must not have it.
func warnAuditGrants(ctx context.Context, log *slog.Logger, store *dao.Store) {
	can, err := store.CanTruncateAudit(ctx)
	switch {
	case err != nil:
		log.Warn("could not read this database user's grants; serve's user needs only "+auditGrants, "err", err)
	case can:
		log.Warn("this database user holds DROP and could TRUNCATE admin_audit: if serve runs as this user, give it only " + auditGrants)
	}
}

// app is what listenAndServe runs.
type app struct {
	cfg   config.Config
	store *dao.Store
	// alipay is the Alipay client, nil when Alipay is off.
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
	// dev is paynotify dev: what it says at start fits the development keys.
	dev bool
	// manualRefunds leaves payments owed back to an operator (dev
	// -manual-refunds): the refund worker does not take them.
	manualRefunds bool
	// wechatpay, if set, is the WeChat Pay provider: payments through it,
	// its jobs and POST /wechatpay/notify.
	wechatpay *wechatpay.Provider
	// weChatNotice, if set, checks WeChat Pay's notifications instead of
	// wechatpay (dev's also tells its fake WeChat Pay about each trade).
	weChatNotice handler.WeChatPayVerifier
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
	if cfg.APIJWTSecret == "" {
		log.Warn("order API disabled: API_JWT_SECRET is not set")
	}
	payments := service.NewPayments(store, service.GroupApply(cfg.NotifyGroupApply == "on"))
	payments.OnUnmatched = countUnmatched(reg, log)
	countGroups(reg, payments)
	// Payment Providers: one adapter per provider configured, by name.
	providers := service.Providers{}
	if a.alipay != nil {
		providers[model.ProviderAlipay] = alipay.NewProvider(a.alipay, strings.TrimRight(cfg.PublicURL, "/")+"/alipay/notify", cfg.PayReturnURL)
	}
	var weChat handler.WeChatPayVerifier // nil: /wechatpay/notify is off
	if a.wechatpay != nil {
		providers[model.ProviderWechatpay] = a.wechatpay
		weChat = a.wechatpay
		if a.weChatNotice != nil {
			weChat = a.weChatNotice
		}
	}
	refunds := service.NewRefunds(store, providers, log)
	refunds.OnFinished = countRefunds(reg, providers.Names())
	refunds.LeavePending = a.manualRefunds
	// One reconciliation per provider: its own runs, its own daily job.
	var recon *service.Reconciliations // Alipay's: the admin routes' and the console's
	var recons []*service.Reconciliations
	for _, p := range providers.Names() {
		r := service.NewReconciliations(store, providers[p], payments, log)
		r.Provider = p
		r.Background = ctx // a run an admin asked for outlives its request, not the service
		recons = append(recons, r)
		if p == model.ProviderAlipay {
			recon = r
		}
	}
	countReconciliations(reg, recons...)
	stateGauges(reg, store)
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
	var verifier handler.Verifier // nil: no /alipay/notify
	switch {
	case a.verifier != nil:
		verifier = a.verifier
	case a.alipay != nil:
		verifier = a.alipay
	}
	ops := service.NewOps(store)
	var cons http.Handler
	cdeps := console.Deps{
		Log: log, Ops: ops, Sessions: service.NewSessions(store, cfg.ConsoleSessionTTL), Refunds: refunds, Reconciliations: recon,
		Operators: cfg.Operators, AdminToken: cfg.AdminToken, Gatherer: reg,
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
		Log:             log,
		Verifier:        verifier,
		WeChatPay:       weChat,
		Payments:        payments,
		Orders:          service.NewOrders(store),
		Checkout:        checkout,
		Refunds:         refunds,
		Reconciliations: recon,
		JWTSecret:       []byte(cfg.APIJWTSecret),
		AdminToken:      cfg.AdminToken,
		Ops:             ops,
		Console:         cons,
		DB:              store,
		Registry:        reg,
		NotifyTimeout:   cfg.NotifyTimeout,
		APITimeout:      cfg.APITimeout,
	})
	if len(a.mounts) > 0 {
		mux := http.NewServeMux()
		for prefix, m := range a.mounts {
			mux.Handle(prefix+"/", http.StripPrefix(prefix, m))
		}
		mux.Handle("/", h)
		h = mux
	}
	reconciler := service.NewReconciler(store, providers, payments, log)
	// One round asks every provider its rows name: as often as the most
	// eager provider wants.
	interval := cfg.AlipayJobsInterval
	if a.wechatpay != nil && (a.alipay == nil || cfg.WeChatPayJobsInterval() < interval) {
		interval = cfg.WeChatPayJobsInterval()
	}
	reconciler.Interval, refunds.Interval = interval, interval
	jobs := []service.Job{reconciler.QueryJob(), reconciler.CloseJob(), refunds.Job()}
	if at, on, _ := cfg.ReconTime(); len(recons) == 0 {
		log.Info("no bill to reconcile: no provider is configured")
	} else if on {
		for _, r := range recons {
			r.At = at // WeChat Pay's not before its bill is published (service.BillPublished)
			jobs = append(jobs, r.Job())
		}
	} else if a.dev {
		// paynotify reconcile refuses the development keys, as serve does.
		log.Info("daily reconciliation off in dev: reconcile a day with POST /admin/reconciliations/{date}/run or the console's Reconciliation page")
	} else {
		log.Warn("daily reconciliation off (RECON_AT=off): run paynotify reconcile from cron instead")
	}
	w, err := startWorkers(ctx, log, cfg, store, reg, a.consume, jobs...)
	if err != nil {
		return err
	}
	defer w.stop()
	if checkout != nil {
		unguarded := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paynotify_pay_starts_unguarded_total",
			Help: "Payment starts that ran without the Redis guard (not configured, or Redis down).",
		})
		reg.MustRegister(unguarded)
		checkout.OnUnguarded = unguarded.Inc
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
// The MySQL driver's own reports go to it too (driverLog).
func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: readableDuration}
	log := slog.New(slog.NewTextHandler(w, opts))
	if json {
		log = slog.New(slog.NewJSONHandler(w, opts))
	}
	driverLogger.Store(log)
	return log
}

// readableDuration logs a duration as people write it ("30m0s"), where
// slog's JSON handler would write nanoseconds (1800000000000).
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
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
