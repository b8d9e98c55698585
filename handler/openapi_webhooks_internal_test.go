package handler

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"paynotify/model"
	"paynotify/webhook"
)

// The OpenAPI document's webhooks: one entry per event type an endpoint
// can receive (every subscribable type, payment.unmatched that "*"
// receives, and webhook.test), each with the three Standard Webhooks
// headers; its data schema has exactly the fields the event's struct
// writes, and a body webhook.Body makes of a filled-in event validates
// against it, while one with a field of the wrong type or a type not its
// own does not.
func TestOpenAPIWebhooks(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPISpec)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %s: webhooks need 3.1", doc.OpenAPI)
	}
	paid := time.Date(2026, 12, 2, 9, 1, 10, 0, time.UTC)
	data := map[model.EventType]any{
		model.EventOrderCreated: model.OrderEventData{OrderID: 7, OrderSN: "SN7", MemberID: 1, PayAmount: "20.00", TotalAmount: "40.00"},
		model.EventOrderClosed:  model.OrderEventData{OrderID: 7, OrderSN: "SN7", MemberID: 1, PayAmount: "20.00", TotalAmount: "40.00", Status: 4, Reason: "timeout"},
		model.EventOrderPaid: model.PaymentEventData{OrderID: 7, OrderSN: "SN7", Provider: "alipay", TradeNo: "T7", OutTradeNo: "SN7",
			Amount: "20.00", State: "APPLIED", PaidAt: &paid},
		model.EventRefundPending: model.PaymentEventData{OrderID: 7, OrderSN: "SN7", Provider: "wechatpay", TradeNo: "T7", OutTradeNo: "SN7",
			Amount: "20.00", State: "REFUND_PENDING", Reason: "ORDER_CLOSED", PaidAt: &paid},
		model.EventPaymentUnmatched: model.PaymentEventData{Provider: "alipay", TradeNo: "T9", OutTradeNo: "X9", Amount: "66.00", State: "UNMATCHED", PaidAt: &paid},
		model.EventRefunded: model.RefundEventData{OrderID: 7, OrderSN: "SN7", Provider: "alipay", TradeNo: "T7", OutTradeNo: "SN7",
			OutRequestNo: "RF-7", Kind: "AUTO", Amount: "20.00", Reason: "r"},
		model.EventRefundFailed: model.RefundEventData{OrderID: 7, OrderSN: "SN7", Provider: "alipay", TradeNo: "T7", OutTradeNo: "SN7",
			OutRequestNo: "RF-7", Kind: "AFTER_SALE", Amount: "20.00", Reason: "refused"},
		model.EventTradeClosed: model.TradeEventData{OrderID: 7, Provider: "alipay", AttemptNo: 1, OutTradeNo: "SN7", Method: "page", Reason: "order settled"},
		model.EventFeesBooked:  model.FeeEventData{Provider: "alipay", BillDate: "2026-12-02", Lines: 21, Amount: "-1.26"},
	}
	want := []string{string(model.EventWebhookTest), string(model.EventPaymentUnmatched)}
	for _, typ := range model.EventTypes {
		want = append(want, string(typ))
	}
	var got []string
	for name := range doc.Webhooks {
		got = append(got, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("openapi.yaml webhooks are %q, want %q", got, want)
	}

	schemaOf := func(typ string) *openapi3.Schema {
		op := doc.Webhooks[typ].Post
		var headers []string
		for _, p := range op.Parameters {
			if p.Value.In == openapi3.ParameterInHeader && p.Value.Required {
				headers = append(headers, p.Value.Name)
			}
		}
		if !slices.Equal(headers, []string{"webhook-id", "webhook-timestamp", "webhook-signature"}) {
			t.Errorf("webhook %s: required headers %q", typ, headers)
		}
		return op.RequestBody.Value.Content.Get("application/json").Schema.Value
	}
	validate := func(s *openapi3.Schema, body []byte) error {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return s.VisitJSON(v)
	}
	at := time.Date(2026, 12, 2, 9, 1, 12, 500_000_000, time.UTC)
	for typ, d := range data {
		s := schemaOf(string(typ))
		raw, _ := json.Marshal(d)
		body, err := webhook.Body(model.Event{ID: "e", Type: typ, OccurredAt: at, Data: raw}, 57)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(s, body); err != nil {
			t.Errorf("webhook %s: %s does not validate: %v", typ, body, err)
		}
		var props []string
		for name := range s.Properties["data"].Value.Properties {
			props = append(props, name)
		}
		fields := []string{"sequence"}
		rt := reflect.TypeOf(d)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		slices.Sort(props)
		slices.Sort(fields)
		if !slices.Equal(props, fields) {
			t.Errorf("webhook %s: data schema has %q, the event writes %q", typ, props, fields)
		}
		// Drift the schema must catch.
		other := strings.Replace(string(body), `"type":"`+string(typ)+`"`, `"type":"order.nope"`, 1)
		if validate(s, []byte(other)) == nil {
			t.Errorf("webhook %s: a body of another type validates", typ)
		}
		numeric := strings.Replace(string(body), `"sequence":57`, `"sequence":"57"`, 1)
		if validate(s, []byte(numeric)) == nil {
			t.Errorf("webhook %s: a string sequence validates", typ)
		}
	}
	test, err := webhook.TestBody(3, "https://shop.example/webhooks", at)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(schemaOf(string(model.EventWebhookTest)), test); err != nil {
		t.Errorf("webhook.test: %s does not validate: %v", test, err)
	}
}
