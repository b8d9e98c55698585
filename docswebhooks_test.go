package main

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"paynotify/model"
)

// docs/webhooks.md names every event type an endpoint can receive in its
// table, with an example body each whose data has exactly the fields the
// event's struct writes (those left out when empty may be missing) and
// sequence: a receiver's developer codes against that page.
func TestWebhooksDocListsEveryEventType(t *testing.T) {
	raw, err := os.ReadFile("docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	data := map[model.EventType]any{
		model.EventOrderCreated: model.OrderEventData{}, model.EventOrderClosed: model.OrderEventData{},
		model.EventOrderPaid: model.PaymentEventData{}, model.EventRefundPending: model.PaymentEventData{},
		model.EventPaymentUnmatched: model.PaymentEventData{},
		model.EventRefunded:         model.RefundEventData{}, model.EventRefundFailed: model.RefundEventData{},
		model.EventTradeClosed: model.TradeEventData{}, model.EventFeesBooked: model.FeeEventData{},
	}
	for _, typ := range model.EventTypes {
		if _, ok := data[typ]; !ok {
			t.Errorf("event type %s: this test does not know its data", typ)
		}
	}
	examples := map[string]map[string]json.RawMessage{}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, `{"type":`) {
			continue
		}
		var body struct {
			Type      string                     `json:"type"`
			Timestamp string                     `json:"timestamp"`
			Data      map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &body); err != nil {
			t.Errorf("example %s: %v", line, err)
			continue
		}
		examples[body.Type] = body.Data
	}
	for typ, v := range data {
		if !strings.Contains(doc, "| `"+string(typ)+"` |") {
			t.Errorf("docs/webhooks.md has no table row for %s", typ)
		}
		got, ok := examples[string(typ)]
		if !ok {
			t.Errorf("docs/webhooks.md has no example body of %s", typ)
			continue
		}
		if _, ok := got["sequence"]; !ok {
			t.Errorf("example %s has no sequence", typ)
		}
		rt := reflect.TypeOf(v)
		var known []string
		for i := range rt.NumField() {
			name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			known = append(known, name)
			if _, ok := got[name]; !ok && opts != "omitempty" {
				t.Errorf("example %s lacks %s", typ, name)
			}
		}
		for k := range got {
			if k != "sequence" && !slices.Contains(known, k) {
				t.Errorf("example %s has %s, which %s does not write", typ, k, rt.Name())
			}
		}
	}
	if _, ok := examples[string(model.EventWebhookTest)]; !ok {
		t.Errorf("docs/webhooks.md has no example of %s", model.EventWebhookTest)
	}
}
