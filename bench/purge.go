package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sync"
	"time"

	"paynotify/dao"
	"paynotify/service"
)

// With -purge N the service database is filled, before the run, with N
// SENT outbox rows past OUTBOX_RETENTION and N recon_seen lines of dates
// reconciled cleanly past RECON_RETENTION, and at each level the first
// notices are measured a second time while the retention job's rounds
// (service.Retention.RunOnce, the code every serve runs) delete them one
// after another, Pause apart, as the job does while a table has more due. The rounds run in
// the tool's process, as a further instance would run them; the serve
// processes get retentions long enough that their own job leaves the
// backlog alone.

// kindFirstPurge is the first notices measured during purge rounds.
const kindFirstPurge = "service first notice, purging"

// purgeLinesPerDate is how many bill lines each filled date holds: a
// large merchant's day.
const purgeLinesPerDate = 100000

// fillChunk is how many rows one INSERT … SELECT of the fill writes.
const fillChunk = 100000

// serviceRetention keeps the serve processes' own retention job off the
// backlog (ten years).
var serviceRetention = []string{"OUTBOX_RETENTION=87600h", "RECON_RETENTION=87600h"}

// fillPurgeable writes n SENT outbox rows sent 30 days ago and n bill
// lines of dates a year old, each date's run DONE with no items: all of
// it is what the retention job deletes. MariaDB's SEQUENCE engine makes
// the rows inside the server.
func fillPurgeable(ctx context.Context, db *sql.DB, n int, log io.Writer) error {
	t0 := time.Now()
	sent := time.Now().UTC().Add(-30 * 24 * time.Hour).Format("2006-01-02 15:04:05")
	for from := 1; from <= n; from += fillChunk {
		to := min(from+fillChunk-1, n)
		seq := fmt.Sprintf("seq_%d_to_%d", from, to)
		if _, err := db.ExecContext(ctx, "INSERT INTO outbox (event_id, aggregate_id, event_type, payload, state, next_attempt_at, create_time, sent_time, webhook_pending) "+
			"SELECT CONCAT('0190b000-0000-7000-8000-', LPAD(seq, 12, '0')), seq, 'order.paid', '{}', 'SENT', ?, ?, ?, 0 FROM "+seq,
			sent, sent, sent); err != nil {
			return fmt.Errorf("fill outbox: %w", err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO recon_seen (provider, kind, ref, bill_date, trade_no, amount, fee, create_time) "+
			"SELECT 'alipay', 'PAYMENT', CONCAT('B', seq), DATE_FORMAT('2025-06-01' + INTERVAL ((seq - 1) DIV ?) DAY, '%Y-%m-%d'), "+
			"CONCAT('T', seq), 1.00, 0.01, ? FROM "+seq, purgeLinesPerDate, sent); err != nil {
			return fmt.Errorf("fill recon_seen: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO recon_run (provider, bill_date, state, lease_until, started_at, finished_at) "+
		"SELECT DISTINCT provider, bill_date, 'DONE', ?, ?, ? FROM recon_seen", sent, sent, sent); err != nil {
		return fmt.Errorf("fill recon_run: %w", err)
	}
	fmt.Fprintf(log, "bench: filled %d SENT outbox rows and %d bill lines to purge in %v\n", n, n, time.Since(t0).Round(time.Second))
	return nil
}

// purger runs the retention job's rounds on the service database.
type purger struct {
	store *dao.Store
	r     *service.Retention
}

func newPurger(ctx context.Context, dsn string) (*purger, error) {
	store, err := dao.Open(ctx, dao.DriverMySQL, dsn, dao.Options{MaxOpenConns: 4, IOTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	return &purger{store: store, r: service.NewRetention(store)}, nil
}

func (p *purger) close() { p.store.Close() }

// purgeStats is what the rounds of one cell did.
type purgeStats struct {
	rounds  int
	rows    int
	errs    int
	firstEr string
	took    time.Duration
	// longest is the slowest round.
	longest time.Duration
}

// start runs rounds back to back until the returned stop is called, and
// stop says what they did.
func (p *purger) start(ctx context.Context) func() purgeStats {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg sync.WaitGroup
		st purgeStats
	)
	t0 := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			r0 := time.Now()
			n, err := p.r.RunOnce(ctx)
			if ctx.Err() != nil {
				return // a round cut short by the cell's end
			}
			st.rounds++
			st.rows += n
			st.longest = max(st.longest, time.Since(r0))
			if err != nil {
				st.errs++
				if st.firstEr == "" {
					st.firstEr = err.Error()
				}
			}
			// As the job: the next full round after Pause.
			select {
			case <-ctx.Done():
			case <-time.After(p.r.Pause):
			}
		}
	}()
	return func() purgeStats {
		cancel()
		wg.Wait()
		st.took = time.Since(t0)
		return st
	}
}

// remaining counts what is still to purge.
func remaining(ctx context.Context, db *sql.DB) (outbox, lines int64, err error) {
	if err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE state = 'SENT'").Scan(&outbox); err != nil {
		return
	}
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM recon_seen").Scan(&lines)
	return
}
