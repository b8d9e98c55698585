package handler_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
	"paynotify/webhook"
)

const hooksAdmin = "hooks-admin-token-0123456789"

// hooksServer serves the admin API with webhooks on (keys) or off (nil).
func hooksServer(t *testing.T, store *dao.Store, keys *webhook.Keyring) *httptest.Server {
	t.Helper()
	hooks := service.NewWebhooks(store, keys)
	hooks.AllowPrivate = true
	srv := httptest.NewServer(validated(t, handler.New(handler.Deps{
		Log: slog.New(slog.DiscardHandler), AdminToken: hooksAdmin, Queues: service.NewQueues(store),
		Dashboard: service.NewDashboard(store), Lookup: service.NewLookup(store), Webhooks: hooks, DB: store,
		Registry: prometheus.NewRegistry(),
	})))
	t.Cleanup(srv.Close)
	return srv
}

func hooksCall(t *testing.T, srv *httptest.Server, method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+hooksAdmin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: %s", method, path, b)
		}
	}
	return resp.StatusCode, v
}

func errCode(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestWebhookRoutesOffWithoutKey(t *testing.T) {
	srv := hooksServer(t, daotest.Open(t, dao.DriverSQLite), nil)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/admin/webhook-endpoints", `{"url":"https://example.com","event_types":["*"]}`},
		{"GET", "/admin/webhook-endpoints", ""},
		{"GET", "/admin/webhook-endpoints/1", ""},
		{"PATCH", "/admin/webhook-endpoints/1", `{"enabled":false}`},
		{"DELETE", "/admin/webhook-endpoints/1", ""},
		{"POST", "/admin/webhook-endpoints/1/rotate-secret", ""},
		{"POST", "/admin/webhook-endpoints/1/test", ""},
		{"POST", "/admin/webhook-endpoints/1/resend?state=FAILED", ""},
		{"GET", "/admin/events/x/deliveries", ""},
	} {
		status, v := hooksCall(t, srv, r.method, r.path, r.body)
		msg, _ := v["error"].(map[string]any)["message"].(string)
		if status != http.StatusConflict || errCode(v) != "webhooks_off" || !strings.Contains(msg, "WEBHOOK_SECRET_KEY") {
			t.Errorf("%s %s: %d %v, want 409 webhooks_off naming WEBHOOK_SECRET_KEY", r.method, r.path, status, v)
		}
	}
}

