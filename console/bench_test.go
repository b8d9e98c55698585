package console_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"paynotify/console"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/service"
)

// The 100,000-order ledger the console's pages are measured on.
const (
	benchOrders  = 100_000
	benchMembers = 5_000
	// benchWhale is a member with many orders, for the member list's pages.
	benchWhale = 999_999
)

// BenchmarkPages measures the server time of every console page over a
// ledger of 100,000 orders (paid, paid twice and refunded, closed,
// unpaid; attempts, items, refunds, outbox events, operator actions).
// BENCHMARKS.md records a run on MariaDB:
//
//	TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' go test -run '^$' -bench Pages -benchtime 200x ./console/
//
// CONSOLE_BENCH_DRIVER=sqlite measures the embedded database instead.
func BenchmarkPages(b *testing.B) {
	driver := os.Getenv("CONSOLE_BENCH_DRIVER")
	if driver == "" {
		driver = dao.DriverMySQL
	}
	store := daotest.Open(b, driver)
	start := time.Now()
	seedLedger(b, store)
	b.Logf("seeded %d orders on %s in %s", benchOrders, driver, time.Since(start).Round(time.Second))
	if os.Getenv("CONSOLE_BENCH_NOINDEX") != "" {
		dropConsoleIndexes(b, store)
	}

	h, cookie := benchConsole(b, store)
	get := func(path string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.AddCookie(cookie)
		return r
	}
	pages := []struct {
		name, path string
		want       int
	}{
		{"Overview", "/console/", http.StatusOK},
		{"SearchOrderSN", "/console/search?q=SN" + fmt.Sprint(benchOrders/2), http.StatusSeeOther},
		{"SearchTradeNo", "/console/search?q=TN" + fmt.Sprint(benchOrders/2), http.StatusSeeOther},
		{"SearchOutTradeNo", "/console/search?q=SN" + fmt.Sprint(benchOrders/2) + "-2", http.StatusSeeOther},
		{"SearchOutRequestNo", "/console/search?q=AS-" + fmt.Sprint(benchOrders/2), http.StatusSeeOther},
		{"SearchMember", "/console/search?q=" + fmt.Sprint(benchWhale), http.StatusOK},
		{"SearchMemberNextPage", "/console/search?q=" + fmt.Sprint(benchWhale) + "&before=" + fmt.Sprint(benchOrders/2), http.StatusOK},
		{"SearchNothing", "/console/search?q=NO-SUCH-THING", http.StatusNotFound},
		{"Timeline", "/console/orders/SN" + fmt.Sprint(benchOrders/2), http.StatusOK},
		{"Payment", "/console/payments/TN49962b", http.StatusOK},
		{"QueuePaymentsOwed", "/console/queues/payments?state=REFUND_PENDING", http.StatusOK},
		{"QueuePaymentsRefunded", "/console/queues/payments?state=REFUND_FAILED", http.StatusOK},
		{"QueuePaymentsUnmatched", "/console/queues/payments?state=UNMATCHED", http.StatusOK},
		{"QueueReconciliation", "/console/queues/reconciliation", http.StatusOK},
		{"QueueReconciliationAll", "/console/queues/reconciliation?all=1&page=5", http.StatusOK},
		{"QueueRefundsFailed", "/console/queues/refunds?state=REFUND_FAILED", http.StatusOK},
		{"QueueRefundsInProgress", "/console/queues/refunds?state=REFUNDING", http.StatusOK},
		{"QueueRefundsDonePage40", "/console/queues/refunds?state=REFUNDED&page=40", http.StatusOK},
		{"QueueOutboxFailed", "/console/queues/outbox?state=FAILED", http.StatusOK},
		{"QueueOutboxPending", "/console/queues/outbox?state=PENDING", http.StatusOK},
		{"QueueOutboxSentDeep", "/console/queues/outbox?state=SENT&after=150000", http.StatusOK},
		{"AuditLog", "/console/audit", http.StatusOK},
		{"AuditLogOperator", "/console/audit?operator=bob", http.StatusOK},
		{"RefundForm", "/console/orders/SN" + fmt.Sprint(benchOrders/2+1) + "/refund", http.StatusOK},
		{"ConfirmRetry", "/console/refunds/AS-" + fmt.Sprint(benchFailedRefund) + "/retry", http.StatusOK},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, get(p.path))
				if w.Code != p.want {
					b.Fatalf("GET %s: %d, want %d\n%s", p.path, w.Code, p.want, w.Body.String())
				}
			}
		})
	}
}

