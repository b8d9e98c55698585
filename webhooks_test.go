package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"paynotify/broker/natstest"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// hookedAdmin is the ADMIN_TOKEN of the webhook tests' instances.
const hookedAdmin = "hooked-admin-token-0123456789"

// hookReceiver is a receiver of the test's own: every request is verified
// with the official Standard Webhooks library, and hold, while set, keeps
// the request open (as a receiver that hangs) after telling arrived.
type hookReceiver struct {
	srv     *httptest.Server
	arrived chan string // webhook-id of each request, as it arrives
	mu      sync.Mutex
	secret  string
	hold    bool
	ids     []string // webhook-id of each request that verified
	bad     []string // why a request did not verify
	bodies  map[string]string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{arrived: make(chan string, 64), bodies: map[string]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		wh, err := standardwebhooks.NewWebhook(rc.secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		id := r.Header.Get("webhook-id")
		if err != nil {
			rc.bad = append(rc.bad, err.Error())
		} else {
			rc.ids = append(rc.ids, id)
			rc.bodies[id] = string(body)
		}
		hold := rc.hold
		rc.mu.Unlock()
		rc.arrived <- id
		if hold {
			<-r.Context().Done() // until the sender goes away
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) setHold(hold bool) {
	rc.mu.Lock()
	rc.hold = hold
	rc.mu.Unlock()
}

// verified is the webhook-ids of the requests that verified, and why the
// others did not.
func (rc *hookReceiver) verified() (ids, bad []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.ids), slices.Clone(rc.bad)
}

// hookedRig is a MariaDB database, migrated, that `serve` instances with
// webhooks on (a compressed schedule, private addresses allowed) start on.
type hookedRig struct {
	ti *twoInstances // its environment, store and signer; no instances
}

func newHookedRig(t *testing.T, extra ...string) *hookedRig {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	extra = append([]string{"WEBHOOK_SECRET_KEY=" + base64.StdEncoding.EncodeToString(key), "WEBHOOK_ALLOW_PRIVATE=true",
		"WEBHOOK_TIMEOUT=2s", "WEBHOOK_RETRY_SCHEDULE=1s,1s,1s", "ADMIN_TOKEN=" + hookedAdmin}, extra...)
	dsn := daotest.MySQLDatabase(t)
	ti := newInstancesEnv(t, dsn, extra...)
	return &hookedRig{ti: ti}
}

// endpoint registers rc for every event type through instance in's admin
// API and gives rc the secret it answered.
func (h *hookedRig) endpoint(t *testing.T, in *instance, rc *hookReceiver) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, in.base+"/admin/webhook-endpoints",
		strings.NewReader(`{"url":"`+rc.srv.URL+`/hook","event_types":["*"]}`))
	req.Header.Set("Authorization", "Bearer "+hookedAdmin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.ti.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID     int64
		Secret string
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create endpoint: %d %v", resp.StatusCode, err)
	}
	rc.mu.Lock()
	rc.secret = out.Secret
	rc.mu.Unlock()
	return out.ID
}

// pay creates sn and pays it through instance in, once.
func (h *hookedRig) pay(t *testing.T, in *instance, sn, trade string) {
	t.Helper()
	h.ti.order(t, sn, "20.00")
	h.ti.inst[0] = in
	if got, err := h.ti.notify(0, h.ti.notification(t, sn, trade, "20.00")); err != nil || got != "success" {
		t.Fatalf("notify %s: %q %v", sn, got, err)
	}
}

// paidEvent is the id of sn's order.paid event.
func (h *hookedRig) paidEvent(t *testing.T, sn string) string {
	t.Helper()
	for _, row := range h.outbox(t, sn) {
		if row.Event.Type == model.EventOrderPaid {
			return row.Event.ID
		}
	}
	t.Fatalf("no order.paid event for %s", sn)
	return ""
}

// awaitArrival waits for the next request rc gets.
func awaitArrival(t *testing.T, rc *hookReceiver, what string) string {
	t.Helper()
	select {
	case id := <-rc.arrived:
		return id
	case <-time.After(90 * time.Second):
		t.Fatalf("no webhook request arrived: %s", what)
		return ""
	}
}

