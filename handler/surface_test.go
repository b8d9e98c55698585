package handler_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

// A JSON body over the 64 KiB cap is 413 body_too_large on every API
// route that reads one, in the API's error shape, and changes nothing.
func TestAPIBodyOverCapIs413(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		var logs logBuffer
		h := newEdge(t, store, &logs)
		mustOrder(t, store, "CAP-1", "10.00")
		was := snapshot(t, store)
		member, admin := memberAuth(t, owner), "Bearer "+payAdminToken
		big := `{"note":"` + strings.Repeat("x", 64<<10) + `"}`
		for _, r := range []struct{ path, auth string }{
			{"/api/v1/orders", member},
			{"/api/v1/orders/CAP-1/pay", member},
			{"/admin/orders/CAP-1/refunds", admin},
		} {
			req := httptest.NewRequest(http.MethodPost, r.path, strings.NewReader(big))
			req.Header.Set("Authorization", r.auth)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "cap-1")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusRequestEntityTooLarge || codeOf(t, w.Body.Bytes()) != "body_too_large" {
				t.Errorf("POST %s: %d %s, want 413 body_too_large", r.path, w.Code, w.Body)
			}
		}
		if now := snapshot(t, store); now != was {
			t.Fatalf("an over-cap body changed the database:\nbefore:\n%s\nafter:\n%s", was, now)
		}
	})
}
