package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"

	"paynotify/alipay"
	"paynotify/broker"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/internal/asynclog"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

// loadConfig reads the configuration, serve's and reconcile's, with every
// problem at once: the general settings' and each provider's. A provider
// is on when its variables are set; with none set, Alipay's are named as
// missing, as before WeChat Pay.
func loadConfig(environ []string) (config.Config, providerConfig, error) {
	cfg, err := config.Load(environ)
	var pc providerConfig
	alipayOn := cfg.AlipayOn() || !cfg.WeChatPay.On()
	if cfg.Accounts != nil { // PROVIDERS_FILE: what it lists
		alipayOn = len(cfg.Accounts.Alipay) > 0
		for _, m := range cfg.Accounts.WeChatPay {
			pc.weChatApps = append(pc.weChatApps, m.Apps)
		}
	} else if cfg.ProvidersFile != "" {
		alipayOn = false // unreadable: Load names why
	}
	var aerr, werr error
	if alipayOn {
		pc.alipay, aerr = alipay.FromConfigApps(cfg, devKeys())
	}
	pc.wechatpay, _, werr = wechatpay.FromConfigAll(cfg, devKeys())
	var herr, kerr error
	if key, _ := cfg.Webhook.Key(); key == devWebhookKey {
		herr = errors.New("WEBHOOK_SECRET_KEY is paynotify dev's public key: make one with openssl rand -base64 32")
	}
	for _, w := range pc.wechatpay {
		if w.APIv3Key == devWeChatAPIv3Key || slices.Contains(w.OldAPIv3Keys, devWeChatAPIv3Key) {
			kerr = errors.New("WECHATPAY_APIV3_KEY is paynotify dev's public key: set the merchant's own (WeChat Pay's merchant platform, API security)")
		}
	}
	return cfg, pc, config.Join(err, cfg.Providers(), aerr, werr, herr, kerr)
}

// serve runs the service as an operator deploys it.
func serve(ctx context.Context, env environment) error {
	if err := parseFlags(newFlags("serve", serveUsage), env, 0); err != nil {
		return err
	}
	cfg, pc, err := loadConfig(env.environ)
	if err != nil {
		return err
	}
	// Log lines leave from a goroutine of their own, batched: no request
	// waits for stderr (dropped and counted if it cannot keep up).
	logOut := asynclog.New(env.stderr, asynclog.DefaultLimit, asynclog.DefaultLinger)
	defer logOut.Close()
	log := newLogger(logOut, cfg.LogLevel, true)
	log.Info("starting", "config", cfg)
	if env.limitMemory != nil {
		log.Info("soft memory limit", "mib", env.limitMemory(memoryLimit(cfg.NotifyDuplicateCache))>>20)
	}
	a := app{cfg: cfg, logDropped: logOut.Dropped}
	if a.providers, err = newRegistry(cfg, pc); err != nil {
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

// auditEraseWarning is what serve and migrate log for a database user
// holding DROP: admin_audit's guard does not hold against it.
const auditEraseWarning = "this database user holds DROP, so it can erase the audit trail (SET FOREIGN_KEY_CHECKS=0; TRUNCATE TABLE admin_audit empties admin_audit whatever its guard): if serve runs as this user, give it only " + auditGrants

// warnAuditGrants says so when the store's user can empty admin_audit
// (it holds DROP): migrate's user needs DROP, serve's must not have it.
func warnAuditGrants(ctx context.Context, log *slog.Logger, store *dao.Store) {
	can, err := store.CanTruncateAudit(ctx)
	switch {
	case err != nil:
		log.Warn("could not read this database user's grants; serve's user needs only "+auditGrants, "err", err)
	case can:
		log.Warn(auditEraseWarning)
	}
}

// newLogger logs JSON for machines (serve) or text for people (dev).
// The MySQL driver's own reports go to it too (dao.RouteDriverLog).
func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: readableDuration}
	log := slog.New(slog.NewTextHandler(w, opts))
	if json {
		log = slog.New(slog.NewJSONHandler(w, opts))
	}
	dao.SetDriverLogger(log)
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
	// Consume says "consumer running" once it consumes: not before NATS
	// answers.
	acct := service.NewAccounting(store)
	acct.First = firstAccounts(cfg)
	return b.Consume(ctx, accountingDurable, service.AccountingEvents, acct.Book)
}

// firstAccounts are each provider's first account, as cfg names it
// (PROVIDERS_FILE's first seller and merchant, or ALIPAY_SELLER_ID and
// WECHATPAY_MCHID): the journal books its money to the provider's
// clearing account itself, another account's to a sub-account.
func firstAccounts(cfg config.Config) map[model.Provider]string {
	if a := cfg.Accounts; a != nil {
		first := map[model.Provider]string{}
		if len(a.Alipay) > 0 {
			first[model.ProviderAlipay] = a.Alipay[0].SellerID
		}
		if len(a.WeChatPay) > 0 {
			first[model.ProviderWechatpay] = a.WeChatPay[0].MchID
		}
		return first
	}
	return map[model.Provider]string{model.ProviderAlipay: cfg.SellerID, model.ProviderWechatpay: cfg.WeChatPay.MchID}
}

// publicHost is the host of PUBLIC_URL, or "".
func publicHost(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return ""
	}
	return u.Host
}