// An instance killed with SIGKILL while a delivery is in flight loses
// nothing: once its claim's lease runs out, another instance delivers the
// event again with the same webhook-id, and the delivery ends DELIVERED.
func TestWebhookSurvivesKill9MidDelivery(t *testing.T) {
	h := newHookedRig(t)
	rc := newHookReceiver(t)
	rc.setHold(true)
	a, err := startInstance(t, h.ti.env(0))
	if err != nil {
		t.Fatal(err)
	}
	endpoint := h.endpoint(t, a, rc)
	h.pay(t, a, "HOOK-KILL-1", "2026113022001400000000000901")
	event := h.paidEvent(t, "HOOK-KILL-1")
	if id := awaitArrival(t, rc, "first attempt"); id != event {
		t.Fatalf("first attempt carried webhook-id %q, want the event's %q", id, event)
	}
	a.kill9(t) // mid-delivery: the receiver still holds the request

	rc.setHold(false)
	b, err := startInstance(t, h.ti.env(1))
	if err != nil {
		t.Fatal(err)
	}
	if id := awaitArrival(t, rc, "the resend after the lease"); id != event {
		t.Fatalf("resend carried webhook-id %q, want %q", id, event)
	}
	d := waitDelivered(t, b, event, endpoint)
	ids, bad := rc.verified()
	if len(bad) > 0 || len(ids) != 2 || ids[0] != event || ids[1] != event {
		t.Fatalf("receiver verified %v (refused %v), want the event %s twice", ids, bad, event)
	}
	if d.Attempts < 1 {
		t.Errorf("delivery %+v shows no attempt", d)
	}
	o, ps := h.ti.state(t, "HOOK-KILL-1")
	if o.Status != model.OrderPaid || len(ps) != 1 {
		t.Errorf("order %s with %d payments after the kill, want PAID with 1", o.Status, len(ps))
	}
}

// With NATS down, webhooks go on: the event reaches the endpoint while
// the relay cannot publish it, and reaches NATS once it is back.
func TestWebhooksGoOnWithNATSDown(t *testing.T) {
	nats := natstest.Start(t)
	h := newHookedRig(t, "NATS_URL="+nats.URL())
	rc := newHookReceiver(t)
	in, err := startInstance(t, h.ti.env(0))
	if err != nil {
		t.Fatal(err)
	}
	endpoint := h.endpoint(t, in, rc)
	nats.Stop()

	h.pay(t, in, "HOOK-NATS-1", "2026113022001400000000000902")
	event := h.paidEvent(t, "HOOK-NATS-1")
	if id := awaitArrival(t, rc, "delivery with NATS down"); id != event {
		t.Fatalf("delivery carried webhook-id %q, want %q", id, event)
	}
	waitDelivered(t, in, event, endpoint)
	if published := h.published(t, "HOOK-NATS-1", event); published {
		t.Fatalf("event %s marked published while NATS was down", event)
	}
	nats.Start()
	deadline := time.Now().Add(90 * time.Second)
	for !h.published(t, "HOOK-NATS-1", event) {
		if time.Now().After(deadline) {
			t.Fatalf("event %s never reached NATS after it came back:\n%s", event, in.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// outbox is sn's outbox rows.
func (h *hookedRig) outbox(t *testing.T, sn string) []model.OutboxRow {
	t.Helper()
	o, _ := h.ti.state(t, sn)
	rows, err := h.ti.store.OutboxByOrder(context.Background(), o.ID)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// published reports whether the relay has published sn's event.
func (h *hookedRig) published(t *testing.T, sn, event string) bool {
	t.Helper()
	for _, row := range h.outbox(t, sn) {
		if row.Event.ID == event {
			return row.State == model.OutboxSent
		}
	}
	t.Fatalf("no outbox row %s", event)
	return false
}

// hookDelivery is a delivery as the admin API shows it.
type hookDelivery struct {
	EndpointID int64  `json:"endpoint_id"`
	State      string `json:"state"`
	Attempts   int    `json:"attempts"`
}

// waitDelivered waits until instance in's admin API shows event's
// delivery to endpoint DELIVERED.
func waitDelivered(t *testing.T, in *instance, event string, endpoint int64) hookDelivery {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, in.base+"/admin/events/"+event+"/deliveries", nil)
		req.Header.Set("Authorization", "Bearer "+hookedAdmin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Deliveries []hookDelivery }
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range out.Deliveries {
			if d.EndpointID == endpoint && d.State == string(model.DeliveryDelivered) {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery of %s to %d not DELIVERED: %+v\n%s", event, endpoint, out.Deliveries, in.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
