package main

import (
	"context"
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

// readyTimeout bounds how long a node's change takes to show in /readyz:
// eviction of a killed node (evs.suspect_timeout, 2 s here), a rejoin,
// and readiness's own cache (1 s).
const readyTimeout = 30 * time.Second

// startGalera migrates a new database on the shared cluster through node 1
// and starts instance 0 on node 1 and instance 1 on node 2.
func startGalera(t *testing.T, extra ...string) (*galeratest.Cluster, *twoInstances) {
	t.Helper()
	c := galeratest.Shared(t)
	db := c.Database(t)
	ti := startTwoInstancesOn(t, [2]string{c.Nodes[0].DSN(db), c.Nodes[1].DSN(db)}, c.Nodes[2].DSN(db), extra...)
	t.Cleanup(func() {
		if t.Failed() {
			for i, in := range ti.inst {
				t.Logf("instance %d log:\n%s", i, in.log)
			}
		}
	})
	return c, ti
}

// The notify, order and cancel races, with the two instances on two nodes:
// row locks are per node there (FOR UPDATE on both nodes returns at
// once), and certification at COMMIT (1213, retried) is what lets one of
// them through.
func TestGaleraRacesAcrossNodes(t *testing.T) {
	_, ti := startGalera(t)
	raceInstances(t, ti)
}

// An instance is ready only while its node can serve: a node cut off from
// the others, or killed, takes its instance out of the load balancer
// (/readyz 503), and what it is asked meanwhile is answered as an outage
// — failure to Alipay, 503 to the API, a WARN line — not a 500. Back in
// the cluster, the instance is ready again and the resend applies.
func TestGaleraReadinessFollowsTheNode(t *testing.T) {
	c, ti := startGalera(t)
	node := c.Nodes[1] // instance 1's

	ti.order(t, "GALERA-READY-1", "10.00")
	notice := ti.notification(t, "GALERA-READY-1", "T-GALERA-READY-1", "10.00")
	ti.waitReady(t, 1, http.StatusOK)

	node.Isolate(t, true)
	ti.waitReady(t, 1, http.StatusServiceUnavailable)
	if got := ti.readyz(t, 0); got != http.StatusOK {
		t.Fatalf("instance 0 on a synced node: /readyz %d, want 200", got)
	}
	if got, err := ti.notify(1, notice); err != nil || got != "failure" {
		t.Fatalf("notification to the instance on the isolated node: %q, %v; want failure", got, err)
	}
	if got := ti.getOrder(t, 1, "GALERA-READY-1"); got != http.StatusServiceUnavailable {
		t.Fatalf("GET order on the isolated node: %d, want 503", got)
	}
	warned := false
	for _, line := range strings.Split(ti.inst[1].log.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Fatalf("instance 1 logged an ERROR for an unavailable node: %s", line)
		}
		warned = warned || strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, `"outcome":"db_unavailable"`)
	}
	if !warned {
		t.Fatalf("instance 1 did not log the refused notification as a WARN db_unavailable:\n%s", ti.inst[1].log)
	}

	node.Isolate(t, false)
	ti.waitReady(t, 1, http.StatusOK)
	if got, err := ti.notify(1, notice); err != nil || got != "success" {
		t.Fatalf("resend once the node rejoined: %q, %v; want success", got, err)
	}

	node.Kill(t)
	ti.waitReady(t, 1, http.StatusServiceUnavailable)
	node.Restart(t)
	ti.waitReady(t, 1, http.StatusOK)
}

// readyz is instance i's /readyz status.
func (ti *twoInstances) readyz(t *testing.T, i int) int {
	t.Helper()
	resp, err := ti.client.Get(ti.inst[i].base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady polls instance i's /readyz until it answers want.
func (ti *twoInstances) waitReady(t *testing.T, i, want int) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		got := ti.readyz(t, i)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %d: /readyz %d after %v, want %d", i, got, readyTimeout, want)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// getOrder is the status of member 1's GET /api/v1/orders/{sn} on instance i.
func (ti *twoInstances) getOrder(t *testing.T, i int, sn string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ti.inst[i].base+"/api/v1/orders/"+sn, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ti.token)
	resp, err := ti.client.Do(req)
	if err != nil {
		t.Fatalf("GET order: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
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
		if _, err := startProcess(t, "consume", "accounting consumer running", ti.env(i)); err != nil {
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
