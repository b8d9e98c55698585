package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"paynotify/model"
)

// errBadForm: the body was not a form, or too large.
type errBadForm struct{ err error }

func (e errBadForm) Error() string { return "unreadable form: " + e.err.Error() }

// errorRow says how the service answers one kind of error: to Alipay (a
// notification always fails with "failure", Alipay resends; the rows differ
// in how they are logged and counted) and to API clients (status, code).
type errorRow struct {
	err error
	// outcome is the metric label and log word for a notification.
	outcome string
	level   slog.Level
	status  int
	code    string
	// retryAfter, in seconds, tells an API client to retry the same request.
	retryAfter int
}

// errorTable is the one place that maps domain errors to answers. Domain
// errors carry messages we wrote, so API clients see them; anything not in
// the table is an internal error whose text stays in the log.
var errorTable = []errorRow{
	{model.ErrBadSignature, "bad_signature", slog.LevelWarn, http.StatusBadRequest, "bad_signature", 0},
	{model.ErrWrongMerchant, "wrong_merchant", slog.LevelWarn, http.StatusBadRequest, "wrong_merchant", 0},
	{model.ErrInvalidNotification, "invalid", slog.LevelWarn, http.StatusBadRequest, "invalid_notification", 0},
	{model.ErrOrderNotFound, "order_not_found", slog.LevelWarn, http.StatusNotFound, "order_not_found", 0},
	// Alipay never binds one trade to two orders: someone should look.
	{model.ErrTradeConflict, "trade_conflict", slog.LevelError, http.StatusConflict, "trade_conflict", 0},
	{model.ErrInvalidRequest, "invalid", slog.LevelInfo, http.StatusBadRequest, "invalid_request", 0},
	{model.ErrIdempotencyKeyReused, "", slog.LevelInfo, http.StatusUnprocessableEntity, "idempotency_key_reused", 0},
	{model.ErrRequestInFlight, "", slog.LevelInfo, http.StatusConflict, "request_in_flight", 1},
	{model.ErrSKUNotFound, "", slog.LevelInfo, http.StatusUnprocessableEntity, "sku_not_found", 0},
	{model.ErrOutOfStock, "", slog.LevelInfo, http.StatusConflict, "out_of_stock", 0},
	{model.ErrCouponUnusable, "", slog.LevelInfo, http.StatusUnprocessableEntity, "coupon_not_usable", 0},
	{model.ErrInsufficientPoints, "", slog.LevelInfo, http.StatusUnprocessableEntity, "insufficient_points", 0},
	{model.ErrMemberNotFound, "", slog.LevelWarn, http.StatusUnprocessableEntity, "member_not_found", 0},
	{model.ErrOrderNotCancellable, "", slog.LevelInfo, http.StatusConflict, "order_not_cancellable", 0},
	{model.ErrOrderNotPayable, "", slog.LevelInfo, http.StatusConflict, "order_not_payable", 0},
	{model.ErrProviderOff, "provider_off", slog.LevelWarn, http.StatusUnprocessableEntity, "provider_not_configured", 0},
	{model.ErrNothingToRefund, "", slog.LevelInfo, http.StatusConflict, "nothing_to_refund", 0},
	{model.ErrRefundTooLarge, "", slog.LevelInfo, http.StatusUnprocessableEntity, "refund_too_large", 0},
	// A payment provider's answer: the codes are Alipay's, and another
	// provider's error answers its own (providerAnswer).
	{model.ErrTradeNotExist, "", slog.LevelWarn, http.StatusBadGateway, "alipay_refused", 0},
	{model.ErrTradeStatus, "", slog.LevelWarn, http.StatusBadGateway, "alipay_refused", 0},
	{model.ErrGatewayRefused, "", slog.LevelWarn, http.StatusBadGateway, "alipay_refused", 0},
	{model.ErrGatewayUnknown, "", slog.LevelWarn, http.StatusServiceUnavailable, "alipay_unavailable", 5},
	{model.ErrPaymentNotFound, "", slog.LevelInfo, http.StatusNotFound, "payment_not_found", 0},
	{model.ErrNotUnmatched, "", slog.LevelInfo, http.StatusConflict, "payment_not_unmatched", 0},
	{model.ErrRunNotFound, "", slog.LevelInfo, http.StatusNotFound, "reconciliation_not_found", 0},
	{model.ErrItemNotFound, "", slog.LevelInfo, http.StatusNotFound, "item_not_found", 0},
	{model.ErrRunBusy, "", slog.LevelInfo, http.StatusConflict, "reconciliation_running", 5},
	{model.ErrRunPurged, "", slog.LevelInfo, http.StatusConflict, "reconciliation_closed", 0},
	{model.ErrWebhooksOff, "", slog.LevelInfo, http.StatusConflict, "webhooks_off", 0},
	{model.ErrEndpointNotFound, "", slog.LevelInfo, http.StatusNotFound, "webhook_endpoint_not_found", 0},
	{model.ErrDeliveryNotFound, "", slog.LevelInfo, http.StatusNotFound, "webhook_delivery_not_found", 0},
	{model.ErrURLRefused, "", slog.LevelInfo, http.StatusBadRequest, "url_refused", 0},
	{model.ErrNotActionable, "", slog.LevelInfo, http.StatusConflict, "not_actionable", 0},
	{model.ErrRetryable, "retry", slog.LevelWarn, http.StatusConflict, "conflict_retry", 1},
	{model.ErrBusy, "busy", slog.LevelWarn, http.StatusServiceUnavailable, "unavailable", 1},
	// An outage, not a bug: the readiness check takes the instance out of
	// the load balancer, and Alipay resends.
	{model.ErrUnavailable, "db_unavailable", slog.LevelWarn, http.StatusServiceUnavailable, "unavailable", 5},
	// The request's deadline passed while it waited on something else.
	{context.DeadlineExceeded, "timeout", slog.LevelError, http.StatusServiceUnavailable, "unavailable", 5},
}

