package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

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
