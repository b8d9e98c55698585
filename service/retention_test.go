package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/internal/racetest"
	"paynotify/model"
	"paynotify/service"
)

// retentionNow is the fixed "now" of the retention tests.
var retentionNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// execSQL runs one statement of a fixture.
func execSQL(t *testing.T, store *dao.Store, q string, args ...any) {
	t.Helper()
	if _, err := store.SQL().ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// outboxRow inserts an outbox row in state, sent (if SENT) at sent, fanned
// out to the webhook endpoints.
func outboxRow(t *testing.T, store *dao.Store, name string, state model.OutboxState, sent time.Time) {
	t.Helper()
	var sentTime any
	if state == model.OutboxSent {
		sentTime = sent.UTC()
	}
	id := fmt.Sprintf("0190a000-0000-7000-8000-%012x", fixtureKey(name))
	execSQL(t, store, "INSERT INTO outbox (event_id, aggregate_id, event_type, payload, state, next_attempt_at, create_time, sent_time, webhook_pending) VALUES (?,?,?,?,?,?,?,?,0)",
		id, 1, "order.paid", `{"id":"`+id+`","type":"order.paid","aggregate_id":1,"data":{}}`, string(state), sent.UTC(), sent.UTC(), sentTime)
}

// fixtureKey is a 48-bit FNV-1a of s, a fixture's unique key.
func fixtureKey(s string) uint64 {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(s) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h & 0xffffffffffff
}

// reconRun inserts a run of date in state, with items (resolved or not)
// and lines bill lines.
func reconRun(t *testing.T, store *dao.Store, date string, state model.ReconState, resolved, unresolved, lines int) {
	t.Helper()
	execSQL(t, store, "INSERT INTO recon_run (provider, bill_date, state, lease_until, create_time, update_time) VALUES (?,?,?,?,?,?)",
		model.ProviderAlipay, date, string(state), retentionNow, retentionNow, retentionNow)
	var id int64
	if err := store.SQL().QueryRowContext(t.Context(), "SELECT id FROM recon_run WHERE bill_date = ?", date).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for i := range resolved + unresolved {
		var at any
		if i < resolved {
			at = retentionNow
		}
		execSQL(t, store, "INSERT INTO recon_item (run_id, attempt_no, outcome, ref, resolved_at, create_time, update_time) VALUES (?,?,?,?,?,?,?)",
			id, 1, "AMOUNT_DIFFERS", fmt.Sprintf("%s-item-%d", date, i), at, retentionNow, retentionNow)
	}
	for i := range lines {
		kind := model.BillPayment
		if i%3 == 2 {
			kind = model.BillRefund
		}
		execSQL(t, store, "INSERT INTO recon_seen (provider, kind, ref, bill_date, trade_no, amount, fee, create_time) VALUES (?,?,?,?,?,?,?,?)",
			model.ProviderAlipay, string(kind), fmt.Sprintf("%s-%d", date, i), date, fmt.Sprintf("T%s-%d", date, i), "1.00", "0.01", retentionNow)
	}
}

// purgeAll runs rounds until one deletes nothing, and says how many rows
// were deleted by table.
func purgeAll(t *testing.T, r *service.Retention) map[service.PurgeTable]int {
	t.Helper()
	deleted := map[service.PurgeTable]int{}
	r.OnPurged = func(table service.PurgeTable, n int) { deleted[table] += n }
	for range 100 {
		n, err := r.RunOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return deleted
		}
	}
	t.Fatal("the retention job never caught up")
	return nil
}

