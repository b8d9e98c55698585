package dao_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// The outbox's sent rows are history: the console counts them up to a
// cap, and says "or more".
func TestOutboxQueueCapsSent(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		insertSent := func(from, n int) {
			t.Helper()
			now := time.Now().UTC()
			for done := 0; done < n; done += 500 {
				k := min(500, n-done)
				var args []any
				for i := range k {
					id := fmt.Sprintf("0190a000-0000-7000-8000-%012d", from+done+i)
					args = append(args, id, 1, "order.paid", `{"id":"`+id+`","type":"order.paid","aggregate_id":1,"data":{}}`, "SENT", now, now, now)
				}
				q := "INSERT INTO outbox (event_id, aggregate_id, event_type, payload, state, next_attempt_at, create_time, sent_time) VALUES " +
					strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?,?),", k), ",")
				if _, err := store.SQL().ExecContext(ctx, q, args...); err != nil {
					t.Fatal(err)
				}
			}
		}
		insertSent(0, 10000)
		q, err := store.OutboxQueue(ctx, model.OutboxSent)
		if err != nil || q.Count != 10000 || q.AtLeast {
			t.Fatalf("10,000 sent: %+v %v", q, err)
		}
		insertSent(10000, 1)
		q, err = store.OutboxQueue(ctx, model.OutboxSent)
		if err != nil || q.Count != 10000 || !q.AtLeast {
			t.Fatalf("10,001 sent: %+v %v, want 10,000 or more", q, err)
		}
		if q, err := store.OutboxQueue(ctx, model.OutboxPending); err != nil || q.Count != 0 || q.AtLeast {
			t.Fatalf("pending: %+v %v", q, err)
		}
	})
}
