package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// rotation is a serve process configured by a PROVIDERS_FILE the test
// rewrites, and what the test drives it with.
type rotation struct {
	dir   string
	file  string // PROVIDERS_FILE
	in    *instance
	store *dao.Store
	// client posts notifications and admin requests, kept alive.
	client *http.Client
}

// write writes a file of the test's directory, as an operator would put
// a key in place. It, hangup and gauge run in the stream's goroutines
// too, so they fail the test without stopping it (t.Error).
func (r *rotation) write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Error(err)
	}
	return p
}

// logged counts the process's log lines whose message is msg.
func (r *rotation) logged(msg string) int {
	n := 0
	for _, line := range strings.Split(r.in.log.String(), "\n") {
		var l struct{ Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			n++
		}
	}
	return n
}

// hangup sends SIGHUP and waits until the process has logged msg once
// more than before (the reload done, or refused).
func (r *rotation) hangup(t *testing.T, msg string) {
	t.Helper()
	before := r.logged(msg)
	if err := r.in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Error(err)
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.logged(msg) == before {
		if time.Now().After(deadline) {
			t.Errorf("no %q logged after SIGHUP:\n%s", msg, r.in.log)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gauge is a metric's value as /metrics serves it.
func (r *rotation) gauge(t *testing.T, name string) string {
	t.Helper()
	rsp, err := r.client.Get(r.in.base + "/metrics")
	if err != nil {
		t.Error(err)
		return ""
	}
	defer rsp.Body.Close()
	b, _ := io.ReadAll(rsp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Errorf("/metrics has no %s", name)
	return ""
}

// newRotation is a directory for the files an operator puts in place.
func newRotation(t *testing.T) *rotation {
	return &rotation{dir: t.TempDir(), client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

// start migrates a database of driver (a fresh MariaDB database, or a
// SQLite file), writes providers as PROVIDERS_FILE and starts serve on it
// in a process of its own, so that SIGHUP reaches it alone.
func (r *rotation) start(t *testing.T, driver, providers string) {
	t.Helper()
	r.file = r.write(t, "providers.yaml", providers)
	dsn := filepath.Join(r.dir, "rotation.db")
	if driver == dao.DriverMySQL {
		dsn = daotest.MySQLDatabase(t)
	}
	environ := []string{"DB_DRIVER=" + driver, "DB_DSN=" + dsn, "PROVIDERS_FILE=" + r.file, "ADMIN_TOKEN=" + rotationAdminToken,
		"PUBLIC_URL=https://pay.example", "RECON_AT=off", "ORDER_PAY_TIMEOUT=24h", "DB_MAX_OPEN_CONNS=16"}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	store, err := dao.Open(context.Background(), driver, dsn, dao.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r.store = store
	if r.in, err = startInstance(t, environ); err != nil {
		t.Fatal(err)
	}
}

const rotationAdminToken = "rotation-admin-token-0123456789abcdef"

// reloadAsked is POST /admin/reload: its status and body.
func (r *rotation) reloadAsked(t *testing.T, note string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.in.base+"/admin/reload", strings.NewReader(`{"note":"`+note+`"}`))
	req.Header.Set("Authorization", "Bearer "+rotationAdminToken)
	req.Header.Set("Content-Type", "application/json")
	rsp, err := r.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	b, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(b)
}

// createOrders makes orders sn(0) … sn(n-1) of 9.00 each, four at a time.
func createOrders(t *testing.T, store *dao.Store, n int, sn func(int) string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				if _, err := store.CreateOrder(context.Background(), sn(i), 1, decimal.RequireFromString("9.00")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// deliverer posts notifications as a provider does: an answer it takes
// as a refusal to retry (5xx, or no answer) is sent again until
// accepted; any other refusal is a lost payment, counted and named.
type deliverer struct {
	client *http.Client
	url    string
	// accepted is the answer that acknowledges ("success", or a 2xx).
	accepted func(status int, body string) bool
	// tries is how many refusals a notification is sent again after
	// before it counts as lost: Alipay's one refusal, "failure", is also
	// its answer to a passing outage. 0: the first refusal.
	tries  int
	resent atomic.Int64
	mu     sync.Mutex
	lost   []string
}

// deliver posts one notification (send makes each attempt's request,
// signed at the moment it is sent) until it is accepted or refused.
func (d *deliverer) deliver(name string, send func() (*http.Request, error)) {
	deadline := time.Now().Add(60 * time.Second)
	refused := 0
	for {
		req, err := send()
		if err != nil {
			d.refuse(name, err.Error())
			return
		}
		rsp, err := d.client.Do(req)
		status, body := 0, ""
		if err == nil {
			b, _ := io.ReadAll(rsp.Body)
			rsp.Body.Close()
			status, body = rsp.StatusCode, string(b)
		}
		switch {
		case err == nil && d.accepted(status, body):
			return
		case err == nil && status < 500 && status != 0 && refused >= d.tries:
			d.refuse(name, fmt.Sprintf("%d %s", status, body))
			return
		case err == nil && status < 500 && status != 0:
			refused++
		case time.Now().After(deadline):
			d.refuse(name, fmt.Sprintf("still not accepted: %d %s %v", status, body, err))
			return
		}
		d.resent.Add(1)
	}
}

func (d *deliverer) refuse(name, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lost = append(d.lost, name+": "+why)
}

// stream delivers items [from, to) with workers goroutines, calling at
// (if set) once the first half of them have been delivered.
func stream(workers, from, to int, deliver func(i int), at func()) {
	var next atomic.Int64
	next.Store(int64(from))
	var done atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				deliver(i)
				if at != nil && int(done.Add(1)) == (to-from)/2 {
					once.Do(at)
				}
			}
		}()
	}
	wg.Wait()
}

// assertAppliedOnce checks that every order sn(0) … sn(n-1) has exactly
// one payment, APPLIED, and that the ledger holds no other payment of the
// test's: nothing lost, nothing doubled.
func assertAppliedOnce(t *testing.T, store *dao.Store, n int, sn func(int) string) {
	t.Helper()
	ctx := context.Background()
	bad := 0
	for i := range n {
		o, err := store.Order(ctx, sn(i))
		if err != nil {
			t.Fatal(err)
		}
		pays, err := store.PaymentsByOrder(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(pays) != 1 || pays[0].State != model.PaymentApplied || o.Status != model.OrderPaid {
			if bad++; bad <= 5 {
				t.Errorf("order %s: %s, payments %+v", o.OrderSN, o.Status, pays)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d orders not paid exactly once", bad, n)
	}
}
