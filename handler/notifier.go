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

// Notifier is the notification endpoint of a provider that has no route
// of its own here (Alipay's and WeChat Pay's have theirs): POST
// /notify/{provider}, mounted for every adapter that implements it. The
// adapter reads its provider's notification (Notice, as
// wechatpay.Provider does) and writes the answer its protocol wants
// (Answer): refused nil when the notice was taken; otherwise an error
// whose text is fit for the provider's eyes (a sentinel's words, never
// internal text), and the provider sends the notification again.
type Notifier interface {
	Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error)
	Answer(w http.ResponseWriter, status int, refused error)
}

// notifyRoute serves one provider's POST /notify/{provider}: what the
// WeChat Pay route does, with the provider's own answer.
type notifyRoute struct {
	provider model.Provider
	notices  Notifier
	payments *service.Payments
	refunds  *service.Refunds // nil: refunds are not handled here
	metrics  *metrics.Metrics
	timeout  time.Duration
}

// Notify handles the notification and has the adapter answer it: 200
// when taken, the error table's status when refused.
func (n *notifyRoute) Notify(c *gin.Context) {
	start := time.Now()
	outcome, err := n.notify(c)
	answer, status := metrics.AnswerSuccess, http.StatusOK
	var refused error
	if err != nil {
		if errors.Is(err, model.ErrUnknownApp) {
			n.metrics.NotifyRefused(n.provider, metrics.RefusedUnknownApp)
		}
		row := notifyRefused(c, n.provider, err)
		answer, outcome, status, refused = metrics.AnswerFailure, row.outcome, row.status, errors.New(row.words())
	}
	n.metrics.Notified(n.provider, outcome, answer, time.Since(start))
	logAlso(c, slog.String("outcome", outcome))
	c.Abort()
	n.notices.Answer(c.Writer, status, refused)
}

func (n *notifyRoute) notify(c *gin.Context) (string, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), n.timeout)
	defer cancel()
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxNotifyBody)
	body, err := readBody(c.Request)
	if err != nil {
		return "", bodyError(err)
	}
	notice, err := n.notices.Notice(ctx, c.Request.Header, body)
	if err != nil {
		return "", err
	}
	logAlso(c, slog.String("provider", string(n.provider)), slog.String("notify_id", notice.ID))
	for _, d := range notice.Dropped {
		logger(c).Warn("notification field dropped", "field", d)
	}
	if notice.Refund || notice.RefundNo != "" {
		// Money going back is never a payment: the notice only hurries
		// the refund worker, which confirms by query.
		if n.refunds != nil && notice.RefundNo != "" {
			if err := n.refunds.Notified(ctx, notice.RefundNo); err != nil {
				return "", err
			}
		}
		return "refund_notice", nil
	}
	if notice.Payment.TradeNo == "" {
		return "ignored", nil // no money moved
	}
	p := notice.Payment
	if p.Provider != n.provider {
		return "", errors.New("a notice of " + string(n.provider) + " observed as " + string(p.Provider) + "'s")
	}
	pay, outcome, err := n.payments.Observe(ctx, p)
	if err != nil {
		return "", err
	}
	logAlso(c, slog.String("out_trade_no", p.OutTradeNo), slog.String("trade_no", p.TradeNo),
		slog.String("amount", p.Amount.StringFixed(2)), slog.String("state", string(pay.State)), slog.String("reason", string(pay.Reason)))
	return string(outcome), nil
}
