package model

import (
	"errors"
	"time"
)

// WebhookEndpoint is a URL a merchant's system registered to be told of
// events over signed HTTP (Standard Webhooks). Its signing secrets are
// kept sealed; the model carries them only between the service and the
// store.
type WebhookEndpoint struct {
	ID          int64
	URL         string
	EventTypes  []string // event types, or ["*"] for all
	Description string
	Enabled     bool
	// DisabledReason says why the service disabled it (410 Gone, failing
	// for WEBHOOK_DISABLE_AFTER); empty when an operator did, or enabled.
	DisabledReason string
	// Secret and PreviousSecret are sealed (webhook.Keyring); the previous
	// one signs too until PreviousUntil, for the 24 h after a rotation.
	Secret         string
	PreviousSecret string
	PreviousUntil  *time.Time
	// FailingSince is the first failed attempt since the last delivered
	// one (nil when the last attempt delivered).
	FailingSince *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Subscribes reports whether the endpoint wants events of type t.
func (e WebhookEndpoint) Subscribes(t string) bool {
	for _, s := range e.EventTypes {
		if s == WebhookAllEvents || s == t {
			return true
		}
	}
	return false
}

// WebhookAllEvents subscribes an endpoint to every event type.
const WebhookAllEvents = "*"

// EventWebhookTest is the type of the delivery POST
// /admin/webhook-endpoints/{id}/test sends: no outbox event.
const EventWebhookTest EventType = "webhook.test"

// EventTypes lists every event type the outbox announces, which an
// endpoint may subscribe to.
var EventTypes = []EventType{EventOrderCreated, EventOrderPaid, EventOrderClosed, EventRefundPending, EventRefunded,
	EventRefundFailed, EventTradeClosed, EventFeesBooked}

// DeliveryState is where one event's delivery to one endpoint stands.
type DeliveryState string

// Delivery states: PENDING until a 2xx (DELIVERED) or the retry schedule
// runs out, a 410 Gone, or the endpoint is disabled (FAILED). A FAILED
// delivery is resent only by an operator.
const (
	DeliveryPending   DeliveryState = "PENDING"
	DeliveryDelivered DeliveryState = "DELIVERED"
	DeliveryFailed    DeliveryState = "FAILED"
)

// WebhookDelivery is one event to one endpoint: its body is fixed when it
// is made, so every retry and resend sends the same bytes under the same
// webhook-id (the event's id).
type WebhookDelivery struct {
	ID         int64
	EndpointID int64
	EventID    string
	EventType  string
	// OrderID is the event's aggregate (0 for webhook.test).
	OrderID int64
	Body    []byte
	State   DeliveryState
	// Attempts counts every attempt; Tries those since it was last queued
	// (made or resent), which the retry schedule counts.
	Attempts      int
	Tries         int
	NextAttemptAt time.Time
	LastStatus    int
	LastError     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Lease is the claim's token while a deliverer holds the delivery.
	Lease string
}

// WebhookAttempt is one HTTP request of a delivery, as logged.
type WebhookAttempt struct {
	ID         int64
	DeliveryID int64
	EndpointID int64
	EventID    string
	Attempt    int
	At         time.Time
	Duration   time.Duration
	// Status is the HTTP status (0: no answer).
	Status int
	// Body is the first KiB of the answer.
	Body  string
	Error string
}

// AttemptResult classifies an attempt for metrics and decisions.
type AttemptResult string

// Attempt results.
const (
	AttemptDelivered AttemptResult = "delivered" // a 2xx
	AttemptStatus    AttemptResult = "status"    // another status (a redirect too)
	AttemptGone      AttemptResult = "gone"      // 410: the endpoint is disabled
	AttemptTimeout   AttemptResult = "timeout"   // no answer within WEBHOOK_TIMEOUT
	AttemptError     AttemptResult = "error"     // refused, reset, TLS, refused by the URL guard
)

// AttemptResults lists every AttemptResult, for metrics.
var AttemptResults = []AttemptResult{AttemptDelivered, AttemptStatus, AttemptGone, AttemptTimeout, AttemptError}

// DeliveryStat is how many deliveries of an endpoint are in a state, and
// when the oldest of them was made.
type DeliveryStat struct {
	EndpointID int64
	State      DeliveryState
	Count      int64
	Oldest     time.Time
}

// Webhook errors.
var (
	// ErrWebhooksOff: no WEBHOOK_SECRET_KEY, so no secret can be sealed
	// or opened.
	ErrWebhooksOff = errors.New("webhooks are off: set WEBHOOK_SECRET_KEY (or WEBHOOK_SECRET_KEY_FILE) to base64 of 32 random bytes")
	// ErrEndpointNotFound: no webhook endpoint has that id.
	ErrEndpointNotFound = errors.New("webhook endpoint not found")
	// ErrDeliveryNotFound: no delivery of that endpoint has that id.
	ErrDeliveryNotFound = errors.New("webhook delivery not found")
	// ErrURLRefused: an endpoint URL the URL guard refuses (why is
	// wrapped around it).
	ErrURLRefused = errors.New("webhook URL refused")
)
