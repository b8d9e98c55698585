package service_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
	"paynotify/webhook"
)

// testKeyring is a fresh WEBHOOK_SECRET_KEY's keyring.
func testKeyring(t *testing.T) *webhook.Keyring {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	k, err := webhook.NewKeyring(base64.StdEncoding.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// receiver is a webhook receiver of the test's own: it verifies every
// request with the official Standard Webhooks library under its secret,
// and answers what answer says for the n-th request (1-based) of an id.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(w http.ResponseWriter, r *http.Request, n int)
	mu     sync.Mutex
	secret string
	got    map[string]int // requests by webhook-id
	bodies map[string][]byte
	bad    []string // why a request did not verify
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	rc := &receiver{t: t, answer: answer, got: map[string]int{}, bodies: map[string][]byte{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		secret := rc.secret
		id := r.Header.Get("webhook-id")
		rc.got[id]++
		n := rc.got[id]
		rc.bodies[id] = body
		rc.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err == nil && (r.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(r.Header.Get("User-Agent"), "paynotify")) {
			err = fmt.Errorf("headers %v", r.Header)
		}
		if err != nil {
			rc.mu.Lock()
			rc.bad = append(rc.bad, err.Error())
			rc.mu.Unlock()
		}
		rc.answer(w, r, n)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) setSecret(s string) {
	rc.mu.Lock()
	rc.secret = s
	rc.mu.Unlock()
}

func (rc *receiver) count(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[id]
}

func (rc *receiver) total() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, c := range rc.got {
		n += c
	}
	return n
}

func (rc *receiver) checkVerified() {
	rc.t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		rc.t.Errorf("%d requests did not verify: %v", len(rc.bad), rc.bad)
	}
}

func ok200(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) }

// hookRig is the webhook use cases over one store with a deliverer
// running on a compressed schedule.
type hookRig struct {
	t     *testing.T
	store *dao.Store
	hooks *service.Webhooks
	keys  *webhook.Keyring
}

func newHookRig(t *testing.T, store *dao.Store) *hookRig {
	keys := testKeyring(t)
	h := service.NewWebhooks(store, keys)
	h.AllowPrivate = true
	return &hookRig{t: t, store: store, hooks: h, keys: keys}
}

// deliverer starts a deliverer (and a fan-out) until the test ends.
func (r *hookRig) deliverer(timeout time.Duration, tune func(d *service.Deliverer)) *service.Deliverer {
	d := service.NewDeliverer(r.store, r.keys, webhook.NewSender(r.hooks.Policy(), timeout), slog.New(slog.DiscardHandler))
	d.Schedule = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}
	d.Interval = 10 * time.Millisecond
	d.Lease = timeout + 2*time.Second
	if tune != nil {
		tune(d)
	}
	f := service.NewFanout(r.store)
	f.Interval = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		service.RunJobs(ctx, slog.New(slog.DiscardHandler), nil, f.Job(), d.Job())
		close(done)
	}()
	r.t.Cleanup(func() { cancel(); <-done; d.Wait() })
	return d
}

func (r *hookRig) create(rc *receiver, types ...string) model.WebhookEndpoint {
	r.t.Helper()
	if len(types) == 0 {
		types = []string{"*"}
	}
	u := rc.srv.URL + "/hook"
	e, secret, err := r.hooks.Create(context.Background(), service.EndpointInput{URL: &u, EventTypes: &types})
	if err != nil {
		r.t.Fatal(err)
	}
	rc.setSecret(secret)
	return e
}

// event commits one outbox event through the outbox's own insert.
func (r *hookRig) event(typ model.EventType, orderID int64, data any) model.Event {
	r.t.Helper()
	b, _ := json.Marshal(data)
	ev := model.Event{ID: newUUID(r.t), Type: typ, AggregateID: orderID, OccurredAt: time.Now().UTC().Truncate(time.Millisecond), Data: b}
	if err := r.store.UpdateOutbox(context.Background(), func(ctx context.Context, tx *dao.OutboxTx) error {
		return tx.InsertEvents(ctx, ev)
	}); err != nil {
		r.t.Fatal(err)
	}
	return ev
}

func newUUID(t *testing.T) string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x70, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *hookRig) deliveryOf(endpointID int64, eventID string) (service.DeliveryView, bool) {
	r.t.Helper()
	ds, err := r.hooks.EventDeliveries(context.Background(), eventID)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, d := range ds {
		if d.EndpointID == endpointID {
			return d, true
		}
	}
	return service.DeliveryView{}, false
}

