package dao_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// Every statement of the retention job — the reads of a batch's keys,
// its DELETEs, the UPDATE marking a date, the read of the oldest finished
// back-off for its gauge — uses an index on every table
// it reads, on MariaDB (EXPLAIN) and on SQLite
// (EXPLAIN QUERY PLAN): a batch never scans a table that grows by a
// million rows a day, and on MariaDB locks only the rows it deletes.
func TestRetentionUsesIndexes(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		db := store.SQL()
		now := time.Now().UTC()
		old := now.Add(-30 * 24 * time.Hour)
		mustExec := func(q string, args ...any) {
			t.Helper()
			if _, err := db.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		// insert writes n rows of cols, row(i) each, 500 a statement.
		insert := func(table, cols string, n int, row func(i int) []any) {
			t.Helper()
			width := strings.Count(cols, ",") + 1
			for from := 0; from < n; from += 500 {
				k := min(500, n-from)
				args := make([]any, 0, k*width)
				for i := from; i < from+k; i++ {
					args = append(args, row(i)...)
				}
				one := "(" + strings.TrimSuffix(strings.Repeat("?,", width), ",") + ")"
				mustExec("INSERT INTO "+table+" ("+cols+") VALUES "+strings.TrimSuffix(strings.Repeat(one+",", k), ","), args...)
			}
		}
		// Enough rows, and a batch a small enough part of them, that a
		// planner would rather scan than use a bad index.
		insert("outbox", "event_id, aggregate_id, event_type, payload, state, next_attempt_at, create_time, sent_time, webhook_pending", 2000, func(i int) []any {
			state, sent := model.OutboxSent, any(old)
			if i%4 == 0 {
				state, sent = model.OutboxPending, nil
			}
			return []any{fmt.Sprintf("0190a000-0000-7000-8000-%012d", i), i, "order.paid", "{}", string(state), old, old, sent, 0}
		})
		// 200 lines a day of 2026-08-01…10 (old), 500 a day of 2026-11-01…16 (recent, kept).
		insert("recon_seen", "provider, kind, ref, bill_date, trade_no, amount, fee, create_time", 10000, func(i int) []any {
			date := fmt.Sprintf("2026-08-%02d", 1+i/200)
			if i >= 2000 {
				date = fmt.Sprintf("2026-11-%02d", 1+(i-2000)/500)
			}
			return []any{model.ProviderAlipay, string(model.BillPayment), fmt.Sprint("L", i), date, "T", "1.00", "0.01", old}
		})
		insert("recon_run", "provider, bill_date, state, lease_until, create_time, update_time", 11, func(i int) []any {
			return []any{model.ProviderAlipay, fmt.Sprintf("2026-08-%02d", i+1), string(model.ReconDone), old, old, old}
		})
		insert("recon_item", "run_id, attempt_no, outcome, ref, resolved_at, create_time, update_time", 50, func(i int) []any {
			return []any{1000 + i, 1, "AMOUNT_DIFFERS", fmt.Sprint(i), now, now, now}
		})
		insert("console_session", "token_hash, operator, csrf_token, expires_at, create_time", 300, func(i int) []any {
			return []any{fmt.Sprintf("%064d", i), "alice", strings.Repeat("c", 64), now.Add(time.Duration(i-150) * time.Minute), old}
		})
		insert("job_backoff", "job, row_id, row_key, failures, next_try_at, update_time", 900, func(i int) []any {
			switch i % 3 {
			case 0:
				return []any{"order-close", i, "", 1, now, now}
			case 1:
				return []any{"trade-close", i, "", 1, now, now}
			}
			return []any{"refund-enqueue", 0, fmt.Sprint("T", i), 1, now, now}
		})
		if store.Driver() == dao.DriverMySQL {
			mustExec("ANALYZE TABLE outbox, recon_seen, recon_run, recon_item, console_session, job_backoff")
		}

		type statement struct {
			sql  string
			vars []any
		}
		var statements []statement
		seen := map[string]bool{}
		store.OnStatement(func(q string, vars []any) {
			if !seen[q] { // a statement run once a row is explained once
				seen[q] = true
				statements = append(statements, statement{q, vars})
			}
		})
		for _, purge := range []func() (int, error){
			func() (int, error) { return store.PurgeSentOutbox(ctx, now.Add(-7*24*time.Hour), 500) },
			func() (int, error) { return store.PurgeExpiredSessions(ctx, now, 500) },
			func() (int, error) { return store.PurgeFinishedBackoff(ctx, 500) },
			func() (int, error) { return store.PurgeReconciledLines(ctx, "2026-09-01", now, 500) }, // marks a date, deletes its lines
			func() (int, error) { return store.PurgeReconciledLines(ctx, "2026-09-01", now, 500) }, // the rest of them
		} {
			if n, err := purge(); err != nil || n == 0 {
				t.Fatalf("purge: %d rows, %v: want some", n, err)
			}
		}
		// The retention job's gauge: the oldest finished back-off still kept
		// (400 of the 900, whose rows do not exist).
		if _, ok, err := store.OldestFinishedBackoff(ctx); err != nil || !ok {
			t.Fatalf("oldest finished back-off: %v, %v: want one", ok, err)
		}
		if len(statements) < 10 {
			t.Fatalf("%d statements captured: %q", len(statements), statements)
		}
		for _, w := range statements {
			if strings.HasPrefix(w.sql, "SELECT") && strings.Contains(w.sql, "recon_run") {
				continue // finding a date: recon_run holds a row a day, read whole
			}
			plan := explain(t, store, w.sql, w.vars)
			for _, step := range plan {
				if step.fullScan {
					t.Errorf("%s\nscans %s: %s", w.sql, step.table, step.detail)
				}
			}
			t.Logf("%s\n  %v", w.sql, plan)
		}
	})
}

// planStep is one line of a query plan.
type planStep struct {
	table    string
	detail   string
	fullScan bool
}

func (p planStep) String() string { return p.table + ": " + p.detail }

// explain returns q's plan, and which of its steps read a whole table.
func explain(t *testing.T, store *dao.Store, q string, vars []any) []planStep {
	t.Helper()
	var steps []planStep
	if store.Driver() == dao.DriverSQLite {
		rows, err := store.SQL().QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, vars...)
		if err != nil {
			t.Fatalf("explain %s: %v", q, err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			// SCAN t reads every row; SEARCH t USING … INDEX does not.
			steps = append(steps, planStep{table: detail, detail: detail,
				fullScan: strings.HasPrefix(detail, "SCAN ") && !strings.Contains(detail, "COVERING INDEX")})
		}
		return steps
	}
	rows, err := store.SQL().QueryContext(t.Context(), "EXPLAIN "+q, vars...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		steps = append(steps, planStep{table: row["table"],
			detail:   fmt.Sprintf("type=%s key=%s rows=%s %s", row["type"], row["key"], row["rows"], row["Extra"]),
			fullScan: row["type"] == "ALL" || row["key"] == ""})
	}
	return steps
}
