package handler

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"paynotify/model"
)

// RefundUnmatched handles POST /admin/payments/{trade_no}/refund with an
// Idempotency-Key: an UNMATCHED payment (money with no order) is to be
// refunded in full by the refund worker. 202 with the payment, now
// REFUND_PENDING (or further along, for the same key again).
func (a *Admin) RefundUnmatched(c *gin.Context) {
	p, err := a.refunds.RefundUnmatched(c.Request.Context(), c.Param("trade_no"), c.GetHeader("Idempotency-Key"))
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusAccepted, newPaymentView(p))
}

// paymentView is a ledger row as operators read it.
type paymentView struct {
	Provider   string `json:"provider"`
	TradeNo    string `json:"trade_no"`
	OutTradeNo string `json:"out_trade_no"`
	Amount     string `json:"amount"`
	State      string `json:"state"`
	PaidAt     string `json:"paid_at,omitempty"`
}

func newPaymentView(p model.Payment) paymentView {
	v := paymentView{Provider: string(p.Provider), TradeNo: p.TradeNo, OutTradeNo: p.OutTradeNo,
		Amount: p.Amount.StringFixed(2), State: string(p.State)}
	if p.PaidAt != nil {
		v.PaidAt = p.PaidAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return v
}