func (r *hookRig) waitState(endpointID int64, eventID string, state model.DeliveryState) service.DeliveryView {
	r.t.Helper()
	var d service.DeliveryView
	waitFor(r.t, fmt.Sprintf("delivery of %s to %d %s", eventID, endpointID, state), func() bool {
		var ok bool
		d, ok = r.deliveryOf(endpointID, eventID)
		return ok && d.State == state
	})
	return d
}

func paidData(orderID int64) model.PaymentEventData {
	return model.PaymentEventData{OrderID: orderID, OrderSN: fmt.Sprint("SN", orderID), Provider: "alipay", TradeNo: "T1",
		OutTradeNo: "O1", Amount: "20.00", State: "APPLIED"}
}

func TestWebhooksOffWithoutKey(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	h := service.NewWebhooks(store, nil)
	u, types := "https://example.com/hook", []string{"*"}
	if _, _, err := h.Create(context.Background(), service.EndpointInput{URL: &u, EventTypes: &types}); !errors.Is(err, model.ErrWebhooksOff) ||
		!strings.Contains(err.Error(), "WEBHOOK_SECRET_KEY") {
		t.Errorf("create without a key: %v, want ErrWebhooksOff naming WEBHOOK_SECRET_KEY", err)
	}
}

func TestWebhookURLGuard(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	h := service.NewWebhooks(store, testKeyring(t))
	ctx := context.Background()
	for _, c := range []struct{ name, url, why string }{
		{"HTTP", "http://example.com/hook", "https://"},
		{"Loopback", "https://127.0.0.1:8443/hook", "127.0.0.1"},
		{"NameResolvingToLoopback", "https://localhost/hook", "localhost resolves to"},
		{"Private", "https://10.1.2.3/hook", "10.1.2.3"},
		{"Metadata", "https://169.254.169.254/latest", "169.254.169.254"},
		{"Credentials", "https://user:pw@example.com/", "credentials"},
		{"NotHTTP", "ftp://example.com/", "scheme"},
	} {
		t.Run(c.name, func(t *testing.T) {
			types := []string{"*"}
			_, _, err := h.Create(ctx, service.EndpointInput{URL: &c.url, EventTypes: &types})
			if !errors.Is(err, model.ErrURLRefused) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s: %v, want ErrURLRefused saying %q", c.url, err, c.why)
			}
		})
	}
	if es, _ := h.Endpoints(ctx); len(es) != 0 {
		t.Errorf("refused URLs left %d endpoints", len(es))
	}
	// With WEBHOOK_ALLOW_PRIVATE, loopback over http:// is a development endpoint.
	h.AllowPrivate = true
	u, types := "http://127.0.0.1:9000/hook", []string{"order.paid"}
	if _, _, err := h.Create(ctx, service.EndpointInput{URL: &u, EventTypes: &types}); err != nil {
		t.Errorf("with AllowPrivate: %v", err)
	}
	bad := []string{"order.paied"}
	if _, _, err := h.Create(ctx, service.EndpointInput{URL: &u, EventTypes: &bad}); !errors.Is(err, model.ErrInvalidRequest) {
		t.Errorf("unknown event type: %v, want ErrInvalidRequest", err)
	}
}

func TestWebhookEndpointLifecycle(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		ctx := context.Background()
		rc := newReceiver(t, ok200)
		u, types, desc := rc.srv.URL, []string{"order.paid", "payment.refunded"}, "the shop"
		e, secret, err := r.hooks.Create(ctx, service.EndpointInput{URL: &u, EventTypes: &types, Description: &desc})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if !strings.HasPrefix(secret, "whsec_") || err != nil || len(raw) < 24 || len(raw) > 64 {
			t.Errorf("secret %q: want whsec_ and base64 of 24 to 64 bytes", secret)
		}
		got, err := r.hooks.Endpoint(ctx, e.ID)
		if err != nil || got.URL != u || strings.Join(got.EventTypes, ",") != "order.paid,payment.refunded" || !got.Enabled || got.Description != desc {
			t.Errorf("read back %+v, %v", got, err)
		}
		if strings.Contains(got.Secret, secret) || strings.Contains(got.Secret, strings.TrimPrefix(secret, "whsec_")) {
			t.Error("the secret is stored in the clear")
		}
		off := false
		if e, err = r.hooks.Update(ctx, e.ID, service.EndpointInput{Enabled: &off}); err != nil || e.Enabled {
			t.Errorf("disable: %+v, %v", e, err)
		}
		if _, _, err := r.hooks.Rotate(ctx, e.ID); err != nil {
			t.Error(err)
		}
		if err := r.hooks.Delete(ctx, e.ID); err != nil {
			t.Error(err)
		}
		if _, err := r.hooks.Endpoint(ctx, e.ID); !errors.Is(err, model.ErrEndpointNotFound) {
			t.Errorf("deleted endpoint: %v", err)
		}
		audits, err := store.AuditByTarget(ctx, model.TargetWebhook, fmt.Sprint(e.ID))
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, a := range audits {
			actions = append(actions, string(a.Action))
		}
		if strings.Join(actions, " ") != "webhook.create webhook.update webhook.rotate webhook.delete" {
			t.Errorf("audited %v", actions)
		}
	})
}

