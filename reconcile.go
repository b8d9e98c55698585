package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"paynotify/alipay"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
)

const reconcileUsage = `usage: paynotify reconcile [-date yyyy-MM-dd]

Reconciles one Beijing day of the ledger against Alipay's trade bill
(default: yesterday in Beijing): fetches the bill, repairs what it proves
we missed, records every difference, prints the run as JSON and exits 0
only when the run succeeded and left nothing unresolved — 1 when it
failed, found differences, or another instance holds the date — so cron
and CI can alert. Configuration comes from the environment, as for serve.
`

// reconcileCmd runs one reconciliation and reports it by exit status.
func reconcileCmd(ctx context.Context, env environment) error {
	fs := newFlags("reconcile", reconcileUsage)
	date := fs.String("date", "", "the Beijing day to reconcile, yyyy-MM-dd (default: yesterday)")
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
		return usageError{fmt.Errorf("reconcile: -date: %v", err)}
	}
	cfg, err := config.Load(env.environ)
	acfg, aerr := alipay.FromConfig(cfg, devKeys())
	if err := config.Join(err, aerr); err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	client, err := alipay.New(acfg)
	if err != nil {
		return err
	}
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := schemaCurrent(ctx, store); err != nil {
		return err
	}
	recon := service.NewBillReconciler(store, alipay.NewProvider(client, "", ""), service.NewPayments(store), log)
	run, err := recon.Run(ctx, *date)
	if err != nil {
		return err
	}
	return reportRun(env, run)
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
		return fmt.Errorf("reconciliation of %s found %d unresolved differences (GET /admin/reconciliations/%s)", run.BillDate, run.Unresolved, run.BillDate)
	}
	return nil
}