// What must go goes, what must stay stays: each table's rows past their
// retention, finished or expired are deleted and no other; the ledger,
// refunds, journal, audit and idempotency records are never touched; a
// purged date is never reconciled again.
func TestRetention(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		week := 7 * 24 * time.Hour
		// Outbox: SENT past OUTBOX_RETENTION goes; a recent SENT row, and
		// rows never sent however old, stay.
		for i := range 7 {
			outboxRow(t, store, fmt.Sprint("old-sent-", i), model.OutboxSent, retentionNow.Add(-week-time.Duration(i+1)*time.Hour))
		}
		outboxRow(t, store, "recent-sent", model.OutboxSent, retentionNow.Add(-week+time.Hour))
		outboxRow(t, store, "old-pending", model.OutboxPending, retentionNow.Add(-30*24*time.Hour))
		outboxRow(t, store, "old-failed", model.OutboxFailed, retentionNow.Add(-30*24*time.Hour))

		// Sessions: expired go, live stay.
		for i, exp := range []time.Duration{-time.Hour, -time.Minute, time.Minute} {
			execSQL(t, store, "INSERT INTO console_session (token_hash, operator, csrf_token, expires_at, create_time) VALUES (?,?,?,?,?)",
				strings.Repeat(fmt.Sprint(i), 64), "alice", strings.Repeat("c", 64), retentionNow.Add(exp), retentionNow)
		}

		// job_backoff: rows of finished rows go (an order paid, an order
		// gone, a trade closed, a payment refunded); rows still waiting stay.
		execSQL(t, store, "INSERT INTO oms_order (id, order_sn, member_id, pay_amount, status) VALUES (1, 'WAITING', 1, '1.00', ?), (2, 'PAID', 1, '1.00', ?)",
			model.OrderAwaitingPayment, model.OrderPaid)
		execSQL(t, store, "INSERT INTO oms_pay_attempt (id, order_id, attempt_no, out_trade_no, method, amount, state) VALUES (1, 1, 1, 'A1', 'page', '1.00', ?), (2, 2, 1, 'A2', 'page', '1.00', ?)",
			model.AttemptOpen, model.AttemptClosed)
		execSQL(t, store, "INSERT INTO oms_order_payment (provider, trade_no, order_id, out_trade_no, amount, state) VALUES (?, 'T-PENDING', 1, 'X1', '1.00', ?), (?, 'T-DONE', 2, 'X2', '1.00', ?)",
			model.ProviderAlipay, model.PaymentRefundPending, model.ProviderAlipay, model.PaymentRefunded)
		// Last failed (update_time) an hour ago; the rows still waiting
		// five hours ago, and T-GONE, which the first round of 4 leaves,
		// two: the gauge is how long ago the finished row left last failed.
		for _, b := range []struct {
			job    string
			id     int64
			key    string
			failed time.Duration
		}{
			{"order-close", 1, "", 5 * time.Hour}, {"order-close", 2, "", time.Hour}, {"order-close", 99, "", time.Hour},
			{"trade-close", 1, "", 5 * time.Hour}, {"trade-close", 2, "", time.Hour},
			{"refund-enqueue", 0, "T-PENDING", 5 * time.Hour}, {"refund-enqueue", 0, "T-DONE", time.Hour},
			{"refund-enqueue", 0, "T-GONE", 2 * time.Hour},
		} {
			execSQL(t, store, "INSERT INTO job_backoff (job, row_id, row_key, failures, next_try_at, update_time) VALUES (?,?,?,?,?,?)",
				b.job, b.id, b.key, 3, retentionNow.Add(-time.Hour), retentionNow.Add(-b.failed))
		}

		// recon_seen: lines of a date reconciled cleanly (or whose items
		// were all resolved) and past RECON_RETENTION go; lines of a date
		// with an unresolved item, a failed run or a recent date stay.
		reconRun(t, store, "2026-08-01", model.ReconDone, 0, 0, 23)     // clean, old: goes
		reconRun(t, store, "2026-08-02", model.ReconDone, 2, 0, 5)      // resolved, old: goes
		reconRun(t, store, "2026-08-03", model.ReconDone, 1, 1, 5)      // unresolved: stays
		reconRun(t, store, "2026-08-04", model.ReconFailed, 0, 0, 5)    // failed: stays
		reconRun(t, store, "2026-11-01", model.ReconDone, 0, 0, 5)      // recent: stays
		reconRun(t, store, retentionDay(-90), model.ReconDone, 0, 0, 5) // 90 days ago today: stays
		reconRun(t, store, retentionDay(-91), model.ReconDone, 0, 0, 5) // 91 days ago: goes

		// What is never deleted: counted before and after.
		execSQL(t, store, "INSERT INTO oms_refund (out_request_no, kind, provider, trade_no, out_trade_no, order_id, amount, state) VALUES ('R1', 'ORDER', ?, 'T-DONE', 'X2', 2, '1.00', 'REFUNDED')",
			model.ProviderAlipay)
		execSQL(t, store, "INSERT INTO journal_entry (event_id, event_type, order_id, order_sn, account, debit, credit) VALUES ('e', 'order.paid', 2, 'PAID', 'cash', '1.00', '0')")
		execSQL(t, store, "INSERT INTO idempotent_log (business_key) VALUES ('acct:e')")
		execSQL(t, store, "INSERT INTO admin_audit (action_key, operator, action) VALUES ('k', 'alice', 'refund')")
		kept := []string{"oms_order", "oms_order_payment", "oms_pay_attempt", "oms_refund", "journal_entry", "idempotent_log", "admin_audit", "recon_run", "recon_item"}
		before := map[string]int{}
		for _, table := range kept {
			before[table] = countRows(t, store, table, "")
		}

		r := service.NewRetention(store)
		service.SetRetentionClock(r, func() time.Time { return retentionNow })
		r.Batch = 4 // several rounds per table
		overdue := map[service.PurgeTable]time.Duration{}
		r.OnOverdue = func(table service.PurgeTable, d time.Duration) { overdue[table] = d }
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if overdue[service.PurgeOutbox] != 3*time.Hour || overdue[service.PurgeSessions] != 0 || overdue[service.PurgeBackoff] != 2*time.Hour ||
			overdue[service.PurgeSeen] != retentionNow.Sub(time.Date(2026, 8, 2, 0, 0, 0, 0, model.Beijing).Add(r.Recon)) {
			t.Errorf("overdue after one round of 4 rows a table: %v", overdue)
		}
		// The first round took 4 rows of each table (both expired
		// sessions); the rest, out of 7 SENT rows, 5 back-offs and 33 lines.
		deleted := purgeAll(t, r)
		want := map[service.PurgeTable]int{service.PurgeOutbox: 3, service.PurgeSessions: 0, service.PurgeBackoff: 1, service.PurgeSeen: 29}
		for _, table := range service.PurgeTables {
			if deleted[table] != want[table] {
				t.Errorf("%s: the rounds after the first deleted %d, want %d", table, deleted[table], want[table])
			}
		}
		if len(overdue) != len(service.PurgeTables) {
			t.Errorf("overdue told of %v, want every table", overdue)
		}
		for table, d := range overdue {
			if d != 0 {
				t.Errorf("%s still overdue by %v when caught up", table, d)
			}
		}

		if n := countRows(t, store, "outbox", ""); n != 3 {
			t.Errorf("outbox keeps %d rows, want the recent SENT, the PENDING and the FAILED", n)
		}
		if n := countRows(t, store, "outbox", "state = 'SENT'"); n != 1 {
			t.Errorf("outbox keeps %d SENT rows, want the recent one", n)
		}
		if n := countRows(t, store, "console_session", ""); n != 1 {
			t.Errorf("%d sessions kept, want the live one", n)
		}
		var left []string
		rows, err := store.SQL().QueryContext(ctx, "SELECT job, row_id, row_key FROM job_backoff ORDER BY job, row_id, row_key")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var job, key string
			var id int64
			if err := rows.Scan(&job, &id, &key); err != nil {
				t.Fatal(err)
			}
			left = append(left, fmt.Sprintf("%s/%d/%s", job, id, key))
		}
		rows.Close()
		if got := strings.Join(left, " "); got != "order-close/1/ refund-enqueue/0/T-PENDING trade-close/1/" {
			t.Errorf("job_backoff keeps %s, want only the rows still waiting", got)
		}
		for date, n := range map[string]int{"2026-08-01": 0, "2026-08-02": 0, "2026-08-03": 5, "2026-08-04": 5,
			"2026-11-01": 5, retentionDay(-90): 5, retentionDay(-91): 0} {
			if got := countRows(t, store, "recon_seen", "bill_date = ?", date); got != n {
				t.Errorf("recon_seen of %s: %d lines, want %d", date, got, n)
			}
		}
		for _, table := range kept {
			if n := countRows(t, store, table, ""); n != before[table] {
				t.Errorf("%s: %d rows, had %d: never deleted", table, n, before[table])
			}
		}

		// A purged date is never reconciled again (its fees would be booked
		// twice); one whose lines are kept still can be.
		if _, _, err := store.ClaimRun(ctx, model.BillAccount{Provider: model.ProviderAlipay}, "2026-08-01", "x", retentionNow, time.Minute, nil); !errors.Is(err, model.ErrRunPurged) {
			t.Errorf("claim of a purged date: %v, want ErrRunPurged", err)
		}
		if _, _, err := store.ClaimRun(ctx, model.BillAccount{Provider: model.ProviderAlipay}, "2026-08-03", "x", retentionNow, time.Minute, nil); err != nil {
			t.Errorf("claim of a kept date: %v", err)
		}
	})
}