// An endpoint gets the events committed after it was made, of the types it
// subscribes to, while enabled; never older ones.
func TestWebhookFanoutFromCreation(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		ctx := context.Background()
		rc := newReceiver(t, ok200)
		before := r.event(model.EventOrderPaid, 1, paidData(1))
		paid := r.create(rc, "order.paid")
		all := r.create(newReceiver(t, ok200))
		after := r.event(model.EventOrderPaid, 1, paidData(1))
		created := r.event(model.EventOrderCreated, 2, model.OrderEventData{OrderID: 2})
		f := service.NewFanout(store)
		for {
			n, err := f.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		for _, c := range []struct {
			ep   model.WebhookEndpoint
			ev   model.Event
			want bool
		}{{paid, before, false}, {all, before, false}, {paid, after, true}, {all, after, true}, {paid, created, false}, {all, created, true}} {
			if _, ok := r.deliveryOf(c.ep.ID, c.ev.ID); ok != c.want {
				t.Errorf("endpoint %v, event %s: delivery %v, want %v", c.ep.EventTypes, c.ev.Type, ok, c.want)
			}
		}
		// Disabled: nothing; enabled again: only what is committed after.
		off, on := false, true
		if _, err := r.hooks.Update(ctx, all.ID, service.EndpointInput{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		while := r.event(model.EventOrderPaid, 3, paidData(3))
		if _, err := f.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		unfanned := r.event(model.EventOrderPaid, 3, paidData(3)) // committed, not fanned out, before the enable
		if _, err := r.hooks.Update(ctx, all.ID, service.EndpointInput{Enabled: &on}); err != nil {
			t.Fatal(err)
		}
		later := r.event(model.EventOrderPaid, 3, paidData(3))
		if _, err := f.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			ev   model.Event
			want bool
		}{{while, false}, {unfanned, false}, {later, true}} {
			if _, ok := r.deliveryOf(all.ID, c.ev.ID); ok != c.want {
				t.Errorf("re-enabled endpoint, event %s: delivery %v, want %v", c.ev.ID, ok, c.want)
			}
		}
		// Every row fanned out: none left pending for retention to keep.
		var pending int64
		if err := store.SQL().QueryRow("SELECT COUNT(*) FROM outbox WHERE webhook_pending = 1").Scan(&pending); err != nil || pending != 0 {
			t.Errorf("%d outbox rows still pending (%v)", pending, err)
		}
	})
}

// With no endpoint enabled, a fan-out lets the pending rows go in batches
// without reading them, and an endpoint created after hears none of them.
func TestWebhookFanoutWithoutEndpoints(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		ctx := context.Background()
		var events []model.Event
		for i := range 5 {
			events = append(events, r.event(model.EventOrderPaid, int64(10+i), paidData(int64(10+i))))
		}
		f := service.NewFanout(store)
		f.Batch = 2
		var rounds []int
		for {
			n, err := f.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rounds = append(rounds, n)
			if n == 0 {
				break
			}
		}
		if want := []int{2, 2, 1, 0}; !slices.Equal(rounds, want) {
			t.Errorf("rounds fanned out %v, want %v", rounds, want)
		}
		var pending int64
		if err := store.SQL().QueryRow("SELECT COUNT(*) FROM outbox WHERE webhook_pending = 1").Scan(&pending); err != nil || pending != 0 {
			t.Errorf("%d outbox rows still pending (%v)", pending, err)
		}
		ep := r.create(newReceiver(t, ok200))
		if _, err := f.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if _, ok := r.deliveryOf(ep.ID, ev.ID); ok {
				t.Errorf("event %s committed before any endpoint was delivered to one created after", ev.ID)
			}
		}
	})
}

