package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"github.com/gin-gonic/gin"

	"paynotify/model"
)

// What reading a request's body can end in, on every surface: bodyError
// says which.
var (
	// errBodyTooLarge: the body is over the surface's cap.
	errBodyTooLarge = errors.New("body too large")
	// errBodyTimeout: the body did not arrive before the server's read
	// deadline.
	errBodyTimeout = errors.New("body not received in time")
	// errBadBody: the body ended early, or is not what the surface reads
	// (a form that does not parse).
	errBadBody = errors.New("unreadable body")
)

// bodyError is err, from reading or parsing a request's body, as one of
// the body errors above; the cause stays wrapped for the log.
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: over %d bytes", errBodyTooLarge, tooLarge.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return fmt.Errorf("%w: %w", errBadBody, err)
}

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
	// The body itself, before anything reads what it says.
	{errBodyTooLarge, "bad_form", slog.LevelWarn, http.StatusRequestEntityTooLarge, "body_too_large", 0},
	{errBodyTimeout, "bad_form", slog.LevelWarn, http.StatusRequestTimeout, "body_timeout", 0},
	{errBadBody, "bad_form", slog.LevelWarn, http.StatusBadRequest, "invalid_request", 0},
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
	// The reloader has logged it at ERROR, naming the problem.
	{model.ErrConfigRefused, "", slog.LevelWarn, http.StatusUnprocessableEntity, "config_refused", 0},
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

// internalRow answers every error the table does not list.
var internalRow = errorRow{outcome: "error", level: slog.LevelError, status: http.StatusInternalServerError, code: "internal"}

// words is what a client may read of an error of row r when its wrapped
// text is not for them (a driver's, the network's): the sentinel's own
// words, or "internal error" for an error the table does not list.
func (r errorRow) words() string {
	if r.err == nil {
		return "internal error"
	}
	return r.err.Error()
}

// wordsOnly reports whether a client sees only r's words for err, never
// err's text: an internal error, an outage (the text is the driver's), a
// retry, a body that timed out (the text is the network's).
func (r errorRow) wordsOnly(err error) bool {
	return r.err == nil || r.status >= 500 || errors.Is(err, model.ErrRetryable) || r.err == errBodyTimeout
}

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
	p := model.ProviderOf(err).OrDefault()
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

// notifyRefused logs a refused notification of provider once, with its
// cause, and returns its row: the outcome to count and the status the
// surface answers (each in its own shape).
func notifyRefused(c *gin.Context, provider model.Provider, err error) errorRow {
	row, _ := lookup(err)
	logger(c).Log(c.Request.Context(), row.level, "notification refused", "provider", string(provider), "outcome", row.outcome, "err", err)
	return row
}

// apiError answers an API request with the table's status and code. The
// message is ours for domain errors, and a fixed phrase otherwise.
func apiError(c *gin.Context, err error) {
	row, _ := lookup(err)
	msg := err.Error()
	if row.wordsOnly(err) {
		msg = row.words()
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