// retentionDay is the Beijing date days after retentionNow's.
func retentionDay(days int) string {
	return retentionNow.In(model.Beijing).AddDate(0, 0, days).Format("2006-01-02")
}

// A run claimed before the purge marks its date keeps its lines: the
// claim and the mark are compare-and-sets on the run's row.
func TestRetentionSparesARunningDate(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		reconRun(t, store, "2026-08-01", model.ReconDone, 0, 0, 3)
		if _, _, err := store.ClaimRun(t.Context(), model.BillAccount{Provider: model.ProviderAlipay}, "2026-08-01", "x", retentionNow, time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		r := service.NewRetention(store)
		service.SetRetentionClock(r, func() time.Time { return retentionNow })
		if deleted := purgeAll(t, r); deleted[service.PurgeSeen] != 0 {
			t.Errorf("deleted %d lines of a running date", deleted[service.PurgeSeen])
		}
	})
}

// Two instances purging at once delete every due row once and nothing
// else: each batch either instance read, one of them deleted. Each round
// starts both on the same 40 due rows; the race's two sides are which
// instance deleted more of them.
func TestRetentionTwoInstances(t *testing.T) {
	for _, driver := range daotest.Drivers {
		t.Run(driver, func(t *testing.T) {
			a, b := openTwice(t, driver)
			racetest.BothWays(t, "rounds won by the first instance", "rounds won by the second", func(t *testing.T, round int) (int, int) {
				for i := range 40 {
					outboxRow(t, a, fmt.Sprintf("r%d-old-%d", round, i), model.OutboxSent, retentionNow.Add(-8*24*time.Hour))
				}
				outboxRow(t, a, fmt.Sprintf("r%d-recent", round), model.OutboxSent, retentionNow.Add(-time.Hour))
				outboxRow(t, a, fmt.Sprintf("r%d-pending", round), model.OutboxPending, retentionNow.Add(-30*24*time.Hour))
				var wg sync.WaitGroup
				start := make(chan struct{})
				got := [2]int{}
				for i, store := range []*dao.Store{a, b} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := service.NewRetention(store)
						service.SetRetentionClock(r, func() time.Time { return retentionNow })
						r.Batch = 20
						r.OnPurged = func(table service.PurgeTable, n int) { got[i] += n }
						<-start
						for range 10 {
							n, err := r.RunOnce(context.Background())
							if err != nil && !errors.Is(err, model.ErrRetryable) {
								t.Error(err)
								return
							}
							if n == 0 && err == nil {
								return
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				if got[0]+got[1] != 40 {
					t.Errorf("round %d: the instances deleted %d and %d rows, want 40 in all", round, got[0], got[1])
				}
				if n := countRows(t, a, "outbox", ""); n != 2*(round+1) {
					t.Errorf("round %d: %d outbox rows kept, want the recent and the pending of each round", round, n)
				}
				if got[0] > got[1] {
					return 1, 0
				}
				return 0, 1
			})
		})
	}
}

// Two sellers' runs of one date: the retention job deletes the bill lines
// of the run reconciled cleanly and keeps the other seller's — whose run
// has an item to look at, and which can still be run again without
// booking its fees twice.
func TestRetentionPurgesOneAccountsLines(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		const date, clean, open = "2026-08-01", "2088000000000031", "2088000000000032"
		for _, account := range []string{clean, open} {
			execSQL(t, store, "INSERT INTO recon_run (provider, account, bill_date, state, lease_until, create_time, update_time) VALUES (?,?,?,?,?,?,?)",
				model.ProviderAlipay, account, date, string(model.ReconDone), retentionNow, retentionNow, retentionNow)
			for i := range 3 {
				execSQL(t, store, "INSERT INTO recon_seen (provider, account, kind, ref, bill_date, trade_no, amount, fee, create_time) VALUES (?,?,?,?,?,?,?,?,?)",
					model.ProviderAlipay, account, string(model.BillPayment), fmt.Sprintf("%s-%d", account, i), date, fmt.Sprintf("T%s-%d", account, i), "1.00", "0.01", retentionNow)
			}
		}
		var openRun int64
		if err := store.SQL().QueryRowContext(t.Context(), "SELECT id FROM recon_run WHERE account = ?", open).Scan(&openRun); err != nil {
			t.Fatal(err)
		}
		execSQL(t, store, "INSERT INTO recon_item (run_id, attempt_no, outcome, ref, create_time, update_time) VALUES (?,?,?,?,?,?)",
			openRun, 1, "AMOUNT_DIFFERS", "open-item", retentionNow, retentionNow)

		r := service.NewRetention(store)
		service.SetRetentionClock(r, func() time.Time { return retentionNow })
		if deleted := purgeAll(t, r); deleted[service.PurgeSeen] != 3 {
			t.Errorf("deleted %d bill lines, want the clean run's 3", deleted[service.PurgeSeen])
		}
		for account, n := range map[string]int{clean: 0, open: 3} {
			if got := countRows(t, store, "recon_seen", "account = ?", account); got != n {
				t.Errorf("recon_seen of %s: %d lines, want %d", account, got, n)
			}
		}
		if _, _, err := store.ClaimRun(t.Context(), model.BillAccount{Provider: model.ProviderAlipay, Account: clean}, date, "x", retentionNow, time.Minute, nil); !errors.Is(err, model.ErrRunPurged) {
			t.Errorf("claim of the purged run: %v, want ErrRunPurged", err)
		}
		if _, _, err := store.ClaimRun(t.Context(), model.BillAccount{Provider: model.ProviderAlipay, Account: open}, date, "x", retentionNow, time.Minute, nil); err != nil {
			t.Errorf("claim of the other seller's run of the date: %v", err)
		}
	})
}