// 500 twice then 200: delivered on the third attempt, every attempt
// logged, the same webhook-id each time, the body the Standard Webhooks
// payload.
func TestWebhookRetriedUntil2xx(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
			if n <= 2 {
				http.Error(w, "not yet", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
		ep := r.create(rc)
		r.deliverer(5*time.Second, nil)
		ev := r.event(model.EventOrderPaid, 7, paidData(7))
		d := r.waitState(ep.ID, ev.ID, model.DeliveryDelivered)
		if d.Attempts != 3 || len(d.Log) != 3 || rc.count(ev.ID) != 3 {
			t.Errorf("delivered after %d attempts (%d logged, %d received), want 3", d.Attempts, len(d.Log), rc.count(ev.ID))
		}
		for i, a := range d.Log {
			wantStatus := 500
			if i == 2 {
				wantStatus = 204
			}
			if a.Attempt != i+1 || a.Status != wantStatus || (i < 2 && (a.Error == "" || !strings.Contains(a.Body, "not yet"))) {
				t.Errorf("attempt %d: %+v", i+1, a)
			}
		}
		rc.checkVerified()
		var body struct {
			Type      string         `json:"type"`
			Timestamp string         `json:"timestamp"`
			Data      map[string]any `json:"data"`
		}
		rc.mu.Lock()
		raw := rc.bodies[ev.ID]
		rc.mu.Unlock()
		var top map[string]json.RawMessage
		json.Unmarshal(raw, &top)
		if err := json.Unmarshal(raw, &body); err != nil || len(top) != 3 || body.Type != "order.paid" ||
			body.Timestamp != ev.OccurredAt.Format(time.RFC3339Nano) || body.Data["amount"] != "20.00" || body.Data["provider"] != "alipay" ||
			body.Data["sequence"] == nil {
			t.Errorf("body %s", raw)
		}
	})
}

// Sequences grow with each event of one order.
func TestWebhookSequencePerOrder(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	r := newHookRig(t, store)
	rc := newReceiver(t, ok200)
	ep := r.create(rc)
	r.deliverer(5*time.Second, nil)
	var seqs []float64
	for range 3 {
		ev := r.event(model.EventOrderPaid, 9, paidData(9))
		r.waitState(ep.ID, ev.ID, model.DeliveryDelivered)
		rc.mu.Lock()
		var b struct{ Data map[string]any }
		json.Unmarshal(rc.bodies[ev.ID], &b)
		rc.mu.Unlock()
		seqs = append(seqs, b.Data["sequence"].(float64))
	}
	if !(seqs[0] < seqs[1] && seqs[1] < seqs[2]) {
		t.Errorf("sequences %v, want increasing", seqs)
	}
}

// Failures of every kind are retried on the schedule, then FAILED; a
// hanging endpoint holds back no other endpoint.
func TestWebhookFailures(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		hang := make(chan struct{})
		release := sync.OnceFunc(func() { close(hang) })
		t.Cleanup(release)
		hanging := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		})
		closing := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		})
		target := newReceiver(t, ok200)
		redirecting := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			http.Redirect(w, req, target.srv.URL, http.StatusFound)
		})
		healthy := newReceiver(t, ok200)
		eps := map[string]model.WebhookEndpoint{}
		for name, rc := range map[string]*receiver{"hanging": hanging, "closing": closing, "redirecting": redirecting, "healthy": healthy} {
			eps[name] = r.create(rc)
		}
		r.deliverer(300*time.Millisecond, nil)
		ev := r.event(model.EventOrderPaid, 11, paidData(11))
		// The healthy endpoint is served while the hanging one holds its slots.
		r.waitState(eps["healthy"].ID, ev.ID, model.DeliveryDelivered)
		for name, want := range map[string]model.AttemptResult{"hanging": "timeout", "closing": "error", "redirecting": "status"} {
			d := r.waitState(eps[name].ID, ev.ID, model.DeliveryFailed)
			if d.Attempts != 4 || len(d.Log) != 4 {
				t.Errorf("%s: FAILED after %d attempts, want 4 (the first and a retry per wait)", name, d.Attempts)
			}
			if d.LastError == "" {
				t.Errorf("%s: no last_error", name)
			}
			_ = want
		}
		if n := target.total(); n != 0 {
			t.Errorf("the redirect was followed %d times", n)
		}
		d, _ := r.deliveryOf(eps["redirecting"].ID, ev.ID)
		if d.LastStatus != http.StatusFound {
			t.Errorf("redirect: last_status %d", d.LastStatus)
		}
		// Resend one FAILED delivery: the same webhook-id again.
		before := hanging.count(ev.ID)
		release() // from now on the hanging receiver answers at once
		if _, err := r.hooks.Resend(context.Background(), eps["hanging"].ID, d.ID); !errors.Is(err, model.ErrDeliveryNotFound) {
			t.Errorf("resending another endpoint's delivery: %v", err)
		}
		hd, _ := r.deliveryOf(eps["hanging"].ID, ev.ID)
		if _, err := r.hooks.Resend(context.Background(), eps["hanging"].ID, hd.ID); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the resend", func() bool { return hanging.count(ev.ID) > before })
		healthy.checkVerified()
	})
}

