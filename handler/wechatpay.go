package handler

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// weChatDeadline bounds the work on one WeChat Pay notification: WeChat
// Pay waits 5 s for the answer, then counts the notification failed.
const weChatDeadline = 4 * time.Second

// WeChatPayVerifier checks that a notification was signed by WeChat Pay
// for this merchant, decrypts it and checks what it says
// (wechatpay.Provider).
type WeChatPayVerifier interface {
	Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error)
}

// WeChatPay serves WeChat Pay's notifications.
type WeChatPay struct {
	verifier WeChatPayVerifier
	metrics  *metrics.Metrics
	payments *service.Payments
	refunds  *service.Refunds // nil: refunds are not handled here
	timeout  time.Duration
}

// Notify handles POST /wechatpay/notify. WeChat Pay reads only the HTTP
// status: 204 (no body) when recorded; 4xx/5xx with
// {"code":"FAIL","message":…} when not, and it sends again
// (15s, 15s, 30s, 3m, … over 24 h).
func (w *WeChatPay) Notify(c *gin.Context) {
	start := time.Now()
	outcome, err := w.notify(c)
	answer := metrics.AnswerSuccess
	defer func() {
		w.metrics.Notified(model.ProviderWechatpay, outcome, answer, time.Since(start))
	}()
	if err != nil {
		// Refused: WeChat Pay sends it again, but not a signature probe,
		// which is no notification and is refused as it must be.
		answer = metrics.AnswerFailure
		if errors.Is(err, model.ErrSignatureProbe) {
			answer = ""
		}
		if errors.Is(err, model.ErrUnknownApp) {
			w.metrics.NotifyRefused(model.ProviderWechatpay, metrics.RefusedUnknownApp)
		}
		row := notifyRefused(c, model.ProviderWechatpay, err)
		outcome = row.outcome
		writeWeChatFail(c, row.status, row.words()) // a sentinel's words only: never internal text
		return
	}
	logAlso(c, slog.String("outcome", outcome))
	c.Status(http.StatusNoContent)
}

func (w *WeChatPay) notify(c *gin.Context) (string, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), w.timeout)
	defer cancel()
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxNotifyBody)
	body, err := readBody(c.Request)
	if err != nil {
		return "", bodyError(err)
	}
	n, err := w.verifier.Notice(ctx, c.Request.Header, body)
	if err != nil {
		return "", err
	}
	logAlso(c, slog.String("provider", string(model.ProviderWechatpay)), slog.String("notify_id", n.ID))
	if n.RefundNo != "" {
		// Money going back is never a payment: the notice only hurries
		// the refund worker, which confirms by query.
		if w.refunds != nil {
			if err := w.refunds.Notified(ctx, n.RefundNo); err != nil {
				return "", err
			}
		}
		logAlso(c, slog.String("out_refund_no", n.RefundNo))
		return "refund_notice", nil
	}
	if n.Payment.TradeNo == "" {
		return "", errors.New("wechatpay notice with neither a payment nor a refund")
	}
	pay, outcome, err := w.payments.Observe(ctx, n.Payment)
	if err != nil {
		return "", err
	}
	logAlso(c, slog.String("out_trade_no", n.Payment.OutTradeNo), slog.String("trade_no", n.Payment.TradeNo),
		slog.String("amount", n.Payment.Amount.StringFixed(2)), slog.String("state", string(pay.State)), slog.String("reason", string(pay.Reason)))
	return string(outcome), nil
}

// writeWeChatFail answers WeChat Pay with status and {"code":"FAIL",
// "message":msg}, the one shape of every refusal on its path.
func writeWeChatFail(c *gin.Context, status int, msg string) {
	c.Abort()
	writeJSON(c, status, gin.H{"code": "FAIL", "message": msg})
}
