package handler_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

// A client that cannot make its own key asks for one: the key is its
// member's, places an order and replays it like a key of its own, and is
// refused (invalid_request, nothing placed) when another member sends it
// or it is forged.
func TestIssuedIdempotencyKeys(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newShop(t, store)
		issue := func(member int64) string {
			t.Helper()
			w := s.call(http.MethodPost, "/api/v1/idempotency-keys", s.token(t, member), "", "")
			if w.Code != http.StatusCreated {
				t.Fatalf("issue: %d %s, want 201", w.Code, w.Body)
			}
			var v struct {
				Key       string    `json:"idempotency_key"`
				ExpiresAt time.Time `json:"expires_at"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || v.Key == "" {
				t.Fatalf("issue: %s, %v", w.Body, err)
			}
			if d := time.Until(v.ExpiresAt); d < 23*time.Hour || d > 25*time.Hour {
				t.Fatalf("the key expires at %v, want a day from now", v.ExpiresAt)
			}
			return v.Key
		}
		key := issue(s.alice)
		if other := issue(s.alice); other == key {
			t.Fatalf("two issues gave one key %q", key)
		}
		if w := s.call(http.MethodPost, "/api/v1/idempotency-keys", "", "", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("without a token: %d, want 401", w.Code)
		}

		first, order := s.mustPlace(t, s.alice, key, placeBody(s.sku, 1, 0, 0))
		again, _ := s.mustPlace(t, s.alice, key, placeBody(s.sku, 1, 0, 0))
		if again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
			t.Fatalf("the issued key's replay: %s %q, want the first answer replayed", again.Body, again.Header().Get("Idempotent-Replayed"))
		}
		if order.OrderSN == "" {
			t.Fatalf("no order placed: %s", first.Body)
		}

		before := snapshot(t, store)
		for name, k := range map[string]string{
			"AnotherMembers": key,
			"Forged":         key[:strings.LastIndex(key, ".")+1] + strings.Repeat("A", 22),
		} {
			w := s.call(http.MethodPost, "/api/v1/orders", s.token(t, s.bob), k, placeBody(s.sku, 1, 0, 0))
			if w.Code != http.StatusBadRequest || errorCode(t, w) != "invalid_request" {
				t.Errorf("%s key: %d %s, want 400 invalid_request", name, w.Code, w.Body)
			}
		}
		if after := snapshot(t, store); after != before {
			t.Errorf("a refused key changed the database:\n%s\nwant\n%s", after, before)
		}
	})
}
