package console_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"paynotify/console"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
	"paynotify/webhook"
)

// hookedEnv is a console with webhooks on, a receiver answering 204, and
// a deliverer the test runs round by round.
type hookedEnv struct {
	*env
	hooks    *service.Webhooks
	fanout   *service.Fanout
	deliver  *service.Deliverer
	receiver *httptest.Server
	got      atomic.Int64
}

func newHookedEnv(t *testing.T, store *dao.Store) *hookedEnv {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	keys, err := webhook.NewKeyring(base64.StdEncoding.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	h := &hookedEnv{hooks: service.NewWebhooks(store, keys), fanout: service.NewFanout(store)}
	h.hooks.AllowPrivate = true
	h.deliver = service.NewDeliverer(store, keys, webhook.NewSender(h.hooks.Policy(), 5*time.Second), slog.New(slog.DiscardHandler))
	h.receiver = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h.got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.receiver.Close)
	h.env = newEnv(t, store, func(d *console.Deps) { d.Webhooks = h.hooks })
	return h
}

// deliverAll fans out what is committed and runs the deliverer until
// nothing is left to send or record.
func (h *hookedEnv) deliverAll(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.fanout.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		n, err := h.deliver.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h.deliver.Wait()
		if n == 0 {
			return
		}
	}
}

var secretShown = regexp.MustCompile(`<code class="secret" id="secret">(whsec_[^<]+)</code>`)

// lastAudit is the newest admin_audit row.
func lastAudit(t *testing.T, store *dao.Store) model.Audit {
	t.Helper()
	rows := audits(t, store)
	if len(rows) == 0 {
		t.Fatal("no audit row")
	}
	return rows[len(rows)-1]
}

// An operator registers an endpoint in the console (its secret shown
// once), sees a test delivery delivered and its attempt, rotates the
// secret, resends, disables and deletes it: each change audited under the
// operator's name with the admin API's action names, the endpoint's id as
// the target; a form posted twice does its work once.
func TestConsoleWebhookEndpoints(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		h := newHookedEnv(t, store)
		c := h.signedIn(t, "alice")
		list := c.mustGet(t, "/console/webhooks", http.StatusOK)
		if !strings.Contains(list.body, "No endpoint registered yet") {
			t.Fatalf("empty list:\n%s", list.body)
		}
		form := url.Values{"csrf": {field(t, csrfField, list.body)}, "key": {field(t, keyField, list.body)},
			"url": {h.receiver.URL + "/hook"}, "all": {"1"}, "description": {"warehouse"}}
		created := c.post(t, "/console/webhooks", form)
		if created.status != http.StatusOK || !strings.Contains(created.body, "shown this once") {
			t.Fatalf("create: %d\n%s", created.status, created.body)
		}
		secret := field(t, secretShown, created.body)
		if !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("secret %q", secret)
		}
		es, err := h.hooks.Endpoints(t.Context())
		if err != nil || len(es) != 1 {
			t.Fatalf("endpoints %v %v", es, err)
		}
		id := es[0].ID
		a := lastAudit(t, store)
		if a.Action != model.AuditWebhookCreate || a.Operator != "alice" || a.TargetID == "" || a.TargetKind != model.TargetWebhook {
			t.Errorf("create audited as %+v", a)
		}
		if again := c.post(t, "/console/webhooks", form); again.status != http.StatusSeeOther || !strings.Contains(again.location, "done=already") {
			t.Errorf("the same create form again: %d %q", again.status, again.location)
		}
		if es, _ := h.hooks.Endpoints(t.Context()); len(es) != 1 {
			t.Errorf("%d endpoints after the form was posted twice", len(es))
		}
		if page := c.mustGet(t, "/console/webhooks", http.StatusOK); strings.Contains(page.body, secret) {
			t.Error("the list shows the secret again")
		}

		path := "/console/webhooks/" + a.TargetID
		page := c.mustGet(t, path, http.StatusOK)
		post := func(action string, extra url.Values) response {
			t.Helper()
			f := url.Values{"csrf": {c.csrf(t)}, "key": {newKey()}}
			for k, v := range extra {
				f[k] = v
			}
			return c.post(t, path+"/"+action, f)
		}
		if r := post("test", nil); r.status != http.StatusSeeOther || !strings.Contains(r.location, "done=webhook-tested") {
			t.Fatalf("test: %d %q\n%s", r.status, r.location, r.body)
		}
		h.deliverAll(t)
		if h.got.Load() != 1 {
			t.Fatalf("receiver got %d requests, want the test delivery", h.got.Load())
		}
		page = c.mustGet(t, path, http.StatusOK)
		if !strings.Contains(page.body, "webhook.test") || !strings.Contains(page.body, "delivered") {
			t.Fatalf("endpoint page without the delivered test:\n%s", page.body)
		}
		ds, err := h.hooks.Deliveries(t.Context(), id, "", time.Time{}, 10)
		if err != nil || len(ds) != 1 {
			t.Fatalf("deliveries %v %v", ds, err)
		}
		attempts := c.mustGet(t, path+"/deliveries/"+itoa(ds[0].ID), http.StatusOK)
		if !strings.Contains(attempts.body, `<td class="num">204</td>`) {
			t.Errorf("attempts page without the 204:\n%s", attempts.body)
		}

		rotated := post("rotate", nil)
		if rotated.status != http.StatusOK || !strings.Contains(rotated.body, "both signatures") || field(t, secretShown, rotated.body) == secret {
			t.Errorf("rotate: %d\n%s", rotated.status, rotated.body)
		}
		if a := lastAudit(t, store); a.Action != model.AuditWebhookRotate || a.Operator != "alice" {
			t.Errorf("rotate audited as %+v", a)
		}
		if again := post("rotate", nil); again.status != http.StatusConflict || !strings.Contains(again.body, "signs until") {
			t.Errorf("rotate again within the overlap: %d\n%s", again.status, again.body)
		}
		now := post("rotate", url.Values{"immediate": {"true"}})
		if now.status != http.StatusOK || !strings.Contains(now.body, "alone signs") || field(t, secretShown, now.body) == field(t, secretShown, rotated.body) {
			t.Errorf("rotate now: %d\n%s", now.status, now.body)
		}

		resend := c.post(t, path+"/deliveries/"+itoa(ds[0].ID)+"/resend", url.Values{"csrf": {c.csrf(t)}, "key": {newKey()}})
		if resend.status != http.StatusSeeOther || !strings.Contains(resend.location, "done=webhook-resent") {
			t.Errorf("resend: %d %q\n%s", resend.status, resend.location, resend.body)
		}
		if a := lastAudit(t, store); a.Action != model.AuditWebhookResend || a.Operator != "alice" {
			t.Errorf("resend audited as %+v", a)
		}
		h.deliverAll(t)
		if h.got.Load() != 2 {
			t.Errorf("receiver got %d requests after the resend, want 2", h.got.Load())
		}
		many := post("resend", url.Values{"since": {"2026-01-01"}})
		if many.status != http.StatusSeeOther || !strings.Contains(many.location, "n=0") {
			t.Errorf("resend failed since: %d %q", many.status, many.location)
		}

		// A delivery that cannot be made fails, and the counts show it.
		if err := store.UpdateWebhooks(t.Context(), func(ctx context.Context, tx *dao.WebhookTx) error {
			_, err := tx.FailPending(ctx, id, "test", time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.hooks.Test(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if list := c.mustGet(t, "/console/webhooks", http.StatusOK); !strings.Contains(list.body, `<td class="num">1</td>`) {
			t.Errorf("list without the waiting delivery's count:\n%s", list.body)
		}
		if r := post("enabled", url.Values{"enabled": {"false"}}); r.status != http.StatusSeeOther {
			t.Errorf("disable: %d\n%s", r.status, r.body)
		}
		if e, _ := h.hooks.Endpoint(t.Context(), id); e.Enabled {
			t.Error("still enabled after Disable")
		}
		if a := lastAudit(t, store); a.Action != model.AuditWebhookUpdate || a.Operator != "alice" {
			t.Errorf("disable audited as %+v", a)
		}
		confirm := c.mustGet(t, path+"/delete", http.StatusOK)
		del := c.post(t, path+"/delete", url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, confirm.body)}, "confirm": {"yes"}})
		if del.status != http.StatusSeeOther {
			t.Fatalf("delete: %d\n%s", del.status, del.body)
		}
		if a := lastAudit(t, store); a.Action != model.AuditWebhookDelete || a.Operator != "alice" || a.TargetID != itoa(id) {
			t.Errorf("delete audited as %+v", a)
		}
		c.mustGet(t, path, http.StatusNotFound)
		if ov := c.mustGet(t, "/console/", http.StatusOK); !strings.Contains(ov.body, "webhook deliveries failed") {
			t.Errorf("overview without the webhook queue:\n%s", ov.body)
		}
	})
}

