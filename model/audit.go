package model

import (
	"errors"
	"time"
)

// AuditAction names what an operator did.
type AuditAction string

// Operator actions, each recorded in admin_audit in the transaction that
// does it.
const (
	AuditSignIn        AuditAction = "session.sign_in"
	AuditSignOut       AuditAction = "session.sign_out"
	AuditRefundRetry   AuditAction = "refund.retry"
	AuditRefundResolve AuditAction = "refund.resolve"
	AuditOrderRefund   AuditAction = "order.refund"
	AuditPaymentRefund AuditAction = "payment.refund"
	AuditOutboxRequeue AuditAction = "outbox.requeue"
	AuditReconResolve  AuditAction = "recon.resolve"
	AuditReconRun      AuditAction = "recon.run"
	AuditWebhookCreate AuditAction = "webhook.create"
	AuditWebhookUpdate AuditAction = "webhook.update"
	AuditWebhookRotate AuditAction = "webhook.rotate"
	AuditWebhookDelete AuditAction = "webhook.delete"
	AuditWebhookResend AuditAction = "webhook.resend"
	AuditConfigReload  AuditAction = "config.reload"
)

// OperatorService is the operator admin_audit names for what paynotify
// did on its own (a webhook endpoint it disabled).
const OperatorService = "paynotify"

// AuditReconRunAsked is a recon.run row's after: what the operator did. The
// row is append-only, so it names no state of the run, which moves on.
const AuditReconRunAsked = "run asked (its outcome is on the reconciliation page)"

// RunTarget is the TargetID of an audit row about provider's run of
// billDate of account: "wechatpay/2026-11-30", "wechatpay/2026-11-30/1900012345".
func RunTarget(provider Provider, account, billDate string) string {
	if account == "" {
		return string(provider) + "/" + billDate
	}
	return string(provider) + "/" + billDate + "/" + account
}

// OperatorAdminAPI is the operator admin_audit names for a change made
// through the JSON admin API (/admin): whoever holds ADMIN_TOKEN. The
// token itself is never recorded.
const OperatorAdminAPI = "admin-api"

// What an audited action touched.
const (
	TargetOrder     = "order"
	TargetPayment   = "payment"
	TargetRefund    = "refund"
	TargetOutbox    = "outbox"
	TargetReconItem = "recon_item"
	TargetReconRun  = "recon_run"
	TargetSession   = "session"
	TargetWebhook   = "webhook_endpoint"
	// TargetConfig is the providers' configuration (PROVIDERS_FILE, or
	// the ALIPAY_*/WECHATPAY_* variables' key files).
	TargetConfig = "config"
)

// Act is who does an operator action and under which one-time key (the
// form's): the same key twice does the action once.
type Act struct {
	Operator string
	Key      string
	Note     string
}

// Audit is a row of admin_audit: one operator action, append-only.
type Audit struct {
	ID         int64
	Key        string
	Operator   string
	Action     AuditAction
	OrderID    *int64
	TargetKind string
	TargetID   string
	Before     string
	After      string
	Note       string
	CreateTime time.Time
}

// ErrAlreadyDone: this action's key was used before — the form was posted
// twice; the first post did the work, this one changed nothing.
var ErrAlreadyDone = errors.New("already done: this form was submitted before")

// ErrNotActionable: the row is not in a state this action applies to (a
// refund that is not failed, an outbox row that is not failed, …).
var ErrNotActionable = errors.New("not in a state this action applies to")

// ValidActKey reports whether key can be an action's one-time key: 16 to
// 64 letters, digits, '-' or '_'.
func ValidActKey(key string) bool {
	if len(key) < 16 || len(key) > 64 {
		return false
	}
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ErrEventNotFound: no outbox row has that sequence number.
var ErrEventNotFound = errors.New("event not found")
