package handler

import (
	"errors"
	"log/slog"

	"github.com/gin-gonic/gin"

	"paynotify/model"
)

// errBadForm: the body was not a form, or too large.
type errBadForm struct{ err error }

func (e errBadForm) Error() string { return "unreadable form: " + e.err.Error() }

// errorRow says how the service answers one kind of error.
type errorRow struct {
	err error
	// outcome is the metric label and log word for a notification.
	outcome string
	level   slog.Level
}

// errorTable is the one place that maps domain errors to answers. Every
// notification that fails is answered "failure" (Alipay resends); the
// rows differ in how loudly they are logged and counted.
var errorTable = []errorRow{
	{model.ErrBadSignature, "bad_signature", slog.LevelWarn},
	{model.ErrWrongMerchant, "wrong_merchant", slog.LevelWarn},
	{model.ErrInvalidNotification, "invalid", slog.LevelWarn},
	{model.ErrOrderNotFound, "order_not_found", slog.LevelWarn},
	// Alipay never binds one trade to two orders: someone should look.
	{model.ErrTradeConflict, "trade_conflict", slog.LevelError},
	{model.ErrRetryable, "retry", slog.LevelWarn},
	{model.ErrUnavailable, "db_unavailable", slog.LevelError},
}

// notifyFailure logs a failed notification once and names its outcome.
func notifyFailure(c *gin.Context, err error) (outcome, answer string) {
	row := errorRow{outcome: "error", level: slog.LevelError}
	var bad errBadForm
	if errors.As(err, &bad) {
		row = errorRow{outcome: "bad_form", level: slog.LevelWarn}
	}
	for _, r := range errorTable {
		if errors.Is(err, r.err) {
			row = r
			break
		}
	}
	logger(c).Log(c.Request.Context(), row.level, "notification refused", "outcome", row.outcome, "err", err)
	return row.outcome, answerFailure
}
