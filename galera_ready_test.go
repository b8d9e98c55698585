package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paynotify/fakewechatpay"
	"paynotify/internal/galeratest"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

// readyTimeout bounds how long a node's change takes to show in /readyz:
// eviction of a killed node (evs.suspect_timeout, 2 s here), a rejoin,
// and readiness's own cache (1 s).
const readyTimeout = 30 * time.Second

// serveGrants is what docs/production.md grants serve: not READ ONLY
// ADMIN (nor SUPER), so read_only stops it as it stops production's.
const serveGrants = "SELECT, INSERT, UPDATE, DELETE"

// An instance is ready only while its node can serve, and says why not:
// a node desynced (wsrep_desync, as a backup does), cut off from the
// others, read-only, or killed takes its instance out of the load
// balancer (/readyz 503, the reason in the body). What the instance is
// asked meanwhile on a node that cannot serve is answered as an outage —
// failure to Alipay, 503 to WeChat Pay, the API and the console, a WARN
// line and never an ERROR — not a 500; back in the cluster, it is ready
// again and the resend is applied once. The instances run as a user with
// only serve's grants, so read_only refuses their writes (1290) as it
// would production's; root would write through it.
func TestGaleraReadinessFollowsTheNode(t *testing.T) {
	c := galeratest.Shared(t)
	wx := newWeChatMerchant(t)
	const adminToken = "galera-ready-admin-token-0123456789"
	db := c.Database(t)
	user := c.User(t, db, serveGrants)
	ti := startTwoInstancesOn(t, [2]string{c.Nodes[0].DSNAs(user, db), c.Nodes[1].DSNAs(user, db)}, c.Nodes[2].DSN(db),
		append(wx.env, "ADMIN_TOKEN="+adminToken, "RECON_AT=off")...)
	logOnFailure(t, ti)
	c.LogOnFailure(t)
	node := c.Nodes[1] // instance 1's
	// Whatever happens below, the shared cluster's node is left as found.
	t.Cleanup(func() {
		if node.PID() != 0 {
			resetGlobals(t, node)
		}
	})

	for _, sn := range []string{"GALERA-READY-1", "GALERA-READY-2", "GALERA-READY-3", "GALERA-READY-4", "GALERA-READY-5", "GALERA-READY-6"} {
		ti.order(t, sn, "10.00")
	}
	token, _, err := service.NewSessions(ti.store, time.Hour).SignIn(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	ti.waitReady(t, 1, http.StatusOK)
	// Each check below that expects a refusal is first seen to pass where
	// the node can serve, so the refusal is the node's doing.
	if got := ti.consolePage(t, 1, token, "/console/orders/GALERA-READY-1"); got != http.StatusOK {
		t.Fatalf("console page on a synced node: %d, want 200", got)
	}

	t.Run("Desynced", func(t *testing.T) {
		node.Exec(t, "SET GLOBAL wsrep_desync = ON")
		node.WaitState(t, "Donor/Desynced")
		body := ti.waitReady(t, 1, http.StatusServiceUnavailable)
		if !strings.Contains(body, "Donor/Desynced") {
			t.Errorf("/readyz of the instance on a desynced node says %q, want why (Donor/Desynced)", body)
		}
		if _, got := ti.readyzBody(t, 0); got != "ready" {
			t.Fatalf("instance 0 on a synced node: /readyz %q", got)
		}
		// Not ready is the load balancer's cue, not a refusal: a desynced
		// node commits correctly, and what reaches it anyway is applied.
		notice := ti.notification(t, "GALERA-READY-4", "T-GALERA-READY-4", "10.00")
		if got, err := ti.notify(1, notice); err != nil || got != "success" {
			t.Fatalf("notification to the instance on a desynced node: %q, %v; want success", got, err)
		}
		ti.paidOnce(t, "GALERA-READY-4")
		node.Exec(t, "SET GLOBAL wsrep_desync = OFF")
		node.WaitState(t, "Synced")
		ti.waitReady(t, 1, http.StatusOK)
	})

	t.Run("Isolated", func(t *testing.T) {
		from := ti.logLen(1)
		notice := ti.notification(t, "GALERA-READY-1", "T-GALERA-READY-1", "10.00")
		wxBody, wxHeader := wx.notification(t, "GALERA-READY-5", "4200000000202612010000000005", 1000)
		node.Isolate(t, true)
		// A failure below must not leave the shared cluster a node short.
		t.Cleanup(func() { node.Isolate(t, false) })
		body := ti.waitReady(t, 1, http.StatusServiceUnavailable)
		if !strings.Contains(body, "wsrep_ready OFF") {
			t.Errorf("/readyz of the instance on an isolated node says %q, want why (wsrep_ready OFF)", body)
		}
		// The others install a view without the node; instance 0's is
		// ready once they have (at once, unless the machine is slow).
		ti.waitReady(t, 0, http.StatusOK)
		if got, err := ti.notify(1, notice); err != nil || got != "failure" {
			t.Fatalf("Alipay notification to the instance on the isolated node: %q, %v; want failure", got, err)
		}
		if got, answer := postWeChatHeaders(t, ti.inst[1].base+"/wechatpay/notify", wxBody, wxHeader.Clone()); got != http.StatusServiceUnavailable || !strings.Contains(answer, `"code":"FAIL"`) {
			t.Fatalf("WeChat Pay notification to the instance on the isolated node: %d %s; want 503 FAIL", got, answer)
		}
		if got := ti.getOrder(t, 1, "GALERA-READY-1"); got != http.StatusServiceUnavailable {
			t.Fatalf("GET order on the isolated node: %d, want 503", got)
		}
		if got := ti.consolePage(t, 1, token, "/console/orders/GALERA-READY-1"); got != http.StatusServiceUnavailable {
			t.Fatalf("signed-in console page on the isolated node: %d, want 503", got)
		}
		ti.checkOutageLogged(t, 1, from, `"outcome":"db_unavailable"`, `"code":"unavailable"`, `"msg":"console request failed"`,
			`"provider":"wechatpay","outcome":"db_unavailable"`)

		node.Isolate(t, false)
		ti.waitReady(t, 1, http.StatusOK)
		if got, err := ti.notify(1, notice); err != nil || got != "success" {
			t.Fatalf("Alipay's resend once the node rejoined: %q, %v; want success", got, err)
		}
		if got, answer := postWeChatHeaders(t, ti.inst[1].base+"/wechatpay/notify", wxBody, wxHeader.Clone()); got != http.StatusNoContent {
			t.Fatalf("WeChat Pay's resend once the node rejoined: %d %s; want 204", got, answer)
		}
		if got := ti.consolePage(t, 1, token, "/console/orders/GALERA-READY-1"); got != http.StatusOK {
			t.Fatalf("console page once the node rejoined: %d, want 200", got)
		}
		ti.paidOnce(t, "GALERA-READY-1")
		ti.paidOnce(t, "GALERA-READY-5")
	})

	t.Run("ReadOnly", func(t *testing.T) {
		from := ti.logLen(1)
		notice := ti.notification(t, "GALERA-READY-2", "T-GALERA-READY-2", "10.00")
		node.Exec(t, "SET GLOBAL read_only = ON")
		body := ti.waitReady(t, 1, http.StatusServiceUnavailable)
		if !strings.Contains(body, "read-only") {
			t.Errorf("/readyz of the instance on a read-only node says %q, want why (read-only)", body)
		}
		if got := ti.readyz(t, 0); got != http.StatusOK {
			t.Fatalf("instance 0 on a writable node: /readyz %d, want 200", got)
		}
		if got, err := ti.notify(1, notice); err != nil || got != "failure" {
			t.Fatalf("notification to the instance on the read-only node: %q, %v; want failure", got, err)
		}
		if got, err := ti.cancel(1, "GALERA-READY-3"); err != nil || got != http.StatusServiceUnavailable {
			t.Fatalf("cancel (an API write) on the read-only node: %d, %v; want 503", got, err)
		}
		// The refusals name the server's read-only answer (1290).
		ti.checkOutageLogged(t, 1, from, `"outcome":"db_unavailable","err":"database unavailable: Error 1290`,
			`"code":"unavailable","err":"database unavailable: Error 1290`)
		if o, ps := ti.state(t, "GALERA-READY-2"); o.Status != model.OrderAwaitingPayment || len(ps) != 0 {
			t.Fatalf("GALERA-READY-2 after the refused notification: status %d, payments %+v", o.Status, ps)
		}

		node.Exec(t, "SET GLOBAL read_only = OFF")
		ti.waitReady(t, 1, http.StatusOK)
		for range 2 { // Alipay's resend, and one more: applied once
			if got, err := ti.notify(1, notice); err != nil || got != "success" {
				t.Fatalf("resend once the node is writable: %q, %v; want success", got, err)
			}
		}
		ti.paidOnce(t, "GALERA-READY-2")
		if got, err := ti.cancel(1, "GALERA-READY-3"); err != nil || got != http.StatusOK {
			t.Fatalf("cancel once the node is writable: %d, %v; want 200", got, err)
		}
	})

	t.Run("ShuttingDown", func(t *testing.T) {
		// A notification waits on a row lock the test holds on the node,
		// and the node is shut down under it (SIGTERM). MariaDB closes the
		// waiting connection (the driver sees EOF: invalid connection)
		// rather than answer 1053 on it; a statement that arrives later
		// finds the port closed. Each is the database unavailable.
		from := ti.logLen(1)
		notice := ti.notification(t, "GALERA-READY-6", "T-GALERA-READY-6", "10.00")
		lock := openPool(t, node.DSN(db))
		tx, err := lock.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var id int64
		if err := tx.QueryRow("SELECT id FROM oms_order WHERE order_sn = 'GALERA-READY-6' FOR UPDATE").Scan(&id); err != nil {
			t.Fatal(err)
		}
		answer := make(chan string, 1)
		go func() {
			got, err := ti.notify(1, notice)
			answer <- fmt.Sprintf("%s%v", got, err)
		}()
		// The notification's FOR UPDATE waits (in the optimizer's read of
		// the order row, which innodb_trx does not list yet).
		probe := openPool(t, node.DSN(""))
		waitFor(t, "the notification waiting on the test's lock", func() bool {
			var n int
			err := probe.QueryRow("SELECT COUNT(*) FROM information_schema.processlist WHERE user = ? AND info LIKE ?",
				user, "%GALERA-READY-6%FOR UPDATE%").Scan(&n)
			return err == nil && n > 0
		})
		node.Shutdown(t)
		if got := <-answer; got != "failure<nil>" {
			t.Fatalf("notification on a node shutting down: %q, want failure", got)
		}
		ti.checkOutageLogged(t, 1, from, `"outcome":"db_unavailable"`)
		ti.waitReady(t, 1, http.StatusServiceUnavailable)
		node.Restart(t)
		ti.waitReady(t, 1, http.StatusOK)
		if got, err := ti.notify(1, notice); err != nil || got != "success" {
			t.Fatalf("resend once the node is back: %q, %v; want success", got, err)
		}
		ti.paidOnce(t, "GALERA-READY-6")
	})

	t.Run("Killed", func(t *testing.T) {
		node.Kill(t)
		ti.waitReady(t, 1, http.StatusServiceUnavailable)
		node.Restart(t)
		ti.waitReady(t, 1, http.StatusOK)
	})
	for _, line := range strings.Split(ti.inst[1].log.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("instance 1 logged an ERROR for a node that could not serve: %s", line)
		}
	}
}

