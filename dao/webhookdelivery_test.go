package dao_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// A claim whose COMMIT fails returns no deliveries with its error: none
// was leased, and one returned would be sent while another instance may
// claim it too. The context ends after the claim's UPDATE ran, so the
// statements all succeed and the COMMIT is what fails.
func TestClaimDeliveriesFailedCommitReturnsNone(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		now := time.Now().UTC().Truncate(time.Second)
		var ep int64
		if err := store.UpdateWebhooks(ctx, func(ctx context.Context, tx *dao.WebhookTx) error {
			var err error
			ep, err = tx.InsertEndpoint(ctx, model.WebhookEndpoint{URL: "https://example.com/hook", EventTypes: []string{"*"},
				Enabled: true, Secret: "sealed", CreatedAt: now, UpdatedAt: now})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"ev-1", "ev-2"} {
			if _, err := store.InsertDelivery(ctx, model.WebhookDelivery{EndpointID: ep, EventID: id, EventType: "order.paid",
				Body: []byte(`{}`), NextAttemptAt: now.Add(-time.Second), CreatedAt: now}); err != nil {
				t.Fatal(err)
			}
		}

		claimCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		var armed atomic.Bool
		store.OnStatement(func(sql string, _ []any) {
			if armed.Load() && strings.HasPrefix(sql, "UPDATE") && strings.Contains(sql, "lease") {
				cancel()
			}
		})
		armed.Store(true)
		ds, err := store.ClaimDeliveries(claimCtx, ep, now, time.Minute, "token-a", 10)
		armed.Store(false)
		if err == nil {
			t.Fatal("the claim committed: the context did not end before COMMIT")
		}
		if len(ds) != 0 {
			t.Errorf("a failed claim returned %d deliveries with %v", len(ds), err)
		}
		// Nothing was leased: the rows are due for any claim. (The MySQL
		// driver may hand back the connection the cancel closed once:
		// unavailable, tried again.)
		deadline := time.Now().Add(10 * time.Second)
		for {
			ds, err = store.ClaimDeliveries(ctx, ep, now, time.Minute, "token-b", 10)
			if !errors.Is(err, model.ErrUnavailable) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || len(ds) != 2 {
			t.Fatalf("the next claim took %d, %v; want both", len(ds), err)
		}
		for _, d := range ds {
			if d.Lease != "token-b" {
				t.Errorf("delivery %d leased to %q", d.ID, d.Lease)
			}
		}
	})
}