// An order's page shows the webhook deliveries of its events.
func TestConsoleTimelineShowsDeliveries(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	h := newHookedEnv(t, store)
	u, types := h.receiver.URL+"/hook", []string{"order.paid"}
	e, _, err := h.hooks.Create(t.Context(), service.EndpointInput{URL: &u, EventTypes: &types})
	if err != nil {
		t.Fatal(err)
	}
	mustOrder(t, store, "HOOK-TL-1", 1, "20.00")
	h.pay(t, "HOOK-TL-1", "T-HOOK-TL-1", "20.00")
	h.deliverAll(t)
	page := h.signedIn(t, "alice").mustGet(t, "/console/orders/HOOK-TL-1", http.StatusOK)
	if !strings.Contains(page.body, "Webhook deliveries") || !strings.Contains(page.body, "/console/webhooks/"+itoa(e.ID)+"/deliveries/") ||
		!strings.Contains(page.body, "order.paid") {
		t.Fatalf("order page without its webhook delivery:\n%s", page.body)
	}
}

// Without WEBHOOK_SECRET_KEY the page says webhooks are off, names the
// variable, and offers no form.
func TestConsoleWebhooksOff(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	e := newEnv(t, store, func(d *console.Deps) { d.Webhooks = service.NewWebhooks(store, nil) })
	page := e.signedIn(t, "alice").mustGet(t, "/console/webhooks", http.StatusOK)
	if !strings.Contains(page.body, "Webhooks are off") || !strings.Contains(page.body, "WEBHOOK_SECRET_KEY") || strings.Contains(page.body, `action="/console/webhooks"`) {
		t.Fatalf("webhooks-off page:\n%s", page.body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// newKey is a fresh one-time form key, as a page would give.
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
