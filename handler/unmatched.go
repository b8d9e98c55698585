package handler

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// RefundUnmatched handles POST /admin/payments/{provider}/{trade_no}/refund
// (and /admin/payments/{trade_no}/refund, Alipay's) with an
// Idempotency-Key: an UNMATCHED payment (money with no order) is to be
// refunded in full by the refund worker, through the provider that took
// it. 202 with the payment, now REFUND_PENDING (or further along, for the
// same key again).
func (a *Admin) RefundUnmatched(c *gin.Context) {
	provider, tradeNo, err := paymentKey(c.Param("first"), c.Param("trade_no"))
	if err != nil {
		apiError(c, err)
		return
	}
	p, err := a.refunds.RefundUnmatched(c.Request.Context(), provider, tradeNo, c.GetHeader("Idempotency-Key"))
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusAccepted, service.NewPaymentView(p))
}

// paymentKey reads a payment's key from a route: {provider}/{trade_no},
// or {trade_no} alone (second empty) for model.DefaultProvider's, the
// form routes had before WeChat Pay.
func paymentKey(first, second string) (model.Provider, string, error) {
	if second == "" {
		return model.DefaultProvider, first, nil
	}
	p, err := model.ParseProvider(first)
	if err != nil {
		return "", "", fmt.Errorf("%w: no provider %q", model.ErrPaymentNotFound, model.Clip(first))
	}
	return p, second, nil
}
