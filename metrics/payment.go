package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/model"
	"paynotify/service"
)

func (m *Metrics) newPayment() {
	m.unmatched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_payments_unmatched_total",
		Help: "Verified payments whose out_trade_no names no order, recorded UNMATCHED, by provider and account: refund them (POST /admin/payments/{provider}/{trade_no}/refund).",
	}, []string{"provider", "account"})
	m.groupSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paynotify_notify_group_size",
		Help:    "Notifications applied per group transaction (group apply).",
		Buckets: []float64{2, 4, 8, 16, 32, 64},
	})
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_notify_group_fallbacks_total",
		Help: "Notifications group apply did not apply in a group transaction, by reason: run alone (duplicate_in_group, two_trades_one_order, not_eligible, alone, recorded_meanwhile, lock_wait, error, near_deadline) or answered failure (expired, busy).",
	}, []string{"reason"})
	m.refunds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paynotify_refunds_total",
		Help: "Refunds finished, by provider, account and result: refunded, or failed (refused by the provider, payment REFUND_FAILED: an operator has to look).",
	}, []string{"provider", "account", "result"})
	m.unguarded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paynotify_pay_starts_unguarded_total",
		Help: "Payment starts that ran without the Redis guard (not configured, or Redis down).",
	})
	m.reg.MustRegister(m.unmatched, m.groupSize, fallbacks, m.refunds, m.unguarded)
	// The notify path only adds to counters resolved here.
	all := service.Fallbacks()
	m.groupFallbacks = make([]prometheus.Counter, len(all))
	for _, f := range all {
		m.groupFallbacks[f] = fallbacks.WithLabelValues(f.String())
	}
}

// Providers gives each configured provider its series from the start
// (refunds refunded and failed, notifications answered and refused), so
// an alert on "failed" has a series to watch.
func (m *Metrics) Providers(providers []model.Provider) {
	for _, p := range providers {
		m.answers.WithLabelValues(string(p), AnswerSuccess)
		m.answers.WithLabelValues(string(p), AnswerFailure)
		m.refused.WithLabelValues(string(p), RefusedUnknownApp)
	}
}

// BillAccounts names the provider accounts whose reconciliation
// WatchState's gauges report, one series each: only theirs, so an account
// not configured is never alerted on.
//
// It gives each account its refunds' series from the start too (refunded
// and failed), so an alert on "failed" has a series to watch.
func (m *Metrics) BillAccounts(accounts []model.BillAccount) {
	for _, a := range accounts {
		m.refunds.WithLabelValues(string(a.Provider), a.Account, "refunded")
		m.refunds.WithLabelValues(string(a.Provider), a.Account, "failed")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accounts = slices.Clone(accounts)
}

// accountOf is the account label of provider p's account: a row written
// before the ledger knew accounts (”) is the provider's first account's.
func (m *Metrics) accountOf(p model.Provider, account string) string {
	if account != "" {
		return account
	}
	for _, a := range m.billAccounts() {
		if a.Provider == p {
			return a.Account
		}
	}
	return ""
}

// billAccounts is what BillAccounts was last given.
func (m *Metrics) billAccounts() []model.BillAccount {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.accounts
}

// PaymentUnmatched counts a payment recorded UNMATCHED (for
// service.Payments.OnUnmatched): money we hold with no order is an
// operator's to refund.
func (m *Metrics) PaymentUnmatched(p model.Payment) {
	if m != nil {
		m.unmatched.WithLabelValues(string(p.Provider), m.accountOf(p.Provider, p.Account)).Inc()
	}
}

// GroupApplied observes the size of one group transaction (for
// service.Payments.OnGroup).
func (m *Metrics) GroupApplied(applied int) {
	if m != nil {
		m.groupSize.Observe(float64(applied))
	}
}

// GroupFallback counts a notification group apply did not apply in a
// group, under its reason (for service.Payments.OnFallback).
func (m *Metrics) GroupFallback(f service.Fallback) {
	if m != nil && int(f) >= 0 && int(f) < len(m.groupFallbacks) {
		m.groupFallbacks[f].Inc()
	}
}

// RefundFinished counts a refund f (its provider and account) that ended in state to
// (for service.Refunds.OnFinished): refunded, or failed for REFUND_FAILED.
func (m *Metrics) RefundFinished(f model.Refund, to model.RefundState) {
	if m == nil {
		return
	}
	result := "refunded"
	if to == model.RefundFailed {
		result = "failed"
	}
	m.refunds.WithLabelValues(string(f.Provider), m.accountOf(f.Provider, f.Account), result).Inc()
}

// PayStartUnguarded counts a payment start that ran without the Redis
// guard (for service.Checkout.OnUnguarded).
func (m *Metrics) PayStartUnguarded() {
	if m != nil {
		m.unguarded.Inc()
	}
}