// 410 Gone fails the delivery at once and disables the endpoint, audited;
// nothing more is sent to it.
func TestWebhookGoneDisables(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusGone) })
		ep := r.create(rc)
		r.deliverer(5*time.Second, nil)
		ev := r.event(model.EventOrderPaid, 12, paidData(12))
		d := r.waitState(ep.ID, ev.ID, model.DeliveryFailed)
		if d.Attempts != 1 {
			t.Errorf("410: %d attempts, want 1", d.Attempts)
		}
		waitFor(t, "the endpoint disabled", func() bool {
			e, err := r.hooks.Endpoint(context.Background(), ep.ID)
			return err == nil && !e.Enabled && strings.Contains(e.DisabledReason, "410")
		})
		audits, _ := store.AuditByTarget(context.Background(), model.TargetWebhook, fmt.Sprint(ep.ID))
		if last := audits[len(audits)-1]; last.Operator != model.OperatorService || last.Action != model.AuditWebhookUpdate {
			t.Errorf("disable audited as %+v", last)
		}
		next := r.event(model.EventOrderPaid, 12, paidData(12))
		f := service.NewFanout(store)
		waitFor(t, "the next event fanned out", func() bool { n, _ := f.RunOnce(context.Background()); return n == 0 })
		if _, ok := r.deliveryOf(ep.ID, next.ID); ok {
			t.Error("a disabled endpoint got a delivery")
		}
	})
}

// An endpoint failing everything for WEBHOOK_DISABLE_AFTER is disabled.
func TestWebhookDisabledAfterFailingLong(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	r := newHookRig(t, store)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusBadGateway) })
	ep := r.create(rc)
	disabled := make(chan int64, 1)
	r.deliverer(5*time.Second, func(d *service.Deliverer) {
		d.DisableAfter = 50 * time.Millisecond
		d.Schedule = []time.Duration{time.Hour}
		d.OnDisabled = func(id int64, _ string) { disabled <- id }
	})
	r.event(model.EventOrderPaid, 13, paidData(13))
	select {
	case id := <-disabled:
		if id != ep.ID {
			t.Errorf("disabled %d", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not disabled")
	}
	e, _ := r.hooks.Endpoint(context.Background(), ep.ID)
	if e.Enabled || !strings.Contains(e.DisabledReason, "WEBHOOK_DISABLE_AFTER") {
		t.Errorf("endpoint %+v", e)
	}
}

// For the day after a rotation every delivery carries both signatures:
// a receiver with either secret verifies; a tampered body verifies with
// neither.
func TestWebhookRotationSignsWithBoth(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	r := newHookRig(t, store)
	type got struct {
		body []byte
		h    http.Header
	}
	reqs := make(chan got, 10)
	rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) { w.WriteHeader(200) })
	rc.answer = func(w http.ResponseWriter, req *http.Request, _ int) {
		rc.mu.Lock()
		b := rc.bodies[req.Header.Get("webhook-id")]
		rc.mu.Unlock()
		reqs <- got{b, req.Header.Clone()}
	}
	ep := r.create(rc)
	rc.mu.Lock()
	old := rc.secret
	rc.mu.Unlock()
	_, fresh, err := r.hooks.Rotate(context.Background(), ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	rc.setSecret(fresh)
	r.deliverer(5*time.Second, nil)
	r.event(model.EventOrderPaid, 14, paidData(14))
	g := <-reqs
	if sigs := strings.Fields(g.h.Get("webhook-signature")); len(sigs) != 2 {
		t.Errorf("webhook-signature %q: want two v1 entries", g.h.Get("webhook-signature"))
	}
	for _, s := range []string{old, fresh} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.Verify(g.body, g.h); err != nil {
			t.Errorf("verify with one of the secrets: %v", err)
		}
		tampered := []byte(strings.Replace(string(g.body), "20.00", "2000.00", 1))
		if err := wh.Verify(tampered, g.h); err == nil {
			t.Error("a tampered body verified")
		}
	}
}

