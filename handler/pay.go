package handler

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// Pay serves POST /api/v1/orders/{order_sn}/pay.
type Pay struct {
	checkout *service.Checkout
}

// Start returns the pay URL or QR code for the member's order. The
// Idempotency-Key is required; the answer is the same for the same order
// and method until the trade closes, whatever the key.
func (p *Pay) Start(c *gin.Context) {
	sn, ok := orderSN(c)
	if !ok {
		return
	}
	if err := model.CheckIdempotencyKey(c.GetHeader("Idempotency-Key")); err != nil {
		apiError(c, err)
		return
	}
	var req struct {
		// Provider absent is Alipay, as before WeChat Pay.
		Provider string          `json:"provider"`
		Method   model.PayMethod `json:"method"`
		// App is the provider's app to pay in, by name or id: absent, the
		// first app of its first account that takes the method.
		App string `json:"app"`
		// OpenID is the payer's, for WeChat Pay's jsapi.
		OpenID string `json:"openid"`
	}
	if err := decodeJSON(c, &req); err != nil {
		apiError(c, err)
		return
	}
	provider := model.DefaultProvider
	if req.Provider != "" {
		var err error
		if provider, err = model.ParseProvider(req.Provider); err != nil {
			apiError(c, err)
			return
		}
	}
	if req.Method == model.PayJSAPI && req.OpenID == "" {
		apiError(c, fmt.Errorf("%w: openid is required for jsapi (the payer's, in our official account or mini program)", model.ErrInvalidRequest))
		return
	}
	// h5: WeChat Pay wants the IP of the phone that pays.
	payer := model.Payer{OpenID: req.OpenID, IP: c.ClientIP()}
	v, err := p.checkout.StartIn(c.Request.Context(), member(c), sn, provider, req.Method, req.App, payer)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, v)
}

// refundView is a refund as operators see it.
type refundView struct {
	OutRequestNo string `json:"out_request_no"`
	Kind         string `json:"kind"`
	// Account and App are the refunded payment's, which the refund goes
	// through ("" for one recorded before several: the first).
	Account   string `json:"account"`
	App       string `json:"app"`
	TradeNo   string `json:"trade_no"`
	Amount    string `json:"amount"`
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
}

func newRefundView(f model.Refund) refundView {
	return refundView{OutRequestNo: f.OutRequestNo, Kind: string(f.Kind), Account: f.Account, App: f.App, TradeNo: f.TradeNo,
		Amount: f.Amount.StringFixed(2), State: string(f.State), Attempts: f.Attempts, LastError: f.LastError}
}

// Refund handles POST /admin/orders/{order_sn}/refunds: an operator's
// after-sale refund, under an Idempotency-Key. 202: the refund worker
// carries it out.
func (a *Admin) Refund(c *gin.Context) {
	sn, ok := orderSN(c)
	if !ok {
		return
	}
	var req struct {
		Amount string `json:"amount"`
		Reason string `json:"reason"`
	}
	if err := decodeJSON(c, &req); err != nil {
		apiError(c, err)
		return
	}
	amount, err := model.ParseAmount(req.Amount)
	if err != nil {
		apiError(c, fmt.Errorf("%w: amount: %v", model.ErrInvalidRequest, err))
		return
	}
	f, err := a.refunds.Request(c.Request.Context(), sn, c.GetHeader("Idempotency-Key"), amount, req.Reason)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusAccepted, newRefundView(f))
}

// Refunds handles GET /admin/orders/{order_sn}/refunds.
func (a *Admin) Refunds(c *gin.Context) {
	sn, ok := orderSN(c)
	if !ok {
		return
	}
	fs, err := a.lookup.Refunds(c.Request.Context(), sn)
	if err != nil {
		apiError(c, err)
		return
	}
	out := make([]refundView, len(fs))
	for i, f := range fs {
		out[i] = newRefundView(f)
	}
	writeJSON(c, http.StatusOK, gin.H{"order_sn": sn, "refunds": out})
}
