package handler

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// maxNotifyBody caps a notification body; a real one is a few KB.
const maxNotifyBody = 64 << 10

// Alipay's notify protocol: the body of the answer is exactly one of these.
const (
	answerSuccess = "success" // processed: stop resending
	answerFailure = "failure" // resend on Alipay's schedule
)

// Verifier checks that a notification form was signed by Alipay for this
// merchant.
type Verifier interface {
	VerifyNotification(ctx context.Context, form url.Values) error
}

// Alipay serves Alipay's asynchronous notifications.
type Alipay struct {
	verifier Verifier
	payments *service.Payments
	refunds  *service.Refunds // nil: refunds are not handled here
	metrics  *metrics
	timeout  time.Duration
}

// Notify handles POST /alipay/notify. Only the form body counts: a query
// string on the notify URL is not signed.
func (a *Alipay) Notify(c *gin.Context) {
	start := time.Now()
	outcome, err := a.notify(c)
	answer := answerSuccess
	if err != nil {
		outcome, answer = notifyFailure(c, err)
	}
	a.metrics.notifications.WithLabelValues(outcome).Inc()
	a.metrics.latency.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(answer))
}

func (a *Alipay) notify(c *gin.Context) (string, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), a.timeout)
	defer cancel()

	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxNotifyBody)
	if err := c.Request.ParseForm(); err != nil {
		return "", errBadForm{err}
	}
	form := c.Request.PostForm
	if err := a.verifier.VerifyNotification(ctx, form); err != nil {
		return "", err
	}
	n, err := model.ParseNotification(form.Get)
	if err != nil {
		return "", err
	}
	logAlso(c, "notify_id", n.NotifyID, "trade_status", n.TradeStatus)
	for _, d := range n.Dropped {
		logger(c).Warn("notification field dropped", "field", d)
	}
	if n.IsRefund() {
		// Money going back is never a payment. The refund worker confirms
		// it by query; the notice only hurries it.
		if a.refunds != nil && model.ValidID(n.OutBizNo) {
			if err := a.refunds.Notified(ctx, n.OutBizNo); err != nil {
				return "", err
			}
		}
		logAlso(c, "outcome", "refund_notice", "out_biz_no", n.OutBizNo, "refund_fee", n.RefundFee)
		return "refund_notice", nil
	}
	if !n.TradeStatus.Paid() {
		// WAIT_BUYER_PAY, TRADE_CLOSED: no money moved. Closes and refunds
		// are confirmed by query, never taken from a notification alone.
		logAlso(c, "outcome", "ignored")
		return "ignored", nil
	}
	pay, outcome, err := a.payments.Observe(ctx, n)
	if err != nil {
		return "", err
	}
	logAlso(c, "outcome", outcome, "out_trade_no", n.OutTradeNo,
		"trade_no", n.TradeNo, "amount", n.TotalAmount.StringFixed(2), "state", pay.State, "reason", pay.Reason)
	return string(outcome), nil
}