// Resend many: at most the matching deliveries, once per Idempotency-Key;
// a test delivery goes to one endpoint whatever it subscribes to.
func TestWebhookResendManyAndTest(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		ctx := context.Background()
		var testing atomic.Bool // the test delivery: answered at once
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
			if n == 1 && !testing.Load() {
				w.WriteHeader(503)
				return
			}
			w.WriteHeader(200)
		})
		ep := r.create(rc, "payment.refunded")
		r.deliverer(5*time.Second, func(d *service.Deliverer) { d.Schedule = nil }) // one attempt, then FAILED
		var evs []model.Event
		for i := range 3 {
			evs = append(evs, r.event(model.EventRefunded, int64(20+i), model.RefundEventData{OrderID: int64(20 + i), Amount: "1.00", Provider: "alipay"}))
		}
		for _, ev := range evs {
			r.waitState(ep.ID, ev.ID, model.DeliveryFailed)
		}
		n, err := r.hooks.ResendMany(ctx, ep.ID, model.DeliveryFailed, time.Now().Add(-time.Hour), "resend-key-0001")
		if err != nil || n != 3 {
			t.Fatalf("resend many: %d, %v; want 3", n, err)
		}
		for _, ev := range evs {
			r.waitState(ep.ID, ev.ID, model.DeliveryDelivered)
		}
		n, err = r.hooks.ResendMany(ctx, ep.ID, model.DeliveryDelivered, time.Now().Add(-time.Hour), "resend-key-0001")
		if !errors.Is(err, model.ErrAlreadyDone) || n != 3 {
			t.Errorf("the same key again: %d, %v; want the first count and ErrAlreadyDone", n, err)
		}
		testing.Store(true)
		d, err := r.hooks.Test(ctx, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		r.waitState(ep.ID, d.EventID, model.DeliveryDelivered)
		rc.mu.Lock()
		body := string(rc.bodies[d.EventID])
		rc.mu.Unlock()
		if !strings.Contains(body, `"type":"webhook.test"`) || !strings.Contains(body, fmt.Sprintf(`"endpoint_id":%d`, ep.ID)) {
			t.Errorf("test body %s", body)
		}
		rc.checkVerified()
	})
}

// Two deliverers on one backlog: each delivery is sent once.
func TestWebhookTwoDeliverersOneBacklog(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		rc := newReceiver(t, ok200)
		ep := r.create(rc)
		var evs []model.Event
		for i := range 100 {
			evs = append(evs, r.event(model.EventOrderPaid, int64(100+i), paidData(int64(100+i))))
		}
		r.deliverer(5*time.Second, nil)
		r.deliverer(5*time.Second, nil)
		for _, ev := range evs {
			r.waitState(ep.ID, ev.ID, model.DeliveryDelivered)
		}
		for _, ev := range evs {
			if n := rc.count(ev.ID); n != 1 {
				t.Errorf("event %s received %d times", ev.ID, n)
			}
		}
		rc.checkVerified()
	})
}

