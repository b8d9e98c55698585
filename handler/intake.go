package handler

import (
	"context"
	"errors"
	"log/slog"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// intake takes a verified notice to the ledger: the one flow after a
// provider's protocol, shared by Alipay's route and every notifyRoute.
type intake struct {
	payments *service.Payments
	refunds  *service.Refunds // nil: refunds are not handled here
}

// take applies n, a notice of provider, and says its outcome; the access
// log gets the outcome and what the notice paid.
func (in intake) take(ctx context.Context, c *gin.Context, provider model.Provider, n model.Notice) (string, error) {
	for _, d := range n.Dropped {
		logger(c).Warn("notification field dropped", "field", d)
	}
	if n.Refund || n.RefundNo != "" {
		// Money going back is never a payment. The refund worker confirms
		// it by query; the notice only hurries it.
		if in.refunds != nil && n.RefundNo != "" {
			if err := in.refunds.Notified(ctx, n.RefundNo); err != nil {
				return "", err
			}
		}
		logAlso(c, slog.String("outcome", "refund_notice"), slog.String("out_refund_no", n.RefundNo))
		return "refund_notice", nil
	}
	if n.Payment.TradeNo == "" {
		// No money moved (Alipay's WAIT_BUYER_PAY, TRADE_CLOSED): closes
		// and refunds are confirmed by query, never taken from a notice.
		logAlso(c, slog.String("outcome", "ignored"))
		return "ignored", nil
	}
	p := n.Payment
	if p.Provider != provider {
		return "", errors.New("a notice of " + string(provider) + " observed as " + string(p.Provider) + "'s")
	}
	pay, outcome, err := in.payments.Observe(ctx, p)
	if err != nil {
		return "", err
	}
	logAlso(c, slog.String("outcome", string(outcome)), slog.String("out_trade_no", p.OutTradeNo),
		slog.String("trade_no", p.TradeNo), slog.String("amount", p.Amount.StringFixed(2)),
		slog.String("state", string(pay.State)), slog.String("reason", string(pay.Reason)))
	return string(outcome), nil
}