func TestWebhookRoutes(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	b := make([]byte, 32)
	rand.Read(b)
	keys, _ := webhook.NewKeyring(base64.StdEncoding.EncodeToString(b))
	srv := hooksServer(t, store, keys)

	status, v := hooksCall(t, srv, "POST", "/admin/webhook-endpoints", `{"url":"ftp://x","event_types":["*"]}`)
	if status != 400 || errCode(v) != "url_refused" {
		t.Errorf("bad URL: %d %v", status, v)
	}
	status, v = hooksCall(t, srv, "POST", "/admin/webhook-endpoints", `{"url":"http://127.0.0.1:9/h","event_types":["nope"]}`)
	if status != 400 || errCode(v) != "invalid_request" {
		t.Errorf("bad event type: %d %v", status, v)
	}
	status, v = hooksCall(t, srv, "POST", "/admin/webhook-endpoints", `{"url":"http://127.0.0.1:9/h","event_types":["order.paid"],"description":"shop"}`)
	secret, _ := v["secret"].(string)
	if status != 201 || !strings.HasPrefix(secret, "whsec_") || v["id"] == nil || v["created_at"] == nil || v["enabled"] != true {
		t.Fatalf("create: %d %v", status, v)
	}
	id := "/admin/webhook-endpoints/" + jsonID(v)
	status, v = hooksCall(t, srv, "GET", id, "")
	if status != 200 || v["secret"] != nil || v["url"] != "http://127.0.0.1:9/h" || v["description"] != "shop" {
		t.Errorf("get: %d %v (the secret is answered once only)", status, v)
	}
	status, v = hooksCall(t, srv, "PATCH", id, `{"enabled":false,"event_types":["*"]}`)
	if status != 200 || v["enabled"] != false || v["event_types"].([]any)[0] != "*" {
		t.Errorf("patch: %d %v", status, v)
	}
	status, v = hooksCall(t, srv, "POST", id+"/test", "")
	if status != 409 || errCode(v) != "not_actionable" {
		t.Errorf("test a disabled endpoint: %d %v, want 409 not_actionable", status, v)
	}
	status, v = hooksCall(t, srv, "PATCH", id, `{"enabled":true}`)
	if status != 200 || v["enabled"] != true {
		t.Errorf("enable: %d %v", status, v)
	}
	status, v = hooksCall(t, srv, "POST", id+"/rotate-secret", "")
	if s, _ := v["secret"].(string); status != 200 || s == secret || !strings.HasPrefix(s, "whsec_") || v["previous_secret_expires_at"] == nil {
		t.Errorf("rotate: %d %v", status, v)
	}
	status, v = hooksCall(t, srv, "POST", id+"/rotate-secret", "")
	if status != 409 || errCode(v) != "not_actionable" {
		t.Errorf("rotate again within the overlap: %d %v, want 409 not_actionable", status, v)
	}
	status, v = hooksCall(t, srv, "POST", id+"/rotate-secret?immediate=yes", "")
	if status != 400 || errCode(v) != "invalid_request" {
		t.Errorf("rotate with immediate=yes: %d %v, want 400", status, v)
	}
	status, v = hooksCall(t, srv, "POST", id+"/rotate-secret?immediate=true", "")
	if s, _ := v["secret"].(string); status != 200 || !strings.HasPrefix(s, "whsec_") || v["previous_secret_expires_at"] != nil {
		t.Errorf("rotate immediately: %d %v, want a secret and no previous one", status, v)
	}
	status, v = hooksCall(t, srv, "POST", id+"/test", "")
	if status != 202 || v["event_type"] != "webhook.test" || v["state"] != "PENDING" {
		t.Errorf("test: %d %v", status, v)
	}
	testID := jsonID(v)
	status, v = hooksCall(t, srv, "GET", id+"/deliveries?state=PENDING", "")
	if ds, _ := v["deliveries"].([]any); status != 200 || len(ds) != 1 || jsonID(ds[0].(map[string]any)) != testID {
		t.Errorf("deliveries: %d %v, want the test delivery %s", status, v, testID)
	}
	status, v = hooksCall(t, srv, "POST", id+"/deliveries/"+testID+"/resend", "")
	if status != 202 || jsonID(v) != testID || v["state"] != "PENDING" {
		t.Errorf("resend the test delivery: %d %v", status, v)
	}
	status, v = hooksCall(t, srv, "GET", id+"/deliveries?since=yesterday", "")
	if status != 400 {
		t.Errorf("bad since: %d %v", status, v)
	}
	for range 2 {
		status, v = hooksCall(t, srv, "POST", id+"/resend?state=FAILED&since=2026-01-01T00:00:00Z", "", "Idempotency-Key", "resend-1")
		if status != 202 || v["queued"] != float64(0) {
			t.Errorf("resend many: %d %v", status, v)
		}
	}
	status, v = hooksCall(t, srv, "POST", id+"/deliveries/999/resend", "")
	if status != 404 || errCode(v) != "webhook_delivery_not_found" {
		t.Errorf("resend unknown: %d %v", status, v)
	}
	if status, _ = hooksCall(t, srv, "DELETE", id, ""); status != 204 {
		t.Errorf("delete: %d", status)
	}
	status, v = hooksCall(t, srv, "GET", id, "")
	if status != 404 || errCode(v) != "webhook_endpoint_not_found" {
		t.Errorf("deleted: %d %v", status, v)
	}
	audits, _ := store.AuditPage(t.Context(), "", 0, 100, false)
	seen := map[model.AuditAction]int{}
	for _, a := range audits {
		seen[a.Action]++
	}
	for a, n := range map[model.AuditAction]int{model.AuditWebhookCreate: 1, model.AuditWebhookUpdate: 2, model.AuditWebhookRotate: 2, model.AuditWebhookDelete: 1} {
		if seen[a] != n {
			t.Errorf("%s audited %d times, want %d", a, seen[a], n)
		}
	}
	if seen[model.AuditWebhookResend] != 2 {
		t.Errorf("one resend and the same Idempotency-Key twice audited %d resends, want 2", seen[model.AuditWebhookResend])
	}
}

func jsonID(v map[string]any) string {
	b, _ := json.Marshal(v["id"])
	return string(b)
}

// A body over the admin API's 64 KiB cap is refused 413 body_too_large on
// both webhook routes that read one (as the OpenAPI document says: the
// server is validated), and registers nothing.
func TestWebhookRoutesRefuseLargeBodies(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	keys, _ := webhook.NewKeyring(base64.StdEncoding.EncodeToString(make([]byte, 32)))
	srv := hooksServer(t, store, keys)
	big := `{"url":"http://127.0.0.1:9/h","event_types":["*"],"description":"` + strings.Repeat("x", 70<<10) + `"}`
	for _, r := range []struct{ method, path string }{
		{"POST", "/admin/webhook-endpoints"},
		{"PATCH", "/admin/webhook-endpoints/1"},
	} {
		status, v := hooksCall(t, srv, r.method, r.path, big)
		if status != http.StatusRequestEntityTooLarge || errCode(v) != "body_too_large" {
			t.Errorf("%s %s with %d bytes: %d %v, want 413 body_too_large", r.method, r.path, len(big), status, v)
		}
	}
	if status, v := hooksCall(t, srv, "GET", "/admin/webhook-endpoints", ""); status != 200 || len(v["endpoints"].([]any)) != 0 {
		t.Errorf("after the refusals: %d %v", status, v)
	}
}