// A deliverer that stops lets go of the claims it queued but never sent
// (due again at once, for any instance); the one it had in flight keeps
// its lease, to be sent again when that ends.
func TestWebhookStopLetsGoOfQueuedClaims(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		hang := make(chan struct{})
		t.Cleanup(sync.OnceFunc(func() { close(hang) }))
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			select {
			case <-hang:
			case <-req.Context().Done():
			}
		})
		ep := r.create(rc)
		evs := []model.Event{r.event(model.EventOrderPaid, 21, paidData(21)), r.event(model.EventOrderPaid, 22, paidData(22))}
		d := service.NewDeliverer(store, r.keys, webhook.NewSender(r.hooks.Policy(), 30*time.Second), slog.New(slog.DiscardHandler))
		d.Concurrency, d.Lease, d.Interval = 1, time.Minute, 10*time.Millisecond
		f := service.NewFanout(store)
		f.Interval = 10 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			service.RunJobs(ctx, slog.New(slog.DiscardHandler), nil, f.Job(), d.Job())
			close(done)
		}()
		leased := func() []model.WebhookDelivery {
			ds, err := store.WebhookDeliveries(context.Background(), ep.ID, "", time.Time{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			return ds
		}
		waitFor(t, "one delivery in flight and the other claimed behind it", func() bool {
			ds := leased()
			return rc.total() == 1 && len(ds) == 2 && ds[0].Lease != "" && ds[1].Lease != ""
		})
		cancel()
		<-done
		d.Wait()
		now := time.Now()
		for _, dl := range leased() {
			sent := rc.count(dl.EventID) > 0
			switch {
			case sent && dl.Lease == "":
				t.Errorf("the delivery in flight lost its lease")
			case !sent && (dl.Lease != "" || dl.NextAttemptAt.After(now)):
				t.Errorf("the queued delivery was not let go: lease %q, due %v", dl.Lease, dl.NextAttemptAt)
			}
		}
		if rc.count(evs[0].ID)+rc.count(evs[1].ID) != 1 {
			t.Errorf("sent %d and %d times, want one of them once", rc.count(evs[0].ID), rc.count(evs[1].ID))
		}
	})
}

// A 410 stops what its endpoint has queued: the deliveries claimed behind
// it are not sent, and the endpoint is disabled.
func TestWebhookGoneStopsTheQueue(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		var mu sync.Mutex
		served := 0
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			mu.Lock()
			served++
			n := served
			mu.Unlock()
			if n <= 3 {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.WriteHeader(http.StatusGone)
		})
		ep := r.create(rc)
		for i := range 60 {
			r.event(model.EventOrderPaid, int64(300+i), paidData(int64(300+i)))
		}
		// One slot: the first claim is one delivery, the next (its answer
		// timed) runs well ahead of the 410.
		r.deliverer(5*time.Second, func(d *service.Deliverer) { d.Concurrency = 1 })
		waitFor(t, "the endpoint disabled", func() bool {
			e, err := r.hooks.Endpoint(context.Background(), ep.ID)
			return err == nil && !e.Enabled
		})
		waitFor(t, "no delivery PENDING", func() bool {
			ds, err := store.WebhookDeliveries(context.Background(), ep.ID, model.DeliveryPending, time.Time{}, 100)
			return err == nil && len(ds) == 0
		})
		// The one 410 and, at most, one more a round claimed as it came.
		if n := rc.total(); n < 4 || n > 5 {
			t.Errorf("%d requests, want the three delivered and the 410 (a fifth at most)", n)
		}
	})
}

// Disabling an endpoint stops what the deliverer queued for it: once the
// change is committed no request starts (the one in flight ends).
func TestWebhookDisableStopsTheQueue(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		hold := make(chan struct{})
		release := sync.OnceFunc(func() { close(hold) })
		t.Cleanup(release)
		var mu sync.Mutex
		served := 0
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			mu.Lock()
			served++
			n := served
			mu.Unlock()
			if n == 4 { // the three before it timed the endpoint: a claim runs ahead
				select {
				case <-hold:
				case <-req.Context().Done():
				}
			}
			w.WriteHeader(http.StatusNoContent)
		})
		ep := r.create(rc)
		for i := range 60 {
			r.event(model.EventOrderPaid, int64(400+i), paidData(int64(400+i)))
		}
		d := r.deliverer(5*time.Second, func(d *service.Deliverer) { d.Concurrency = 1 })
		r.hooks.OnStop = d.Forget
		waitFor(t, "the fourth request held", func() bool { return rc.total() == 4 })
		off := false
		if _, err := r.hooks.Update(context.Background(), ep.ID, service.EndpointInput{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		release()
		waitFor(t, "the held request's attempt logged", func() bool {
			ds, err := r.hooks.Deliveries(context.Background(), ep.ID, "", time.Time{}, 100)
			n := 0
			for _, d := range ds {
				n += len(d.Log)
			}
			return err == nil && n >= 4
		})
		if n := rc.total(); n != 4 {
			t.Errorf("%d requests, want 4: nothing queued is sent after the disable", n)
		}
	})
}

