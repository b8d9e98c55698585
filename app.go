package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/config"
	"paynotify/console"
	"paynotify/dao"
	"paynotify/handler"
	"paynotify/lock"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// app is what listenAndServe runs.
type app struct {
	cfg   config.Config
	store *dao.Store
	// providers are the payment providers configured (newRegistry): the
	// use cases, their jobs and the notify routes read them.
	providers registry
	// consume runs the accounting consumer in-process too (dev).
	consume bool
	// mounts are extra handlers by path prefix (dev's fake Alipay).
	mounts map[string]http.Handler
	// ln, if set, is the listener to serve on (else HTTP_ADDR).
	ln net.Listener
	// verifier, if set, checks Alipay's notifications instead of the
	// apps' (dev's also tells its fake Alipay about each trade).
	verifier handler.Verifier
	// dev is paynotify dev: what it says at start fits the development keys.
	dev bool
	// manualRefunds leaves payments owed back to an operator (dev
	// -manual-refunds): the refund worker does not take them.
	manualRefunds bool
	// weChatNotice, if set, checks WeChat Pay's notifications instead of
	// the merchants' (dev's also tells its fake WeChat Pay about each trade).
	weChatNotice handler.WeChatPayVerifier
	// logDropped, if set, counts the log lines dropped because the log's
	// output could not keep up (serve's asynclog.Writer).
	logDropped func() uint64
}

// listenAndServe wires the HTTP surface and the background workers and
// serves until ctx ends, then lets requests in flight finish.
func listenAndServe(ctx context.Context, log *slog.Logger, env environment, a app) error {
	// Metrics
	reg := metrics.NewRegistry(a.store.SQL())
	m := metrics.New(reg)
	m.WatchState(a.store)
	m.WatchLogDropped(a.logDropped)

	// Use Cases
	if a.cfg.APIJWTSecret == "" {
		log.Warn("order API disabled: API_JWT_SECRET is not set")
	}
	s, err := newServices(ctx, log, a, m)
	if err != nil {
		return err
	}
	defer s.close()
	hk, err := newHooks(log, a.cfg, a.store, m)
	if err != nil {
		return err
	}
	defer hk.wait()
	s.webhooks = hk.webhooks

	// Configuration Reload (serve's: dev's providers are its fakes)
	var rl *reloader
	if !a.dev {
		rl = newReloader(log, env.environ, a, m)
		go rl.onHangup(ctx)
	}

	// HTTP Surface
	h, err := newRoutes(log, a, s, rl, reg, m)
	if err != nil {
		return err
	}

	// Background Jobs
	w, err := startWorkers(ctx, log, a.cfg, a.store, m, a.consume, s.recons.First(), append(s.jobs(log, a), hk.jobs()...)...)
	if err != nil {
		return err
	}
	defer w.stop()

	// Start API Service, and Shutdown
	return serveHTTP(ctx, log, env, a, h)
}

// services are the use cases serve wires, over one store.
type services struct {
	payments *service.Payments
	refunds  *service.Refunds
	// recons reconcile each configured provider account's bill.
	recons service.Reconcilers
	trades *service.OpenTrades
	// checkout is nil when PUBLIC_URL is not set.
	checkout *service.Checkout
	locker   *lock.Redis
	// webhooks serves /admin/webhook-endpoints (newHooks).
	webhooks *service.Webhooks
	// providers are the sets of apps the use cases read.
	providers service.Providers
}

// newServices makes the use cases of a and hooks their metrics to m.
func newServices(ctx context.Context, log *slog.Logger, a app, m *metrics.Metrics) (*services, error) {
	cfg, store := a.cfg, a.store
	s := &services{}
	s.payments = service.NewPayments(store, service.GroupApply(cfg.NotifyGroupApply == "on"), service.DuplicateCache(cfg.NotifyDuplicateCache),
		service.PaymentsLog(log))
	s.payments.OnUnmatched = func(p model.Payment) {
		m.PaymentUnmatched(p)
		log.Warn("payment for no order recorded UNMATCHED: refund it", "provider", p.Provider, "trade_no", p.TradeNo, "out_trade_no", p.OutTradeNo,
			"amount", p.Amount.StringFixed(2))
	}
	s.payments.OnGroup, s.payments.OnFallback = m.GroupApplied, m.GroupFallback
	// Payment Providers: one set of apps per provider configured (a
	// reload swaps each set's apps in place).
	providers := a.providers.sets
	s.providers = providers
	s.refunds = service.NewRefunds(store, providers, log)
	s.refunds.OnFinished = m.RefundFinished
	m.Providers(providers.Names())
	s.refunds.LeavePending = a.manualRefunds
	// One reconciliation per provider account: its own runs, its own
	// daily job.
	s.recons = service.NewReconcilers(store, providers, s.payments, log)
	for _, r := range s.recons.All() {
		r.Background = ctx // a run an admin asked for outlives its request, not the service
		r.OnItem, r.OnFinished = m.Recon(r.Provider, r.Account)
	}
	m.BillAccounts(s.recons.Accounts())
	if cfg.PublicURL == "" {
		log.Warn("pay endpoint disabled: PUBLIC_URL (where Alipay sends notifications) is not set")
	} else {
		var l service.Locker
		if cfg.RedisAddr != "" {
			s.locker = lock.New(cfg.RedisAddr, log)
			l = s.locker
		} else {
			log.Warn("REDIS_ADDR not set: payment starts are guarded in-process and by the database only")
		}
		s.checkout = service.NewCheckout(store, providers, s.payments, l, log)
		s.checkout.PayTimeout = cfg.OrderPayTimeout
		s.checkout.OnUnguarded = m.PayStartUnguarded
	}
	s.trades = service.NewOpenTrades(store, providers, s.payments, log)
	// One round asks every provider its rows name: as often as the most
	// eager provider wants.
	interval := cfg.AlipayJobsInterval
	if len(a.providers.wechatpay) > 0 && (a.providers.alipay == nil || cfg.WeChatPayJobsInterval() < interval) {
		interval = cfg.WeChatPayJobsInterval()
	}
	s.trades.Interval, s.refunds.Interval = interval, interval
	return s, nil
}

