package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"paynotify/alipay"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

// reloader puts a new reading of the providers' configuration in force
// without a restart (SIGHUP, POST /admin/reload): PROVIDERS_FILE and
// every key file it names, or the ALIPAY_*/WECHATPAY_* variables' key
// files, read and checked as at start. All is built before anything is
// swapped, so a bad file changes nothing; a good one replaces every app's
// adapter and both providers' notification verifiers. A request reads
// them once, so a notification in flight finishes on the configuration it
// began with. One reload at a time.
//
// A reload may change keys and apps; turning a provider on or off, or
// adding, removing or reordering its accounts, needs a restart: the
// routes, and each account's reconciliation and its job, are wired at
// start, and the first account owns the rows written before the ledger
// knew accounts.
type reloader struct {
	mu      sync.Mutex
	environ []string
	log     *slog.Logger
	metrics *metrics.Metrics
	store   *dao.Store
	// sets are the AppSets every use case reads: swapped in place.
	sets service.Providers
	// alipay and wechatpay verify notifications (nil: the provider is off).
	alipay    atomic.Pointer[alipay.Apps]
	wechatpay atomic.Pointer[wechatpay.Merchants]
}

// newReloader is the reloader of a's providers, whose sets the use cases
// were given.
func newReloader(log *slog.Logger, environ []string, a app, m *metrics.Metrics) *reloader {
	r := &reloader{environ: environ, log: log, metrics: m, store: a.store, sets: a.providers.sets}
	r.put(a.providers)
	return r
}

// put puts next's notification verifiers in force (read refuses a
// provider turned on or off).
func (r *reloader) put(next registry) {
	if next.alipay != nil {
		r.alipay.Store(next.alipay)
	}
	if len(next.wechatpay) > 0 {
		r.wechatpay.Store(&next.wechatpay)
	}
}

// onHangup reloads on every SIGHUP until ctx ends.
func (r *reloader) onHangup(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_, _ = r.reload(ctx, "SIGHUP", "")
		}
	}
}

// ReloadAsked is POST /admin/reload: a reload audited as the admin API's.
func (r *reloader) ReloadAsked(ctx context.Context, note string) ([]service.App, error) {
	return r.reload(ctx, model.OperatorAdminAPI, note)
}

// reload reads the configuration again and puts it in force, or says
// why not (model.ErrConfigRefused) and changes nothing. by is who asked:
// the admin API's reload is audited before it is put in force.
func (r *reloader) reload(ctx context.Context, by, note string) ([]service.App, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, file, err := r.read()
	if err != nil {
		err = fmt.Errorf("%w: %w", model.ErrConfigRefused, err)
		r.log.Error("configuration reload refused: nothing changed", "by", by, "err", err)
		r.metrics.ConfigReloaded(false, time.Time{})
		return nil, err
	}
	before, after := inForce(r.sets), inForce(next.sets)
	// admin_audit's target_id names the form, not the path (which might
	// not fit it); the log names the path.
	target := "environment"
	if file != "" {
		target = "PROVIDERS_FILE"
	}
	if by == model.OperatorAdminAPI {
		err := r.store.InsertAudit(ctx, model.Audit{Key: "api-reload-" + uuid.NewString(), Operator: by, Action: model.AuditConfigReload,
			TargetKind: model.TargetConfig, TargetID: target, Before: summary(before), After: summary(after), Note: note})
		if err != nil {
			return nil, fmt.Errorf("audit the reload (nothing changed): %w", err)
		}
	}
	for p, set := range r.sets {
		set.(*service.AppSet).Swap(next.sets[p].(*service.AppSet))
	}
	r.put(next)
	r.metrics.ConfigReloaded(true, time.Now())
	r.log.Info("configuration reloaded", "by", by, "from", target, "providers_file", file, "apps", summary(after))
	return after, nil
}

// read builds every provider of the configuration as it is now, checked
// as at start and against what a reload may change; file is
// PROVIDERS_FILE's path ("": the environment form).
func (r *reloader) read() (registry, string, error) {
	cfg, pc, err := loadConfig(r.environ)
	file := cfg.ProvidersFile
	if err != nil {
		return registry{}, file, err
	}
	next, err := newRegistry(cfg, pc)
	if err != nil {
		return registry{}, file, err
	}
	var problems []error
	for _, p := range model.Providers() {
		now, was := next.sets[p], r.sets[p]
		switch {
		case now == nil && was == nil:
		case now == nil:
			problems = append(problems, fmt.Errorf("%s is no longer configured: turning a provider off needs a restart", p))
		case was == nil:
			problems = append(problems, fmt.Errorf("%s is newly configured: turning a provider on needs a restart", p))
		default:
			a, b := accounts(was), accounts(now)
			if !slices.Equal(a, b) {
				problems = append(problems, fmt.Errorf("%s's accounts are %s, were %s: each is reconciled by a job wired at start, and the first owns the rows that name no account, so adding, removing or reordering accounts needs a restart (keys, and the apps after each account's first, reload)",
					p, strings.Join(b, ", "), strings.Join(a, ", ")))
				continue
			}
			before, after := firstApps(was), firstApps(now)
			for _, account := range a {
				if before[account] != after[account] {
					problems = append(problems, fmt.Errorf("%s account %s's first app is %s, was %s: the rows that name no app are that app's, so replacing, removing or reordering an account's first app needs a restart (apps added after it reload)",
						p, account, after[account], before[account]))
				}
			}
		}
	}
	if len(problems) > 0 {
		return registry{}, file, config.Join(problems...)
	}
	return next, file, nil
}

// firstApps are the first app id of each account of a provider's set:
// the app of its rows that name none (service.AppSet.App).
func firstApps(set service.Provider) map[string]string {
	first := map[string]string{}
	for _, a := range set.(*service.AppSet).Apps() {
		if _, ok := first[a.Account]; !ok {
			first[a.Account] = a.ID
		}
	}
	return first
}

// accounts are the accounts of a provider's set, in order.
func accounts(set service.Provider) []string {
	var ids []string
	for _, a := range set.(*service.AppSet).Apps() {
		if !slices.Contains(ids, a.Account) {
			ids = append(ids, a.Account)
		}
	}
	return ids
}

// inForce are the apps of sets, provider by provider.
func inForce(sets service.Providers) []service.App {
	var apps []service.App
	for _, p := range sets.Names() {
		apps = append(apps, sets[p].(*service.AppSet).Apps()...)
	}
	return apps
}

// summary names apps by provider, account, id and name, for the log and
// the audit row: "alipay 2088…/2021…(web)".
func summary(apps []service.App) string {
	var parts []string
	for _, a := range apps {
		s := fmt.Sprintf("%s %s/%s", a.Provider, a.Account, a.ID)
		if a.Name != "" {
			s += "(" + a.Name + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// alipayNotices verifies Alipay's notifications with the apps in force.
type alipayNotices struct{ r *reloader }

// ReadNotification is the apps' in force (alipay.Apps).
func (v alipayNotices) ReadNotification(ctx context.Context, form url.Values) (model.Notice, error) {
	return v.r.alipay.Load().ReadNotification(ctx, form)
}

// weChatNotices verifies WeChat Pay's notifications with the merchants'
// keys in force.
type weChatNotices struct{ r *reloader }

// Notice is the merchants' in force (wechatpay.Merchants).
func (v weChatNotices) Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error) {
	return v.r.wechatpay.Load().Notice(ctx, h, body)
}