var internalRow = errorRow{outcome: "error", level: slog.LevelError, status: http.StatusInternalServerError, code: "internal"}

// gatewayAnswers are the code (after the provider's name and "_") and the
// message (with its name) of a payment provider's errors.
var gatewayAnswers = map[error]struct{ code, msg string }{
	model.ErrTradeNotExist:  {"refused", "trade does not exist at %s"},
	model.ErrTradeStatus:    {"refused", "trade state does not allow this at %s"},
	model.ErrGatewayRefused: {"refused", "%s refused the request"},
	model.ErrGatewayUnknown: {"unavailable", "%s's answer is unknown"},
}

// providerAnswer is the code and message of row, a payment provider's
// error, for the provider that answered err: alipay_refused and "Alipay
// refused the request" for Alipay's (the codes it had before WeChat Pay),
// wechatpay_refused and "WeChat Pay refused the request" for WeChat Pay's.
// An error no adapter tagged (model.ProviderOf; a test's fake provider)
// answers as Alipay's. ok is false for any other row.
func providerAnswer(row errorRow, err error) (code, msg string, ok bool) {
	g, ok := gatewayAnswers[row.err]
	if !ok {
		return "", "", false
	}
	p := model.ProviderOf(err)
	if p == "" {
		p = model.ProviderAlipay
	}
	return string(p) + "_" + g.code, fmt.Sprintf(g.msg, p.Name()), true
}

func lookup(err error) (errorRow, bool) {
	for _, r := range errorTable {
		if errors.Is(err, r.err) {
			return r, true
		}
	}
	return internalRow, false
}

// notifyFailure logs a failed notification once and names its outcome.
func notifyFailure(c *gin.Context, err error) (outcome, answer string) {
	row, _ := lookup(err)
	var bad errBadForm
	if errors.As(err, &bad) {
		row = errorRow{outcome: "bad_form", level: slog.LevelWarn}
	}
	logger(c).Log(c.Request.Context(), row.level, "notification refused", "outcome", row.outcome, "err", err)
	return row.outcome, answerFailure
}

// apiError answers an API request with the table's status and code. The
// message is ours for domain errors, and a fixed phrase otherwise.
func apiError(c *gin.Context, err error) {
	row, known := lookup(err)
	msg := err.Error()
	switch {
	case !known:
		msg = "internal error"
	case row.status >= 500 || errors.Is(err, model.ErrRetryable):
		msg = row.err.Error() // the sentinel only: the wrapped text is the driver's
	}
	if code, named, ok := providerAnswer(row, err); ok {
		row.code, msg = code, named
	}
	logger(c).Log(c.Request.Context(), row.level, "api request failed", "code", row.code, "err", err)
	if row.retryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(row.retryAfter))
	}
	writeAPIError(c, row.status, row.code, msg)
}

// writeAPIError writes {"error": {"code", "message"}} and stops the chain.
func writeAPIError(c *gin.Context, status int, code, msg string) {
	c.Abort()
	writeJSON(c, status, gin.H{"error": gin.H{"code": code, "message": msg}})
}
