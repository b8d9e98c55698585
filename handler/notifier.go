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

// notices reads a provider's notification into the ledger's terms
// (WeChatPayVerifier, Notifier).
type notices interface {
	Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error)
}

// notifyRoute serves the notifications of one provider whose notice is
// read whole by its adapter (WeChat Pay's, and every Notifier's): the one
// flow from a notice to the ledger, answered in the provider's protocol.
type notifyRoute struct {
	provider model.Provider
	notices  notices
	// answer writes the provider's answer: refused nil when the notice
	// was taken, else its error's words, with the error table's status.
	answer func(c *gin.Context, status int, refused error)
	intake
	metrics *metrics.Metrics
	timeout time.Duration
}

// Notify handles one notification and answers it.
func (n *notifyRoute) Notify(c *gin.Context) {
	start := time.Now()
	outcome, err := n.notify(c)
	answer, status := metrics.AnswerSuccess, http.StatusOK
	var refused error
	if err != nil {
		// Refused: the provider sends it again, but not a signature
		// probe, which is no notification and is refused as it must be.
		answer = metrics.AnswerFailure
		if errors.Is(err, model.ErrSignatureProbe) {
			answer = ""
		}
		if errors.Is(err, model.ErrUnknownApp) {
			n.metrics.NotifyRefused(n.provider, metrics.RefusedUnknownApp)
		}
		row := notifyRefused(c, n.provider, err)
		// A sentinel's words only: never internal text.
		outcome, status, refused = row.outcome, row.status, errors.New(row.words())
	}
	c.Abort()
	n.answer(c, status, refused)
	n.metrics.Notified(n.provider, outcome, answer, time.Since(start))
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
	return n.take(ctx, c, n.provider, notice)
}

// notifierAnswer is nf's answer as a route writes it.
func notifierAnswer(nf Notifier) func(c *gin.Context, status int, refused error) {
	return func(c *gin.Context, status int, refused error) { nf.Answer(c.Writer, status, refused) }
}
