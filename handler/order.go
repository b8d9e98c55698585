package handler

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// maxOrderBody caps a "place order" body.
const maxOrderBody = 64 << 10

// Orders serves the member-facing order API under /api/v1.
type Orders struct {
	orders *service.Orders
}

// Place handles POST /api/v1/orders.
func (o *Orders) Place(c *gin.Context) {
	var req model.PlaceOrder
	if err := decodeJSON(c, &req); err != nil {
		apiError(c, err)
		return
	}
	placed, err := o.orders.Place(c.Request.Context(), member(c), c.GetHeader("Idempotency-Key"), req)
	if err != nil {
		apiError(c, err)
		return
	}
	if placed.Replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	c.Data(placed.Status, jsonContentType, placed.Body)
}

// Get handles GET /api/v1/orders/{order_sn}.
func (o *Orders) Get(c *gin.Context) {
	sn, ok := orderSN(c)
	if !ok {
		return
	}
	view, err := o.orders.Get(c.Request.Context(), member(c), sn)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, view)
}

// Cancel handles POST /api/v1/orders/{order_sn}/cancel.
func (o *Orders) Cancel(c *gin.Context) {
	sn, ok := orderSN(c)
	if !ok {
		return
	}
	view, err := o.orders.Cancel(c.Request.Context(), member(c), sn)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, view)
}

// RequestStatus handles GET /api/v1/order-requests/{idempotency_key}.
func (o *Orders) RequestStatus(c *gin.Context) {
	state, body, err := o.orders.RequestStatus(c.Request.Context(), member(c), c.Param("key"))
	if err != nil {
		apiError(c, err)
		return
	}
	resp := gin.H{"idempotency_key": c.Param("key"), "state": state}
	if len(body) > 0 {
		resp["order"] = json.RawMessage(body)
	}
	writeJSON(c, http.StatusOK, resp)
}

// orderSN is the order_sn the path names. One that cannot name an order
// (model.ValidID: non-ASCII, too long) is answered 404 here, before any
// query.
func orderSN(c *gin.Context) (string, bool) {
	sn := c.Param("sn")
	if !model.ValidID(sn) {
		apiError(c, model.ErrOrderNotFound)
		return "", false
	}
	return sn, true
}
