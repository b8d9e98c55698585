package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/internal/galeratest"
	"paynotify/internal/racetest"
	"paynotify/model"
	"paynotify/service"
)

// Two retention jobs, their stores on two nodes, purging one backlog at
// once, round after round until both find nothing: SENT outbox rows past
// OUTBOX_RETENTION, expired console sessions and the bill lines of cleanly
// reconciled old dates. Both read the same due keys (SKIP LOCKED is not
// used, and a node's locks are its own), so both delete the same rows: the
// second delete of a row to commit fails certification (1213) and the
// store retries it, finding the row gone. Every due row is deleted once
// (the rows both report deleting add up to the backlog), nothing not due
// is, and no round fails. The race's two sides are which job deleted more.
func TestGaleraRetentionOnTwoNodes(t *testing.T) {
	c := galeratest.Shared(t)
	db := c.Database(t)
	ctx := context.Background()
	environ := []string{"DB_DRIVER=mysql", "DB_DSN=" + c.Nodes[2].DSN(db)}
	if err := run(ctx, environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	var stores [3]*dao.Store
	for i, nd := range c.Nodes {
		// wsrep_retry_autocommit=0: the server does not run a purge's
		// DELETE again when it loses certification, so the store's own
		// retry is what the test sees work.
		s, err := dao.Open(ctx, dao.DriverMySQL, nd.DSN(db)+"&wsrep_retry_autocommit=0", dao.Options{MaxOpenConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	seed := stores[2] // the fixtures and the checks, on the third node
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := seed.SQL().QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}

	const outboxDue, sessionsDue, linesDue = 2000, 200, 1500
	now := time.Now()
	racetest.BothWays(t, "backlogs mostly purged by node 1's job", "by node 2's", func(t *testing.T, r int) (int, int) {
		// Due: SENT 8 days ago, expired an hour ago, lines of two dates
		// reconciled cleanly 100 days ago and more. Not due: SENT an hour
		// ago, PENDING for a month, a live session, the lines of a date
		// with an unresolved item and of a recent date.
		var outbox []string
		var args []any
		for i := range outboxDue + 2 {
			state, sent := model.OutboxSent, now.Add(-8*24*time.Hour)
			var sentTime any = sent.UTC()
			switch i {
			case outboxDue:
				sent, sentTime = now.Add(-time.Hour), now.Add(-time.Hour).UTC()
			case outboxDue + 1:
				state, sent, sentTime = model.OutboxPending, now.Add(-30*24*time.Hour), nil
			}
			id := fmt.Sprintf("0190b000-0000-7000-8000-%04x%08x", r, i)
			outbox = append(outbox, "(?,?,?,?,?,?,?,?,0)")
			args = append(args, id, 1, "order.paid", `{"id":"`+id+`","type":"order.paid","aggregate_id":1,"data":{}}`, string(state), sent.UTC(), sent.UTC(), sentTime)
		}
		insertRows(t, seed, "INSERT INTO outbox (event_id, aggregate_id, event_type, payload, state, next_attempt_at, create_time, sent_time, webhook_pending) VALUES ", outbox, args, 8)
		var sessions []string
		args = nil
		for i := range sessionsDue + 1 {
			exp := now.Add(-time.Hour)
			if i == sessionsDue {
				exp = now.Add(time.Hour)
			}
			sessions = append(sessions, "(?,?,?,?,?)")
			args = append(args, fmt.Sprintf("%016x%048x", r, i), "alice", strings.Repeat("c", 64), exp.UTC(), now.UTC())
		}
		insertRows(t, seed, "INSERT INTO console_session (token_hash, operator, csrf_token, expires_at, create_time) VALUES ", sessions, args, 5)
		day := func(days int) string { return now.In(model.Beijing).AddDate(0, 0, days).Format("2006-01-02") }
		base := -100 - 10*r
		dates := []struct {
			date       string
			unresolved bool
			lines      int
		}{
			{day(base), false, linesDue / 2}, {day(base - 1), false, linesDue - linesDue/2}, // due
			{day(base - 2), true, 50}, // an item unresolved: kept
			{day(-10 - r), false, 50}, // recent: kept
		}
		for _, d := range dates {
			seedReconDate(t, seed, d.date, d.unresolved, d.lines, now)
		}
		keptLines := count("SELECT COUNT(*) FROM recon_seen") - linesDue

		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			deleted [2]map[service.PurgeTable]int
			rounds  [2]int
		)
		start := make(chan struct{})
		for i := range 2 {
			deleted[i] = map[service.PurgeTable]int{}
			ret := service.NewRetention(stores[i])
			ret.Batch = 100 // many rounds, each instance's batches meeting the other's
			ret.OnPurged = func(table service.PurgeTable, n int) { mu.Lock(); deleted[i][table] += n; mu.Unlock() }
			wg.Go(func() {
				<-start
				for rounds[i] = 1; rounds[i] <= 1000; rounds[i]++ {
					n, err := ret.RunOnce(ctx)
					if err != nil {
						t.Errorf("node %d's round %d: %v", i+1, rounds[i], err)
						return
					}
					if n == 0 {
						return
					}
				}
				t.Errorf("node %d's job never caught up", i+1)
			})
		}
		conflicts := certConflicts(t, c)
		close(start)
		wg.Wait()
		conflicts = certConflicts(t, c) - conflicts
		if t.Failed() {
			return 0, 0
		}
		total := [2]int{}
		for i := range 2 {
			for _, n := range deleted[i] {
				total[i] += n
			}
		}
		t.Logf("backlog %d: node 1's job deleted %v in %d rounds, node 2's %v in %d; %d statements aborted by a conflict with the other node's",
			r, deleted[0], rounds[0], deleted[1], rounds[1], conflicts)
		for table, want := range map[service.PurgeTable]int{service.PurgeOutbox: outboxDue, service.PurgeSessions: sessionsDue, service.PurgeSeen: linesDue} {
			if got := deleted[0][table] + deleted[1][table]; got != want {
				t.Errorf("%s: the jobs deleted %d and %d rows, want %d due in all", table, deleted[0][table], deleted[1][table], want)
			}
		}
		if n := count("SELECT COUNT(*) FROM outbox"); n != 2*(r+1) {
			t.Errorf("%d outbox rows kept, want the recent SENT and the PENDING of each backlog", n)
		}
		if n := count("SELECT COUNT(*) FROM console_session"); n != r+1 {
			t.Errorf("%d sessions kept, want the live one of each backlog", n)
		}
		if n := count("SELECT COUNT(*) FROM recon_seen"); n != keptLines {
			t.Errorf("%d bill lines kept, want %d (a date with an unresolved item, a recent date)", n, keptLines)
		}
		if n := count("SELECT COUNT(*) FROM recon_run WHERE bill_date IN (?, ?) AND seen_purge = 'PURGED'", dates[0].date, dates[1].date); n != 2 {
			t.Errorf("%d of the two purged dates marked PURGED", n)
		}
		if total[0] > total[1] {
			return 1, 0
		}
		return 0, 1
	})
}

// insertRows inserts rows (each a "(?,…)" of per args) in statements of
// at most 250 rows.
func insertRows(t *testing.T, store *dao.Store, insert string, rows []string, args []any, per int) {
	t.Helper()
	const chunk = 250
	for from := 0; from < len(rows); from += chunk {
		to := min(from+chunk, len(rows))
		if _, err := store.SQL().Exec(insert+strings.Join(rows[from:to], ", "), args[from*per:to*per]...); err != nil {
			t.Fatal(err)
		}
	}
}

// seedReconDate inserts a DONE run of date, with one unresolved item if
// unresolved, and lines bill lines.
func seedReconDate(t *testing.T, store *dao.Store, date string, unresolved bool, lines int, now time.Time) {
	t.Helper()
	res, err := store.SQL().Exec("INSERT INTO recon_run (provider, bill_date, state, lease_until, create_time, update_time) VALUES (?,?,?,?,?,?)",
		model.ProviderAlipay, date, string(model.ReconDone), now.UTC(), now.UTC(), now.UTC())
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	if unresolved {
		if _, err := store.SQL().Exec("INSERT INTO recon_item (run_id, attempt_no, outcome, ref, create_time, update_time) VALUES (?,?,?,?,?,?)",
			id, 1, "AMOUNT_DIFFERS", date+"-item", now.UTC(), now.UTC()); err != nil {
			t.Fatal(err)
		}
	}
	var rows []string
	var args []any
	for i := range lines {
		kind := model.BillPayment
		if i%3 == 2 {
			kind = model.BillRefund
		}
		rows = append(rows, "(?,?,?,?,?,?,?,?)")
		args = append(args, model.ProviderAlipay, string(kind), fmt.Sprintf("%s-%d", date, i), date, fmt.Sprintf("T%s-%d", date, i), "1.00", "0.01", now.UTC())
	}
	insertRows(t, store, "INSERT INTO recon_seen (provider, kind, ref, bill_date, trade_no, amount, fee, create_time) VALUES ", rows, args, 8)
}
