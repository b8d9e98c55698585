package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paynotify/broker"
	"paynotify/broker/natstest"
	"paynotify/internal/galeratest"
)

// The cluster tests run paynotify on a MariaDB Galera cluster of three
// nodes of their own (galeratest): instance 0 on node 1, instance 1 on
// node 2, and the test's own reads and writes on node 3 — so every check
// reads what the cluster, not the instance's node, holds. One cluster
// serves every test of the package (TestMain stops it); each test has a
// database of its own and leaves every node as it found it.

// startGalera migrates a new database on the shared cluster through node 3
// and starts instance 0 on node 1 and instance 1 on node 2.
func startGalera(t *testing.T, extra ...string) (*galeratest.Cluster, *twoInstances) {
	t.Helper()
	c := galeratest.Shared(t)
	db := c.Database(t)
	ti := startTwoInstancesOn(t, [2]string{c.Nodes[0].DSN(db), c.Nodes[1].DSN(db)}, c.Nodes[2].DSN(db), extra...)
	ti.conflicts = func(t *testing.T) int { return certConflicts(t, c) }
	logOnFailure(t, ti)
	c.LogOnFailure(t)
	return c, ti
}

// certConflicts is how many transactions nodes 1 and 2 have aborted so
// far for another node's write to the same rows: certification failures
// (the loser at its COMMIT, 1213) and brute-force aborts (a local
// transaction in the way of a replicated one). Read before and after a
// race, it says whether the race reached the cluster's conflict path —
// cluster-wide counts, so only what a race adds is its own.
func certConflicts(t *testing.T, c *galeratest.Cluster) int {
	t.Helper()
	total := 0
	for _, nd := range c.Nodes[:2] {
		db, err := sql.Open("mysql", nd.DSN(""))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')")
		if err != nil {
			db.Close()
			t.Fatalf("node %s: %v", nd.Name, err)
		}
		for rows.Next() {
			var name string
			var n int
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			total += n
		}
		err = rows.Err()
		rows.Close()
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return total
}

// The notify, order and cancel races, with the two instances on two nodes:
// row locks are per node there (FOR UPDATE on both nodes returns at
// once), and certification at COMMIT (1213, retried) is what lets one of
// them through.
func TestGaleraRacesAcrossNodes(t *testing.T) {
	_, ti := startGalera(t)
	raceInstances(t, ti)
}

// A node killed (kill -9) and, later, one cut off from the others, each
// while 1,500 notifications (1,200 orders, every fourth notice sent twice,
// to both instances) are being answered, with the outbox relays of both
// instances and an accounting consumer on each of the two nodes: every
// notice answered failure is resent to the other instance (Alipay
// resends; the load balancer routes by /readyz), and at the end nothing
// is lost (every order paid) or doubled (one payment, one event, one
// message on the stream, one booking per order). Readiness follows each
// node out and back in.
func TestGaleraLosesAndDoublesNothing(t *testing.T) {
	nats := natstest.Start(t)
	c, ti := startGalera(t, "NATS_URL="+nats.URL())
	for i := range 2 {
		if _, err := startProcess(t, "consume", "consumer running", ti.env(i)); err != nil {
			t.Fatal(err)
		}
	}

	const orders, chunk = 1200, 300
	var bodies []string
	var jobs []galeraNotice
	for k := range orders {
		sn := fmt.Sprintf("GALERA-LOAD-%d", k)
		bodies = append(bodies, ti.notification(t, sn, "T-"+sn, "1.00"))
		jobs = append(jobs, galeraNotice{body: k, inst: k % 2})
		if k%4 == 0 {
			jobs = append(jobs, galeraNotice{body: k, inst: 1 - k%2})
		}
	}
	ti.orders(t, "GALERA-LOAD-%d", orders, "1.00")

	queue := make(chan galeraNotice, len(jobs))
	var done, lost, resent atomic.Int64
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			for j := range queue {
				tries := ti.notifyUntilSuccess(bodies[j.body], j.inst)
				if tries == 0 {
					lost.Add(1)
				}
				resent.Add(int64(max(tries-1, 0)))
				done.Add(1)
			}
		})
	}
	feed := func(from int) {
		for _, j := range jobs[from:min(from+chunk, len(jobs))] {
			queue <- j
		}
	}
	// waitDone waits until n notices are answered: the next fault then
	// lands while the chunk fed before it is still in flight.
	waitDone := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for done.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d notices answered after 2 min", done.Load(), n)
			}
			time.Sleep(10 * time.Millisecond) // poll interval
		}
	}

	feed(0)
	waitDone(chunk / 2)
	c.Nodes[1].Kill(t)
	feed(chunk)
	ti.waitReady(t, 1, http.StatusServiceUnavailable)
	waitDone(chunk + chunk/2)
	c.Nodes[1].Restart(t) // by IST, while instance 0 takes the load
	feed(2 * chunk)
	ti.waitReady(t, 1, http.StatusOK)
	waitDone(2*chunk + chunk/2)
	c.Nodes[0].Isolate(t, true)
	feed(3 * chunk)
	ti.waitReady(t, 0, http.StatusServiceUnavailable)
	waitDone(3*chunk + chunk/2)
	c.Nodes[0].Isolate(t, false)
	feed(4 * chunk)
	ti.waitReady(t, 0, http.StatusOK)
	close(queue)
	wg.Wait()

	if n := lost.Load(); n > 0 {
		t.Fatalf("%d notices never answered success", n)
	}
	t.Logf("%d notices, %d resends of a notice answered failure", len(jobs), resent.Load())
	count := func(q string) int {
		t.Helper()
		var n int
		if err := ti.store.SQL().QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := count("SELECT COUNT(*) FROM oms_order WHERE status = 1"); n != orders {
		t.Fatalf("%d orders paid, want %d", n, orders)
	}
	if n := count("SELECT COUNT(*) FROM oms_order_payment WHERE state = 'APPLIED'"); n != orders || count("SELECT COUNT(*) FROM oms_order_payment") != orders {
		t.Fatalf("%d APPLIED payments, want %d and no other", n, orders)
	}
	if n := count("SELECT COUNT(*) FROM outbox"); n != orders {
		t.Fatalf("%d outbox events, want one per order (%d)", n, orders)
	}
	// Published and booked: the relays and the consumers catch up.
	waitFor(t, "every event published", func() bool { return count("SELECT COUNT(*) FROM outbox WHERE state = 'SENT'") == orders })
	waitFor(t, "every event booked", func() bool { return count("SELECT COUNT(*) FROM idempotent_log") >= orders })
	if n := count("SELECT COUNT(*) FROM idempotent_log"); n != orders {
		t.Fatalf("%d events booked, want one per order (%d)", n, orders)
	}
	if n := count("SELECT COUNT(*) FROM journal_entry"); n != 2*orders {
		t.Fatalf("%d journal lines, want two per order (%d)", n, 2*orders)
	}
	info, err := natstest.JetStream(t, nats.URL()).Stream(context.Background(), broker.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != orders {
		t.Fatalf("%d messages on the stream, want one per order (%d)", n, orders)
	}
}

// galeraNotice is one notification to send: bodies[body], to instance inst.
type galeraNotice struct{ body, inst int }

// notifyUntilSuccess posts body to instance i and, while it is not
// answered success, resends it to the other instance, as Alipay resends
// and the load balancer routes — for at most a minute. It returns how
// many posts it took, 0 if none was answered success.
func (ti *twoInstances) notifyUntilSuccess(body string, i int) int {
	deadline := time.Now().Add(time.Minute)
	for tries := 1; time.Now().Before(deadline); tries++ {
		if got, err := ti.notify(i, body); err == nil && got == "success" {
			return tries
		}
		i = 1 - i
	}
	return 0
}

// orders creates orders sn(0) … sn(n-1) of member 1, awaiting amount, in
// a few statements.
func (ti *twoInstances) orders(t *testing.T, format string, n int, amount string) {
	t.Helper()
	for from := 0; from < n; from += 200 {
		var rows []string
		for k := from; k < min(from+200, n); k++ {
			rows = append(rows, fmt.Sprintf("('%s', %d, '%s')", fmt.Sprintf(format, k), instancesMember, amount))
		}
		if _, err := ti.store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES " + strings.Join(rows, ", ")); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls ok until it holds, for at most a minute.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after a minute", what)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