// A second rotation within the day of overlap would stop at once the
// secret the receiver may still hold — the first's answer lost, say, and
// the call made again — so it is refused and changes nothing; an
// immediate rotation is the way to stop a leaked secret, and after it
// only the new secret signs.
func TestWebhookRotateTwiceWithinTheOverlap(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		ctx := context.Background()
		reqs := make(chan http.Header, 10)
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			reqs <- req.Header.Clone()
			w.WriteHeader(200)
		})
		ep := r.create(rc) // the receiver holds the first secret
		first, _, err := r.hooks.Rotate(ctx, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := r.hooks.Rotate(ctx, ep.ID) // the first answer lost
		if !errors.Is(err, model.ErrNotActionable) || !strings.Contains(err.Error(), "signs until") {
			t.Fatalf("a second rotation within the overlap: %+v, %v; want refused", again, err)
		}
		if got, err := r.hooks.Endpoint(ctx, ep.ID); err != nil || got.Secret != first.Secret || got.PreviousSecret != first.PreviousSecret {
			t.Fatalf("the refused rotation changed the endpoint: %+v, %v", got, err)
		}
		r.deliverer(5*time.Second, nil)
		r.event(model.EventOrderPaid, 21, paidData(21))
		<-reqs
		rc.checkVerified() // still with the secret it was given first

		_, leaked, err := r.hooks.RotateImmediately(ctx, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		rc.setSecret(leaked)
		r.event(model.EventOrderPaid, 22, paidData(22))
		if h := <-reqs; len(strings.Fields(h.Get("webhook-signature"))) != 1 {
			t.Errorf("webhook-signature %q after an immediate rotation: want the new secret's alone", h.Get("webhook-signature"))
		}
		rc.checkVerified()

		// After WEBHOOK_SECRET_KEY changed, the stored secret is
		// unreadable: a rotation does not keep it to sign beside the new
		// one (the deliverer could not open it, and would skip the
		// endpoint for the day).
		rekeyed := service.NewWebhooks(store, testKeyring(t))
		e, _, err := rekeyed.Rotate(ctx, ep.ID)
		if err != nil || e.PreviousSecret != "" || e.PreviousUntil != nil {
			t.Errorf("rotation under a new key: %+v, %v; want no previous secret", e, err)
		}
	})
}

// Nothing is queued for a disabled endpoint: a test delivery or a resend
// would wait unclaimed and reach it only once enabled, against "enabled
// again, it gets only what is committed after".
func TestWebhookDisabledEndpointQueuesNothing(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newHookRig(t, store)
		ctx := context.Background()
		rc := newReceiver(t, ok200)
		ep := r.create(rc)
		since := time.Now().Add(-time.Hour)
		if n, err := r.hooks.ResendMany(ctx, ep.ID, model.DeliveryFailed, since, "resend-k1"); err != nil || n != 0 {
			t.Fatalf("resend many while enabled: %d, %v", n, err)
		}
		off := false
		if _, err := r.hooks.Update(ctx, ep.ID, service.EndpointInput{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		// The same Idempotency-Key again is still its first answer.
		if n, err := r.hooks.ResendMany(ctx, ep.ID, model.DeliveryFailed, since, "resend-k1"); !errors.Is(err, model.ErrAlreadyDone) || n != 0 {
			t.Errorf("the same resend again, now disabled: %d, %v; want the first answer replayed", n, err)
		}
		if _, err := r.hooks.Test(ctx, ep.ID); !errors.Is(err, model.ErrNotActionable) {
			t.Errorf("a test delivery to a disabled endpoint: %v, want refused", err)
		}
		if _, err := r.hooks.Resend(ctx, ep.ID, 1); !errors.Is(err, model.ErrNotActionable) {
			t.Errorf("a resend to a disabled endpoint: %v, want refused", err)
		}
		if _, err := r.hooks.ResendMany(ctx, ep.ID, model.DeliveryFailed, time.Now().Add(-time.Hour), ""); !errors.Is(err, model.ErrNotActionable) {
			t.Errorf("resending many to a disabled endpoint: %v, want refused", err)
		}
		if ds, err := store.WebhookDeliveries(ctx, ep.ID, "", time.Time{}, 10); err != nil || len(ds) != 0 {
			t.Errorf("deliveries of the disabled endpoint: %+v, %v; want none", ds, err)
		}
	})
}
