package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"paynotify/internal/galeratest"
)

// galeraTag marks the workloads run on the Galera cluster (-galera).
const galeraTag = " [galera: 2 instances on 2 of 3 nodes]"

// singleTag marks the same workloads on one private plain server, set up
// as a cluster node is (-galera): the cluster's rows beside one server's,
// on the same machine, in the same run, with the same settings.
const singleTag = " [one private server: 2 instances]"

// galeraNodes is how many serve processes -galera runs on each private
// set: on the cluster each on a node of its own (node 1, node 2; node 3
// only replicates), on the one server both on it.
const galeraNodes = 2

// privateSet is the serve processes of one private set of servers.
type privateSet struct {
	tag     string
	servers *galeratest.Cluster
	db      *sql.DB  // the service database, on its first node
	addrs   []string // its serve processes
	sent    int      // distinct notices they received
}

// startGalera starts a private 3-node cluster (internal/galeratest: its own
// data directories and loopback ports, never the server on 3306), creates
// the service database on it and applies the schema through node 1.
func (b *bench) startGalera(ctx context.Context) error {
	b.progress("starting a 3-node Galera cluster (bootstrap, then two joins by rsync SST)")
	c, err := galeratest.Start(3)
	if err != nil {
		return fmt.Errorf("-galera: %w", err)
	}
	b.cluster = c
	b.progress("starting one private MariaDB server without Galera, set up as the nodes are")
	if b.single, err = galeratest.StartServer(); err != nil {
		return fmt.Errorf("-galera: %w", err)
	}
	for _, servers := range []*galeratest.Cluster{b.cluster, b.single} {
		nd := servers.Nodes[0]
		admin, err := sql.Open("mysql", nd.DSN(""))
		if err != nil {
			return err
		}
		err = createDatabase(ctx, admin, b.svcDB)
		admin.Close()
		if err != nil {
			return fmt.Errorf("create database %s on %s: %w", b.svcDB, nd.Name, err)
		}
		b.progress("paynotify migrate (%s, through %s)", b.svcDB, nd.Name)
		if err := migrateDB(ctx, b.bin, append(b.serviceEnv("127.0.0.1:0"), "DB_DSN="+nd.DSN(b.svcDB))); err != nil {
			return err
		}
	}
	return nil
}

// galeraDSN is the service database on cluster node i.
func (b *bench) galeraDSN(i int) string { return b.cluster.Nodes[i].DSN(b.svcDB) }

// conflictResult is what measureConflicts saw.
type conflictResult struct {
	pairs     int
	conflicts int             // pairs whose loser got 1213
	alone     []time.Duration // one transaction, no rival (sorted)
	winner    []time.Duration // the pair's first to commit (sorted)
	loser     []time.Duration // the other: from BEGIN to its retry's COMMIT (sorted)
}

// measureConflicts measures what a certification conflict costs: pairs
// of the same transaction (lock a row FOR UPDATE, update it, commit) run
// at once on node 1 and node 2. Row locks are per node, so both get the
// lock; the second to reach certification is aborted with 1213 and runs
// again, as the store retries it. Beside them, the same transaction alone.
func measureConflicts(ctx context.Context, dsn1, dsn2 string, pairs int) (conflictResult, error) {
	var res conflictResult
	open := func(dsn string) (*sql.DB, error) {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		cfg.InterpolateParams = true
		return sql.Open("mysql", cfg.FormatDSN())
	}
	n1, err := open(dsn1)
	if err != nil {
		return res, err
	}
	defer n1.Close()
	n2, err := open(dsn2)
	if err != nil {
		return res, err
	}
	defer n2.Close()
	if _, err := n1.ExecContext(ctx, "CREATE TABLE bench_conflict (id INT PRIMARY KEY, v INT NOT NULL)"); err != nil {
		return res, err
	}
	if _, err := n1.ExecContext(ctx, "INSERT INTO bench_conflict VALUES (1, 0)"); err != nil {
		return res, err
	}
	// once runs the transaction until it commits, and says how long that
	// took and whether a conflict aborted it first.
	once := func(db *sql.DB, start <-chan struct{}) (time.Duration, bool, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return 0, false, err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
			return 0, false, err
		}
		if start != nil {
			<-start
		}
		began, conflicted := time.Now(), false
		for {
			err := func() error {
				tx, err := conn.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				var v int
				if err := tx.QueryRowContext(ctx, "SELECT v FROM bench_conflict WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "UPDATE bench_conflict SET v = ? WHERE id = 1", v+1); err != nil {
					return err
				}
				return tx.Commit()
			}()
			var me *mysql.MySQLError
			switch {
			case err == nil:
				return time.Since(began), conflicted, nil
			case errors.As(err, &me) && me.Number == 1213:
				conflicted = true
			default:
				return 0, false, err
			}
		}
	}
	for range pairs {
		d, _, err := once(n1, nil)
		if err != nil {
			return res, err
		}
		res.alone = append(res.alone, d)
	}
	for range pairs {
		start := make(chan struct{})
		var (
			wg   sync.WaitGroup
			took [2]time.Duration
			lost [2]bool
			errs [2]error
		)
		for i, db := range []*sql.DB{n1, n2} {
			wg.Go(func() { took[i], lost[i], errs[i] = once(db, start) })
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return res, err
		}
		res.pairs++
		w, l := 0, 1
		if lost[0] || (!lost[1] && took[0] > took[1]) {
			w, l = 1, 0
		}
		if lost[l] {
			res.conflicts++
		}
		res.winner = append(res.winner, took[w])
		res.loser = append(res.loser, took[l])
	}
	for _, s := range [][]time.Duration{res.alone, res.winner, res.loser} {
		slices.Sort(s)
	}
	var v int
	if err := n2.QueryRowContext(ctx, "SELECT v FROM bench_conflict WHERE id = 1").Scan(&v); err != nil {
		return res, err
	}
	if want := 3 * pairs; v != want {
		return res, fmt.Errorf("conflict probe: the row counts %d commits, want %d (a commit lost or doubled)", v, want)
	}
	return res, nil
}

// writeConflicts prints what measureConflicts saw.
func (r conflictResult) write(w io.Writer) {
	q := func(s []time.Duration, p float64) float64 {
		if len(s) == 0 {
			return 0
		}
		return ms(s[min(len(s)-1, int(p*float64(len(s))))])
	}
	fmt.Fprintln(w, "### What a certification conflict costs")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%d pairs of one transaction (`SELECT … FOR UPDATE`, `UPDATE`, `COMMIT` on one row) started at once on node 1 and node 2; "+
		"%d of them conflicted (the loser got 1213 and ran again). The same transaction alone on node 1 beside them:\n\n", r.pairs, r.conflicts)
	fmt.Fprintln(w, "| transaction | p50 ms | p99 ms |")
	fmt.Fprintln(w, "|---|---:|---:|")
	fmt.Fprintf(w, "| alone | %.2f | %.2f |\n", q(r.alone, .5), q(r.alone, .99))
	fmt.Fprintf(w, "| pair: first to commit | %.2f | %.2f |\n", q(r.winner, .5), q(r.winner, .99))
	fmt.Fprintf(w, "| pair: the other, to its commit (after 1213 and a retry, if it conflicted) | %.2f | %.2f |\n", q(r.loser, .5), q(r.loser, .99))
	fmt.Fprintln(w)
}
