package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

const reconcileUsage = `usage: paynotify reconcile [-provider alipay|wechatpay] [-date yyyy-MM-dd]

Reconciles one Beijing day of the ledger against a provider's trade bill
(default: yesterday in Beijing; every configured provider — Alipay, and
WeChat Pay when WECHATPAY_* is set — unless -provider names one): fetches
the bill, repairs what it proves we missed, records every difference,
prints each run as JSON and exits 0 only when every run succeeded and left
nothing unresolved — 1 when one failed, found differences, or another
instance holds the date — so cron and CI can alert. Configuration comes
from the environment, as for serve.
`

// reconcileCmd runs one reconciliation per provider asked for and reports
// the worst of them by exit status.
func reconcileCmd(ctx context.Context, env environment) error {
	fs := newFlags("reconcile", reconcileUsage)
	date := fs.String("date", "", "the Beijing day to reconcile, yyyy-MM-dd (default: yesterday)")
	only := fs.String("provider", "", "alipay or wechatpay (default: every configured provider)")
	if err := parseFlags(fs, env, 0); err != nil {
		return err
	}
	if *date == "" {
		*date = service.Yesterday(time.Now())
	}
	if _, err := service.ParseBillDate(*date); err != nil {
		return refuseUsage(fs, env, fmt.Errorf("-date %q: want a day as yyyy-MM-dd, such as 2026-11-30", *date))
	}
	if _, err := service.CheckBillDate(*date, time.Now()); err != nil {
		return refuseUsage(fs, env, fmt.Errorf("-date: %w", err))
	}
	if *only != "" && !slices.Contains(model.Providers, model.Provider(*only)) {
		return refuseUsage(fs, env, fmt.Errorf("-provider %q: want alipay or wechatpay", *only))
	}
	// The providers configured, as serve reads them.
	cfg, pc, err := loadConfig(env.environ)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	providers := service.Providers{}
	if pc.alipayOn {
		client, err := alipay.New(pc.alipay)
		if err != nil {
			return err
		}
		providers[model.ProviderAlipay] = alipay.NewProvider(client, "", "")
	}
	if pc.weChatOn {
		wc, err := wechatpay.New(pc.wechatpay)
		if err != nil {
			return err
		}
		providers[model.ProviderWechatpay] = wechatpay.NewProvider(wc, "")
	}
	names := providers.Names()
	if *only != "" {
		if _, ok := providers[model.Provider(*only)]; !ok {
			return fmt.Errorf("reconcile: -provider %s: %s is not configured (its variables are not set)", *only, *only)
		}
		names = []model.Provider{model.Provider(*only)}
	}
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := schemaCurrent(ctx, store); err != nil {
		return err
	}
	payments := service.NewPayments(store)
	var errs []error
	ran := 0
	for _, p := range names {
		recon := service.NewBillReconciler(store, providers[p], payments, log)
		recon.Provider = p
		if _, err := recon.CheckDate(*date); err != nil && *only == "" && len(names) > 1 {
			// Every provider was asked for, and this one has no bill of
			// the day (WeChat Pay keeps three months): the others' runs
			// decide the exit status.
			fmt.Fprintf(env.stderr, "paynotify reconcile: %s skipped: %v\n", p, err)
			continue
		}
		ran++
		run, err := recon.Run(ctx, *date)
		if err == nil {
			err = reportRun(env, run)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	if ran == 0 {
		errs = append(errs, fmt.Errorf("reconcile: no configured provider has a bill of %s", *date))
	}
	return errors.Join(errs...)
}

// reportRun prints a run and turns what it found into the exit status.
func reportRun(env environment, run model.ReconRun) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(handler.NewRunView(run)); err != nil { // the admin API's shape
		return err
	}
	switch {
	case run.State == model.ReconFailed:
		return fmt.Errorf("reconciliation of %s failed: %s", run.BillDate, run.Error)
	case run.Unresolved > 0:
		return fmt.Errorf("reconciliation of %s found %d unresolved differences (GET /admin/reconciliations/%s/%s)", run.BillDate, run.Unresolved, run.Provider, run.BillDate)
	}
	return nil
}
