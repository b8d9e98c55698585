package webhook

import (
	"encoding/json"
	"fmt"
	"time"

	"paynotify/model"
)

// payload is the Standard Webhooks body and nothing else at its top level.
type payload struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// Body is the body of every delivery of ev: its type, its time (RFC 3339)
// and its data with "sequence" added — seq, which grows with each event
// of one order (the outbox row's number: an order's events are written
// under its lock, so a later one always has a greater number).
func Body(ev model.Event, seq int64) ([]byte, error) {
	data := map[string]json.RawMessage{}
	if len(ev.Data) > 0 && string(ev.Data) != "null" {
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return nil, fmt.Errorf("event %s data: %w", ev.ID, err)
		}
	}
	data["sequence"] = json.RawMessage(fmt.Sprint(seq))
	return encode(string(ev.Type), ev.OccurredAt, data)
}

// TestBody is the body of a webhook.test delivery to endpoint id.
func TestBody(endpointID int64, url string, at time.Time) ([]byte, error) {
	data := map[string]any{"endpoint_id": endpointID, "url": url,
		"message": "a test delivery from paynotify: this endpoint receives signed webhooks"}
	return encode(string(model.EventWebhookTest), at, data)
}

func encode(typ string, at time.Time, data any) ([]byte, error) {
	d, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return json.Marshal(payload{Type: typ, Timestamp: at.UTC().Format(time.RFC3339Nano), Data: d})
}