// benchFailedRefund is the order whose after-sale refund failed first.
const benchFailedRefund = 100

// benchConsole is the console over store with a signed-in operator's
// session cookie.
func benchConsole(b *testing.B, store *dao.Store) (http.Handler, *http.Cookie) {
	b.Helper()
	sessions := service.NewSessions(store, time.Hour)
	c, err := console.New(console.Deps{Log: quiet(), Dashboard: service.NewDashboard(store), Queues: service.NewQueues(store), Lookup: service.NewLookup(store), Sessions: sessions,
		Refunds: service.NewRefunds(store, nil, quiet()), Operators: operatorHashes(b)})
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := sessions.SignIn(b.Context(), "alice")
	if err != nil {
		b.Fatal(err)
	}
	return c, &http.Cookie{Name: "paynotify_console", Value: token}
}

// seedLedger writes the ledger with multi-row INSERTs: orders spread over
// 30 days (the last 3% within the day), members with 20 orders each and
// one with 2,000; per order one or two items and an attempt; 85% paid,
// every 33rd paid twice (the second refunded, a few still owed back or
// failed), every 20th refunded in part after sale (every 50th of those
// failed at Alipay); two outbox events an order, nearly all sent; 1,000
// operator actions; 40 payments for no order; 30 daily reconciliations of
// 20 items each, the last three days' unresolved.
func seedLedger(b *testing.B, store *dao.Store) {
	b.Helper()
	db := store.SQL()
	now := time.Now().UTC().Truncate(time.Second)
	orders := newBatch(b, db, "oms_order", "id, order_sn, member_id, pay_amount, status, pay_type, payment_time, total_amount, coupon_amount, integration, integration_amount, stock_reservation, create_time, modify_time")
	items := newBatch(b, db, "oms_order_item", "order_id, order_sn, product_sku_id, product_quantity, product_price")
	attempts := newBatch(b, db, "oms_pay_attempt", "order_id, attempt_no, out_trade_no, method, amount, state, next_query_at, expire_at, create_time, update_time")
	payments := newBatch(b, db, "oms_order_payment", "provider, trade_no, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, create_time, update_time")
	refunds := newBatch(b, db, "oms_refund", "out_request_no, kind, provider, trade_no, out_trade_no, order_id, amount, reason, state, attempts, next_attempt_at, last_error, idempotency_key, create_time, update_time")
	outbox := newBatch(b, db, "outbox", "event_id, aggregate_id, event_type, payload, state, attempts, next_attempt_at, last_error, create_time, sent_time")
	audit := newBatch(b, db, "admin_audit", "action_key, operator, action, order_id, target_kind, target_id, before_state, after_state, note, create_time")
	event := func(id int64, typ string, at time.Time, state string, attempts int, lastErr string) {
		evID := fmt.Sprintf("0190a000-0000-7000-8000-%012d", outbox.rows+1)
		payload, _ := json.Marshal(map[string]any{"id": evID, "type": typ, "aggregate_id": id, "occurred_at": at,
			"data": map[string]any{"order_id": id, "order_sn": fmt.Sprintf("SN%d", id)}})
		var sent any
		if state == "SENT" {
			sent = at.Add(time.Second)
		}
		outbox.add(evID, id, typ, string(payload), state, attempts, at, lastErr, at, sent)
	}
	for i := 1; i <= benchOrders; i++ {
		id := int64(i)
		sn := fmt.Sprintf("SN%d", i)
		member := int64(i%benchMembers + 1)
		if i%50 == 7 {
			member = benchWhale
		}
		// Oldest first; the last 3% of orders fall in the last 24 hours.
		var placed time.Time
		if recent := benchOrders * 97 / 100; i > recent {
			placed = now.Add(-time.Duration(benchOrders-i) * 24 * time.Hour / time.Duration(benchOrders-recent))
		} else {
			placed = now.Add(-30*24*time.Hour + time.Duration(i)*29*24*time.Hour/time.Duration(recent))
		}
		amount := fmt.Sprintf("%d.%02d", 10+i%500, i%100)
		status, payType := 0, 0
		var paidAt any
		switch {
		case i%100 < 85:
			status, payType, paidAt = 1, 1, placed.Add(time.Minute)
		case i%100 < 95:
			status = 4
		}
		orders.add(id, sn, member, amount, status, payType, paidAt, amount, "0.00", 0, "0.00", "", placed, placed)
		items.add(id, sn, 1+i%3, 1, amount)
		if i%4 == 0 {
			items.add(id, sn, 2, 1, "0.00")
		}
		attempts.add(id, 1, sn, "page", amount, map[bool]string{true: "PAID", false: "EXPIRED"}[status == 1], placed, placed.Add(29*time.Minute), placed, placed.Add(time.Minute))
		attempts.add(id, 2, sn+"-2", "qr", amount, "CLOSED", placed, placed.Add(29*time.Minute), placed.Add(time.Second), placed.Add(time.Minute))
		event(id, "order.created", placed, "SENT", 1, "")
		if status != 1 {
			if status == 4 {
				event(id, "order.closed", placed.Add(30*time.Minute), "SENT", 1, "")
			}
			continue
		}
		paid := placed.Add(time.Minute)
		payments.add("alipay", fmt.Sprintf("TN%d", i), id, sn, amount, "APPLIED", "", fmt.Sprintf("N%d", i), paid, paid, paid)
		outboxState, tries, lastErr := "SENT", 1, ""
		if i%5000 == 11 {
			outboxState, tries, lastErr = "FAILED", 10, "nats: no responders available for request"
		} else if i > benchOrders-20 {
			outboxState, tries = "PENDING", 0
		}
		event(id, "order.paid", paid, outboxState, tries, lastErr)
		if i%33 == 0 { // paid twice: the second is owed back
			state := "REFUNDED"
			switch {
			case i%(33*300) == 0:
				state = "REFUND_PENDING"
			case i%(33*200) == 0:
				state = "REFUND_FAILED"
			}
			payments.add("alipay", fmt.Sprintf("TN%db", i), id, sn, amount, state, "ALREADY_PAID", fmt.Sprintf("N%db", i), paid, paid.Add(time.Second), paid.Add(time.Minute))
			event(id, "payment.refund_pending", paid.Add(time.Second), "SENT", 1, "")
			if state != "REFUND_PENDING" {
				refundState := map[string]string{"REFUNDED": "REFUNDED", "REFUND_FAILED": "REFUND_FAILED"}[state]
				refunds.add(fmt.Sprintf("RP-TN%db", i), "AUTO", "alipay", fmt.Sprintf("TN%db", i), sn, id, amount, "ALREADY_PAID",
					refundState, 1, paid.Add(time.Minute), "", nil, paid.Add(5*time.Second), paid.Add(time.Minute))
				event(id, "payment.refunded", paid.Add(time.Minute), "SENT", 1, "")
			}
		}
		if i%20 == 0 { // an after-sale refund
			state, lastErr := "REFUNDED", ""
			switch {
			case i%1000 == 100:
				state, lastErr = "REFUND_FAILED", "ACQ.SELLER_BALANCE_NOT_ENOUGH"
			case i > benchOrders-200:
				state = "REFUNDING"
			}
			at := paid.Add(2 * time.Hour)
			refunds.add(fmt.Sprintf("AS-%d", i), "AFTER_SALE", "alipay", fmt.Sprintf("TN%d", i), sn, id, "5.00", "returned",
				state, 1, at, lastErr, fmt.Sprintf("rma-%d", i), at, at.Add(time.Minute))
			if i%50 == 0 {
				audit.add(fmt.Sprintf("bench-%d", i), []string{"alice", "bob"}[i%2], "order.refund", id, "refund", fmt.Sprintf("AS-%d", i),
					"100.00 left to refund", "REFUNDING 5.00", "returned", at)
			}
		}
	}
	// Payments for no order, and a month of daily reconciliations with a
	// few differences each.
	for i := range 40 {
		at := now.Add(-time.Duration(i) * 17 * time.Hour)
		payments.add("alipay", fmt.Sprintf("TU%d", i), nil, fmt.Sprintf("LOST-%d", i), "66.00", "UNMATCHED", "", fmt.Sprintf("NU%d", i), at, at, at)
	}
	runs := newBatch(b, db, "recon_run", "id, provider, bill_date, state, attempts, owner, lease_until, started_at, finished_at, create_time, update_time")
	recon := newBatch(b, db, "recon_item", "run_id, attempt_no, outcome, ref, trade_no, out_trade_no, out_request_no, bill_amount, ledger_amount, detail, resolved_at, resolved_by, note, create_time, update_time")
	outcomes := []string{"REPAIRED", "MISSING_AT_PROVIDER", "AMOUNT_DIFFERS", "UNKNOWN_REFUND", "UNMATCHED"}
	for d := 1; d <= 30; d++ {
		day := now.AddDate(0, 0, -d)
		runs.add(d, "alipay", day.Format("2006-01-02"), "DONE", 1, "bench", day, day, day, day, day)
		for j := range 20 {
			i := d*1000 + j*37
			var resolved any
			if d > 3 {
				resolved = day.Add(time.Hour)
			}
			recon.add(d, 1, outcomes[j%len(outcomes)], fmt.Sprintf("TN%d", i), fmt.Sprintf("TN%d", i), fmt.Sprintf("SN%d", i), "",
				"10.00", "10.50", "the bill and the ledger disagree", resolved, "", "", day, day)
		}
	}
	for _, t := range []*batch{orders, items, attempts, payments, refunds, outbox, audit, runs, recon} {
		t.flush()
	}
	// The query planner needs to know what it is planning over.
	if store.Driver() == dao.DriverMySQL {
		for _, table := range []string{"oms_order", "oms_order_item", "oms_pay_attempt", "oms_order_payment", "oms_refund", "outbox", "admin_audit", "recon_run", "recon_item"} {
			if _, err := db.ExecContext(b.Context(), "ANALYZE TABLE "+table); err != nil {
				b.Fatal(err)
			}
		}
	} else if _, err := db.ExecContext(b.Context(), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

// dropConsoleIndexes drops the indexes migration 00007 adds for the
// console, to measure what they are worth (CONSOLE_BENCH_NOINDEX=1).
func dropConsoleIndexes(b *testing.B, store *dao.Store) {
	b.Helper()
	for _, ix := range [][2]string{
		{"oms_order_payment", "idx_oms_order_payment_state_create_time"}, {"oms_order_payment", "idx_oms_order_payment_create_time"},
		{"oms_order_payment", "idx_oms_order_payment_out_trade_no"}, {"oms_order", "idx_oms_order_member_id"},
		{"outbox", "idx_outbox_aggregate_id"}, {"oms_refund", "idx_oms_refund_state_update_time"},
	} {
		q := "DROP INDEX " + ix[1]
		if store.Driver() == dao.DriverMySQL {
			q += " ON " + ix[0]
		}
		if _, err := store.SQL().ExecContext(b.Context(), q); err != nil {
			b.Fatal(err)
		}
	}
}

// batch collects rows for one multi-row INSERT of up to 500 rows.
type batch struct {
	b     *testing.B
	db    *sql.DB
	head  string
	cols  int
	args  []any
	n     int
	rows  int
	place string
}

func newBatch(b *testing.B, db *sql.DB, table, cols string) *batch {
	n := len(strings.Split(cols, ","))
	return &batch{b: b, db: db, head: "INSERT INTO " + table + " (" + cols + ") VALUES ", cols: n,
		place: "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"}
}

func (t *batch) add(vals ...any) {
	if len(vals) != t.cols {
		t.b.Fatalf("%s: %d values for %d columns", t.head, len(vals), t.cols)
	}
	t.args = append(t.args, vals...)
	t.n++
	t.rows++
	if t.n == 500 {
		t.flush()
	}
}

func (t *batch) flush() {
	if t.n == 0 {
		return
	}
	q := t.head + strings.TrimSuffix(strings.Repeat(t.place+",", t.n), ",")
	if _, err := t.db.ExecContext(t.b.Context(), q, t.args...); err != nil {
		t.b.Fatalf("%s…: %v", t.head, err)
	}
	t.args, t.n = t.args[:0], 0
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