// jobs are the providers' jobs and, unless RECON_AT is off, the daily
// reconciliation (startWorkers adds the closer and the relay).
func (s *services) jobs(log *slog.Logger, a app) []service.Job {
	jobs := []service.Job{s.trades.QueryJob(), s.trades.CloseJob(), s.refunds.Job()}
	if at, on, _ := a.cfg.ReconTime(); len(s.recons) == 0 {
		log.Info("no bill to reconcile: no provider is configured")
	} else if on {
		for _, r := range s.recons.All() {
			r.At = at // WeChat Pay's not before its bill is published (service.BillPublisher)
			jobs = append(jobs, r.Job())
		}
	} else if a.dev {
		// paynotify reconcile refuses the development keys, as serve does.
		log.Info("daily reconciliation off in dev: reconcile a day with POST /admin/reconciliations/{provider}/{date}/run or the console's Reconciliation page")
	} else {
		log.Warn("daily reconciliation off (RECON_AT=off): run paynotify reconcile from cron instead")
	}
	return jobs
}

// close lets go of what the services hold open (the Redis guard).
func (s *services) close() {
	if s.locker != nil {
		s.locker.Close()
	}
}

// newRoutes is the HTTP surface over s: the API, /admin, the console and
// a's extra mounts.
func newRoutes(log *slog.Logger, a app, s *services, rl *reloader, reg *prometheus.Registry, m *metrics.Metrics) (http.Handler, error) {
	cfg, store := a.cfg, a.store
	var verifier handler.Verifier // nil: no /alipay/notify
	switch {
	case a.verifier != nil:
		verifier = a.verifier
	case a.providers.alipay != nil && rl != nil:
		verifier = alipayNotices{rl}
	case a.providers.alipay != nil:
		verifier = a.providers.alipay
	}
	var weChat handler.WeChatPayVerifier // nil: /wechatpay/notify is off
	switch {
	case a.weChatNotice != nil:
		weChat = a.weChatNotice
	case len(a.providers.wechatpay) > 0 && rl != nil:
		weChat = weChatNotices{rl}
	case len(a.providers.wechatpay) > 0:
		weChat = a.providers.wechatpay
	}
	dashboard, queues, lookup := service.NewDashboard(store), service.NewQueues(store), service.NewLookup(store)
	dashboard.Accounts = s.recons.Accounts() // the overview shows the configured accounts' runs
	var cons http.Handler
	cdeps := console.Deps{
		Log: log, Dashboard: dashboard, Queues: queues, Lookup: lookup, Sessions: service.NewSessions(store, cfg.ConsoleSessionTTL),
		Refunds: s.refunds, BillReconcilers: s.recons, Operators: cfg.Operators, AdminToken: cfg.AdminToken, Metrics: m,
		Webhooks: s.webhooks, SecureCookies: strings.HasPrefix(cfg.PublicURL, "https://"), PublicHost: publicHost(cfg.PublicURL),
	}
	if cdeps.Enabled() {
		c, err := console.New(cdeps)
		if err != nil {
			return nil, err
		}
		cons = c
	} else {
		log.Warn("console disabled: neither CONSOLE_OPERATORS nor ADMIN_TOKEN is set")
	}
	// Any other provider's adapter that serves its notifications
	// (handler.Notifier) gets POST /notify/{provider}: the line that
	// added it to the providers is its wiring.
	notifiers := map[model.Provider]handler.Notifier{}
	for p, gw := range s.providers {
		if nf, ok := gw.(handler.Notifier); ok {
			notifiers[p] = nf
		}
	}
	h := handler.New(handler.Deps{
		Log:             log,
		Verifier:        verifier,
		WeChatPay:       weChat,
		Notifiers:       notifiers,
		Payments:        s.payments,
		Orders:          service.NewOrders(store),
		Checkout:        s.checkout,
		Refunds:         s.refunds,
		BillReconcilers: s.recons,
		JWTSecret:       []byte(cfg.APIJWTSecret),
		AdminToken:      cfg.AdminToken,
		Dashboard:       dashboard,
		Queues:          queues,
		Lookup:          lookup,
		Console:         cons,
		Webhooks:        s.webhooks,
		DB:              store,
		Reloader:        reloaderOf(rl),
		Registry:        reg,
		Metrics:         m,
		NotifyTimeout:   cfg.NotifyTimeout,
		APITimeout:      cfg.APITimeout,
		TrustedProxies:  cfg.TrustedProxies,
	})
	if len(a.mounts) > 0 {
		mux := http.NewServeMux()
		for prefix, m := range a.mounts {
			mux.Handle(prefix+"/", http.StripPrefix(prefix, m))
		}
		mux.Handle("/", h)
		h = mux
	}
	return h, nil
}

// reloaderOf is rl as the HTTP surface's Reloader: none (not a nil
// pointer in an interface) when there is no reload.
func reloaderOf(rl *reloader) handler.Reloader {
	if rl == nil {
		return nil
	}
	return rl
}

// serveHTTP serves h on a's listener (or HTTP_ADDR) until ctx ends, then
// lets requests in flight finish within config.ShutdownGrace.
func serveHTTP(ctx context.Context, log *slog.Logger, env environment, a app, h http.Handler) error {
	ln := a.ln
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", a.cfg.HTTPAddr); err != nil {
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