// openPool is a pool on dsn, closed when the test ends.
func openPool(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// resetGlobals sets back what the test may have changed on the node.
func resetGlobals(t *testing.T, node *galeratest.Node) {
	t.Helper()
	node.Exec(t, "SET GLOBAL read_only = OFF", "SET GLOBAL wsrep_desync = OFF")
	node.WaitState(t, "Synced")
}

// logOnFailure shows the instances' logs when the test fails.
func logOnFailure(t *testing.T, ti *twoInstances) {
	t.Cleanup(func() {
		if t.Failed() {
			for i, in := range ti.inst {
				t.Logf("instance %d log:\n%s", i, in.log)
			}
		}
	})
}

// logLen is how much instance i has logged so far.
func (ti *twoInstances) logLen(i int) int { return len(ti.inst[i].log.String()) }

// logSince is what instance i logged after logLen said from.
func (ti *twoInstances) logSince(i, from int) string { return ti.inst[i].log.String()[from:] }

// checkOutageLogged checks that instance i logged, since from, a WARN
// line holding each of wants, and no ERROR. The instance's log reaches
// the test through a pipe, after the answer it logged for: it is polled.
func (ti *twoInstances) checkOutageLogged(t *testing.T, i, from int, wants ...string) {
	t.Helper()
	missing := func(log string) []string {
		var missed []string
		for _, want := range wants {
			found := false
			for _, line := range strings.Split(log, "\n") {
				found = found || strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, want)
			}
			if !found {
				missed = append(missed, want)
			}
		}
		return missed
	}
	deadline := time.Now().Add(10 * time.Second)
	log := ti.logSince(i, from)
	for len(missing(log)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // poll interval
		log = ti.logSince(i, from)
	}
	if m := missing(log); len(m) > 0 {
		t.Errorf("instance %d logged no WARN line with %s:\n%s", i, strings.Join(m, ", "), log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("instance %d logged an ERROR for a node that could not serve: %s", i, line)
		}
	}
}

