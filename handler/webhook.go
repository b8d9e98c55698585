package handler

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"paynotify/model"
	"paynotify/service"
)

// Webhooks serves /admin/webhook-endpoints: the endpoints, their signing
// secrets (answered once, on creation and rotation), their deliveries,
// resending and test deliveries; and /admin/events/{id}/deliveries. With
// no WEBHOOK_SECRET_KEY every route answers 409 webhooks_off.
type Webhooks struct {
	hooks *service.Webhooks
}

// endpointInput is the JSON body of POST and PATCH.
type endpointInput struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"event_types"`
	Description *string   `json:"description"`
	Enabled     *bool     `json:"enabled"`
}

func (in endpointInput) input() service.EndpointInput {
	return service.EndpointInput{URL: in.URL, EventTypes: in.EventTypes, Description: in.Description, Enabled: in.Enabled}
}

func endpointJSON(e model.WebhookEndpoint) gin.H {
	h := gin.H{"id": e.ID, "url": e.URL, "event_types": e.EventTypes, "description": e.Description, "enabled": e.Enabled,
		"created_at": e.CreatedAt.UTC()}
	if e.DisabledReason != "" {
		h["disabled_reason"] = e.DisabledReason
	}
	return h
}

func deliveryJSON(d service.DeliveryView) gin.H {
	log := make([]gin.H, len(d.Log))
	for i, a := range d.Log {
		log[i] = gin.H{"attempt": a.Attempt, "at": a.At.UTC(), "duration_ms": a.Duration.Milliseconds(), "status": a.Status,
			"body": a.Body, "error": a.Error}
	}
	h := gin.H{"id": d.ID, "endpoint_id": d.EndpointID, "event_id": d.EventID, "event_type": d.EventType, "state": d.State,
		"attempts": d.Attempts, "last_status": d.LastStatus, "last_error": d.LastError,
		"next_attempt_at": nil, "created_at": d.CreatedAt.UTC(), "attempt_log": log}
	if d.State == model.DeliveryPending {
		h["next_attempt_at"] = d.NextAttemptAt.UTC()
	}
	return h
}

// pathID reads a numeric path parameter; anything else is a 404 of kind.
func pathID(c *gin.Context, name string, notFound error) (int64, bool) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		apiError(c, notFound)
		return 0, false
	}
	return id, true
}

// Create handles POST /admin/webhook-endpoints: 201 with the endpoint and
// its secret, shown this once.
func (w *Webhooks) Create(c *gin.Context) {
	var in endpointInput
	if !w.hooks.On() {
		apiError(c, model.ErrWebhooksOff)
		return
	}
	if err := decodeJSON(c, &in); err != nil {
		apiError(c, err)
		return
	}
	e, secret, err := w.hooks.Create(c.Request.Context(), in.input())
	if err != nil {
		apiError(c, err)
		return
	}
	h := endpointJSON(e)
	h["secret"] = secret
	writeJSON(c, http.StatusCreated, h)
}

// List handles GET /admin/webhook-endpoints.
func (w *Webhooks) List(c *gin.Context) {
	es, err := w.hooks.Endpoints(c.Request.Context())
	if err != nil {
		apiError(c, err)
		return
	}
	out := make([]gin.H, len(es))
	for i, e := range es {
		out[i] = endpointJSON(e)
	}
	writeJSON(c, http.StatusOK, gin.H{"endpoints": out})
}

// Get handles GET /admin/webhook-endpoints/{id}.
func (w *Webhooks) Get(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	e, err := w.hooks.Endpoint(c.Request.Context(), id)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, endpointJSON(e))
}

// Update handles PATCH /admin/webhook-endpoints/{id}.
func (w *Webhooks) Update(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	if !w.hooks.On() {
		apiError(c, model.ErrWebhooksOff)
		return
	}
	var in endpointInput
	if err := decodeJSON(c, &in); err != nil {
		apiError(c, err)
		return
	}
	e, err := w.hooks.Update(c.Request.Context(), id, in.input())
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, endpointJSON(e))
}

// Delete handles DELETE /admin/webhook-endpoints/{id}: 204.
func (w *Webhooks) Delete(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	if err := w.hooks.Delete(c.Request.Context(), id); err != nil {
		apiError(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// Rotate handles POST /admin/webhook-endpoints/{id}/rotate-secret: the new
// secret, and until when the previous one signs too.
func (w *Webhooks) Rotate(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	rotate := w.hooks.Rotate
	switch c.Query("immediate") {
	case "", "false":
	case "true":
		rotate = w.hooks.RotateImmediately
	default:
		apiError(c, fmt.Errorf("%w: immediate must be true or false", model.ErrInvalidRequest))
		return
	}
	e, secret, err := rotate(c.Request.Context(), id)
	if err != nil {
		apiError(c, err)
		return
	}
	h := endpointJSON(e)
	h["secret"] = secret
	if e.PreviousUntil != nil {
		h["previous_secret_expires_at"] = e.PreviousUntil.UTC()
	}
	writeJSON(c, http.StatusOK, h)
}

// maxDeliveriesListed is the most deliveries one view lists.
const maxDeliveriesListed = 200

// Deliveries handles GET /admin/webhook-endpoints/{id}/deliveries?state=&since=&limit=.
func (w *Webhooks) Deliveries(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	state, since, ok := deliveryFilter(c, "")
	if !ok {
		return
	}
	limit, err := strconv.Atoi(c.DefaultQuery("limit", "100"))
	if err != nil || limit < 1 || limit > maxDeliveriesListed {
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "limit must be 1 to 200")
		return
	}
	ds, err := w.hooks.Deliveries(c.Request.Context(), id, state, since, limit)
	if err != nil {
		apiError(c, err)
		return
	}
	writeDeliveries(c, ds)
}

// EventDeliveries handles GET /admin/events/{id}/deliveries.
func (w *Webhooks) EventDeliveries(c *gin.Context) {
	id := c.Param("id")
	if !model.ValidID(id) {
		writeDeliveries(c, nil) // no event has such an id
		return
	}
	ds, err := w.hooks.EventDeliveries(c.Request.Context(), id)
	if err != nil {
		apiError(c, err)
		return
	}
	writeDeliveries(c, ds)
}

func writeDeliveries(c *gin.Context, ds []service.DeliveryView) {
	out := make([]gin.H, len(ds))
	for i, d := range ds {
		out[i] = deliveryJSON(d)
	}
	writeJSON(c, http.StatusOK, gin.H{"deliveries": out})
}

// deliveryFilter reads ?state= (any if empty, unless def) and ?since=
// (RFC 3339), answering 400 for a bad one.
func deliveryFilter(c *gin.Context, def model.DeliveryState) (model.DeliveryState, time.Time, bool) {
	state := model.DeliveryState(strings.ToUpper(c.DefaultQuery("state", string(def))))
	switch state {
	case "", model.DeliveryPending, model.DeliveryDelivered, model.DeliveryFailed:
	default:
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "state must be PENDING, DELIVERED or FAILED")
		return "", time.Time{}, false
	}
	var since time.Time
	if s := c.Query("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			writeAPIError(c, http.StatusBadRequest, "invalid_request", "since must be an RFC 3339 time, such as 2026-12-01T00:00:00Z")
			return "", time.Time{}, false
		}
		since = t
	}
	return state, since, true
}

// Resend handles POST /admin/webhook-endpoints/{id}/deliveries/{delivery}/resend:
// 202 with the delivery, due at once under the same webhook-id.
func (w *Webhooks) Resend(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	did, ok := pathID(c, "delivery", model.ErrDeliveryNotFound)
	if !ok {
		return
	}
	if _, err := w.hooks.Resend(c.Request.Context(), id, did); err != nil {
		apiError(c, err)
		return
	}
	// Read back with its attempts, as the deliveries views answer it.
	d, err := w.hooks.Delivery(c.Request.Context(), id, did)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusAccepted, deliveryJSON(d))
}

// ResendMany handles POST /admin/webhook-endpoints/{id}/resend?state=FAILED&since=:
// 202 with how many it queued (at most 1,000). The same Idempotency-Key
// again queues nothing more and answers the first request's count.
func (w *Webhooks) ResendMany(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	state, since, ok := deliveryFilter(c, model.DeliveryFailed)
	if !ok {
		return
	}
	key := c.GetHeader("Idempotency-Key")
	if key != "" && !model.ValidID(key) {
		writeAPIError(c, http.StatusBadRequest, "invalid_request", "Idempotency-Key must be 1 to 128 visible ASCII characters")
		return
	}
	n, err := w.hooks.ResendMany(c.Request.Context(), id, state, since, key)
	replayed := errors.Is(err, model.ErrAlreadyDone)
	if err != nil && !replayed {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusAccepted, gin.H{"queued": n, "replayed": replayed})
}

// Test handles POST /admin/webhook-endpoints/{id}/test: 202 with a
// webhook.test delivery queued to that endpoint alone.
func (w *Webhooks) Test(c *gin.Context) {
	id, ok := pathID(c, "id", model.ErrEndpointNotFound)
	if !ok {
		return
	}
	d, err := w.hooks.Test(c.Request.Context(), id)
	if err != nil {
		apiError(c, err)
		return
	}
	writeJSON(c, http.StatusAccepted, deliveryJSON(service.DeliveryView{WebhookDelivery: d}))
}

// routeWebhooks routes the webhook endpoints' admin API on admin.
func routeWebhooks(admin *gin.RouterGroup, hooks *service.Webhooks) {
	w := &Webhooks{hooks: hooks}
	admin.POST("/webhook-endpoints", w.Create)
	admin.GET("/webhook-endpoints", w.List)
	admin.GET("/webhook-endpoints/:id", w.Get)
	admin.PATCH("/webhook-endpoints/:id", w.Update)
	admin.DELETE("/webhook-endpoints/:id", w.Delete)
	admin.POST("/webhook-endpoints/:id/rotate-secret", w.Rotate)
	admin.GET("/webhook-endpoints/:id/deliveries", w.Deliveries)
	admin.POST("/webhook-endpoints/:id/deliveries/:delivery/resend", w.Resend)
	admin.POST("/webhook-endpoints/:id/resend", w.ResendMany)
	admin.POST("/webhook-endpoints/:id/test", w.Test)
	admin.GET("/events/:id/deliveries", w.EventDeliveries)
}
