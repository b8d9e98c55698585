package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"paynotify/dao"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
)

const reconcileUsage = `usage: paynotify reconcile [-provider alipay|wechatpay] [-account ID] [-date yyyy-MM-dd]
       paynotify reconcile -dev [-url URL] [-provider alipay|wechatpay] [-account ID] [-date yyyy-MM-dd]

Reconciles one Beijing day of the ledger against a provider account's
trade bill (default: yesterday in Beijing; every account of every
configured provider — Alipay, and WeChat Pay when WECHATPAY_* is set or
PROVIDERS_FILE lists it — unless -provider names one, and -account one of
its accounts: an Alipay seller_id, a WeChat Pay mchid): fetches
the bill, repairs what it proves we missed, records every difference,
prints each run as JSON and exits 0 only when every run succeeded and left
nothing unresolved — 1 when one failed, found differences, or another
instance holds the date — so cron and CI can alert; 2 for a command line
it cannot use (a bad -date, -provider, -account or -url). Configuration comes from the
environment, as for serve, which refuses the development keys.

With -dev it reconciles in the running paynotify dev instead — its
development keys against its fake Alipay and fake WeChat Pay, both
providers unless -provider names one — by asking it through its admin API
(POST /admin/reconciliations/{provider}/{date}/run, with ADMIN_TOKEN or
dev's paynotify-dev-admin), at -url, else the address the dev running in
this directory printed (kept in paynotify-dev.db.url while it runs), else
HTTP_ADDR, else 127.0.0.1:8080. The replay files' day is 2026-11-30:

  paynotify reconcile -dev -date 2026-11-30
  paynotify reconcile -dev -url http://127.0.0.1:8080 -date 2026-11-30   # the URL dev printed
`

// reconcileCmd runs one reconciliation per provider asked for and reports
// the worst of them by exit status.
func reconcileCmd(ctx context.Context, env environment) error {
	fs := newFlags("reconcile", reconcileUsage)
	date := fs.String("date", "", "the Beijing day to reconcile, yyyy-MM-dd (default: yesterday)")
	only := fs.String("provider", "", "alipay or wechatpay (default: every configured provider)")
	account := fs.String("account", "", "the provider account: an Alipay seller_id, a WeChat Pay mchid (default: every account)")
	inDev := fs.Bool("dev", false, "reconcile in the running paynotify dev, through its admin API (its keys, its fakes)")
	devURL := fs.String("url", "", "with -dev: the running dev's base URL, as it printed it (default: the address in paynotify-dev.db.url, else HTTP_ADDR, else "+devDefaultAddr+")")
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
	if *only != "" {
		if _, err := model.ParseProvider(*only); err != nil {
			return refuseUsage(fs, env, fmt.Errorf("-provider: %w", err)) // names the providers known
		}
	}
	if *account != "" && *only == "" {
		return refuseUsage(fs, env, fmt.Errorf("-account %q: name its provider with -provider", model.Clip(*account)))
	}
	if *devURL != "" && !*inDev {
		return refuseUsage(fs, env, errors.New("-url is the running dev's address: it goes with -dev"))
	}
	if *devURL != "" {
		if u, err := url.Parse(*devURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return refuseUsage(fs, env, fmt.Errorf("-url %q: want the base URL dev printed, such as http://127.0.0.1:8080", *devURL))
		}
	}
	if *inDev {
		base := strings.TrimRight(*devURL, "/")
		if base == "" {
			base = devBaseURL(env.environ)
		}
		return reconcileInDev(ctx, env, base, *only, *account, *date)
	}
	// The providers configured, read and built as serve's.
	cfg, pc, err := loadConfig(env.environ)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogLevel, true)
	reg, err := newRegistry(cfg, pc)
	if err != nil {
		return err
	}
	providers := reg.sets
	if *only != "" {
		if _, ok := providers[model.Provider(*only)]; !ok {
			return fmt.Errorf("reconcile: -provider %s: %s is not configured (its variables are not set)", *only, *only)
		}
	}
	store, err := dao.Open(ctx, cfg.DBDriver, cfg.DBDSN, dao.Options{MaxOpenConns: cfg.DBMaxOpenConns})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := schemaCurrent(ctx, store); err != nil {
		return err
	}
	recons := service.NewReconcilers(store, providers, service.NewPayments(store, service.PaymentsLog(log)), log)
	runs := recons.All()
	if *only != "" {
		runs = recons[model.Provider(*only)]
	}
	if *account != "" {
		r, err := recons.Of(model.Provider(*only), *account)
		if err != nil {
			return refuseUsage(fs, env, fmt.Errorf("-account: %w", err))
		}
		runs = []*service.BillReconciler{r}
	}
	var errs []error
	ran := 0
	for _, recon := range runs {
		p := recon.Of()
		if _, err := recon.CheckDate(*date); err != nil && *only == "" && len(runs) > 1 {
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
	return reportView(env, handler.NewRunView(run)) // the admin API's shape
}

// reportView prints a run as the admin API shows it and turns what it
// found into the exit status.
func reportView(env environment, v handler.RunView) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	switch {
	case v.State == string(model.ReconFailed):
		return fmt.Errorf("reconciliation of %s failed: %s", v.BillDate, v.Error)
	case v.State == string(model.ReconRunning):
		return fmt.Errorf("reconciliation of %s is still running (GET /admin/reconciliations/%s/%s)", v.BillDate, v.Provider, v.BillDate)
	case v.Unresolved > 0:
		return fmt.Errorf("reconciliation of %s found %d unresolved differences (GET /admin/reconciliations/%s/%s)", v.BillDate, v.Unresolved, v.Provider, v.BillDate)
	}
	return nil
}

// reconcileInDev asks the dev running at base to reconcile date for
// provider (or both) — for account, or the provider's only one — through
// its admin API, and reports each run as reconcile does.
func reconcileInDev(ctx context.Context, env environment, base, provider, account, date string) error {
	token := envValue(env.environ, "ADMIN_TOKEN")
	if token == "" {
		token = devAdminToken
	}
	names := model.Providers()
	if provider != "" {
		names = []model.Provider{model.Provider(provider)}
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	var errs []error
	for _, p := range names {
		target := base + "/admin/reconciliations/" + string(p) + "/" + date + "/run"
		if account != "" {
			target += "?account=" + url.QueryEscape(account)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("reconcile -dev: no paynotify dev answers at %s (start go run . dev, or give -url the address it printed): %w", base, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
			errs = append(errs, fmt.Errorf("%s: dev at %s answered %s: %s", p, base, resp.Status, bytes.TrimSpace(body)))
			continue
		}
		var v handler.RunView
		if err := json.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("%s: dev's answer %q: %w", p, body, err)
		}
		if err := reportView(env, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