// paidOnce checks that sn is paid by one APPLIED payment and no other.
func (ti *twoInstances) paidOnce(t *testing.T, sn string) {
	t.Helper()
	o, ps := ti.state(t, sn)
	if o.Status != model.OrderPaid || len(ps) != 1 || ps[0].State != model.PaymentApplied {
		t.Fatalf("%s: status %d, payments %+v; want paid by one APPLIED payment", sn, o.Status, ps)
	}
}

// readyz is instance i's /readyz status.
func (ti *twoInstances) readyz(t *testing.T, i int) int {
	t.Helper()
	code, _ := ti.readyzBody(t, i)
	return code
}

// readyzBody is instance i's /readyz status and body.
func (ti *twoInstances) readyzBody(t *testing.T, i int) (int, string) {
	t.Helper()
	resp, err := ti.client.Get(ti.inst[i].base + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady polls instance i's /readyz until it answers want, and returns
// that answer's body.
func (ti *twoInstances) waitReady(t *testing.T, i, want int) string {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		got, body := ti.readyzBody(t, i)
		if got == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %d: /readyz %d %q after %v, want %d", i, got, body, readyTimeout, want)
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

// consolePage is the status of GET path on instance i's console, signed
// in with the session token (no redirect followed: a sign-in redirect is
// not the page).
func (ti *twoInstances) consolePage(t *testing.T, i int, token, path string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ti.inst[i].base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "paynotify_console", Value: token})
	client := *ti.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// weChatMerchant is a WeChat Pay merchant of the test's own keys (serve
// refuses the development keys): the environment that configures serve
// for it, and what signs its notifications as WeChat Pay.
type weChatMerchant struct {
	env                         []string
	mchID, appID, apiV3Key, key string // key signs as WeChat Pay
	keyID                       string
}

func newWeChatMerchant(t *testing.T) weChatMerchant {
	t.Helper()
	merchantKey, _ := newKeyPair(t)
	wechatKey, wechatPub := newKeyPair(t)
	w := weChatMerchant{mchID: "1900000019", appID: "wx0000000000000019", apiV3Key: "galera19-apiv3-key-0123456789abc",
		key: wechatKey, keyID: "PUB_KEY_ID_0119000000000019"}
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	w.env = []string{"WECHATPAY_MCHID=" + w.mchID, "WECHATPAY_APPID=" + w.appID, "WECHATPAY_APIV3_KEY=" + w.apiV3Key,
		"WECHATPAY_MERCHANT_KEY_FILE=" + file("apiclient_key.pem", merchantKey),
		"WECHATPAY_MERCHANT_SERIAL=5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
		"WECHATPAY_PUBLIC_KEY_FILE=" + file("pub_key.pem", wechatPub), "WECHATPAY_PUBLIC_KEY_ID=" + w.keyID,
		// Nothing here calls WeChat Pay; a refused port if anything did.
		"WECHATPAY_GATEWAY=http://127.0.0.1:9"}
	return w
}

// notification is WeChat Pay's sealed and signed TRANSACTION.SUCCESS for
// transactionID paying fen to order sn.
func (w weChatMerchant) notification(t *testing.T, sn, transactionID string, fen int64) ([]byte, http.Header) {
	t.Helper()
	plain, err := json.Marshal(weChatPaid(sn, transactionID, fen, map[string]any{"appid": w.appID, "mchid": w.mchID}))
	if err != nil {
		t.Fatal(err)
	}
	body, err := fakewechatpay.Body{ID: "EV-" + transactionID, EventType: wechatpay.EventTransactionSuccess, Summary: "支付成功",
		OriginalType: "transaction", CreateTime: time.Now(), Resource: plain, Nonce: fmt.Sprintf("%012d", len(sn))}.Seal(w.apiV3Key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := fakewechatpay.SignNotification(w.key, w.keyID, time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	h := make(http.Header)
	g.Set(h)
	return body, h
}
