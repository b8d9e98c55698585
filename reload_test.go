package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakewechatpay"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/wechatpay"
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

// weChatRotation is a WeChat Pay merchant of the test's keys whose APIv3
// key the test resets.
type weChatRotation struct {
	mchID, appID, keyID, signer string
}

// notice is WeChat Pay's TRANSACTION.SUCCESS for order sn paying 9.00,
// sealed with apiV3Key now; the request each attempt sends is signed as
// it is sent, as WeChat Pay signs each resend.
func (w weChatRotation) notice(t *testing.T, url, sn, apiV3Key string) func() (*http.Request, error) {
	plain, err := json.Marshal(weChatPaid(sn, "42000020261207000000000"+strings.TrimPrefix(sn, "ROT-"), 900,
		map[string]any{"appid": w.appID, "mchid": w.mchID}))
	if err != nil {
		t.Error(err)
	}
	body, err := fakewechatpay.Body{ID: "EV-" + sn, EventType: wechatpay.EventTransactionSuccess, Summary: "支付成功",
		OriginalType: "transaction", CreateTime: time.Now(), Resource: plain, Nonce: "rot" + strings.TrimPrefix(sn, "ROT-") + "abcd"}.Seal(apiV3Key)
	if err != nil {
		t.Error(err)
	}
	return func() (*http.Request, error) {
		g, err := fakewechatpay.SignNotification(w.signer, w.keyID, time.Now(), body)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		g.Set(req.Header)
		return req, nil
	}
}

// The APIv3 key reset while 2,000 first notices stream in, as
// docs/rotation.md runs it: the new key listed first beside the old and
// SIGHUP mid-stream; notices the old key sealed before the switch,
// delivered after it; a broken file mid-stream (refused, gauge 0, the
// keys in force go on opening notices); the old key dropped through POST
// /admin/reload, after which a notice it sealed is refused. Every order
// is paid exactly once, and no notice is refused for good.
func TestReloadAPIv3KeyUnderLoad(t *testing.T) {
	// 2,000 on MariaDB; SQLite writes one transaction at a time, and 500
	// cross the same switches there in a fraction of the time.
	for driver, n := range map[string]int{dao.DriverMySQL: 2000, dao.DriverSQLite: 500} {
		t.Run(driver, func(t *testing.T) { testReloadAPIv3Key(t, driver, n) })
	}
}

func testReloadAPIv3Key(t *testing.T, driver string, n int) {
	sn := func(i int) string { return fmt.Sprintf("ROT-%05d", i) }
	merchantKey, _ := newKeyPair(t)
	wechatKey, wechatPub := newKeyPair(t)
	w := weChatRotation{mchID: "1900000024", appID: "wx0000000000000024", keyID: "PUB_KEY_ID_0119000000000024", signer: wechatKey}
	const oldKey, newKey = "rotation-old-apiv3-key-012345678", "rotation-new-apiv3-key-876543210"
	r := newRotation(t)
	merchantKeyFile, publicKeyFile := r.write(t, "apiclient_key.pem", merchantKey), r.write(t, "pub_key.pem", wechatPub)
	oldFile, newFile := r.write(t, "apiv3-old", oldKey), filepath.Join(r.dir, "apiv3-new")
	providers := func(keyFiles ...string) string {
		return fmt.Sprintf(`wechatpay:
  - mchid: %q
    apiv3_key_files: [%s]
    merchant_key_file: %s
    merchant_serial: 5157F09EFDC096DE15EBE81A47057A7232F1B8E4
    public_key_file: %s
    public_key_id: %s
    gateway: http://127.0.0.1:9
    apps:
      - { appid: %s, name: official }
`, w.mchID, strings.Join(keyFiles, ", "), merchantKeyFile, publicKeyFile, w.keyID, w.appID)
	}
	r.start(t, driver, providers(oldFile))
	createOrders(t, r.store, n+1, sn)
	notify := r.in.base + "/wechatpay/notify"
	d := &deliverer{client: r.client, url: notify, accepted: func(status int, _ string) bool { return status == http.StatusNoContent }}
	start := time.Now()

	// The merchant picks the new key and lists it first, beside the old,
	// then SIGHUP, while notices sealed with the old key stream in.
	held := make([]func() (*http.Request, error), n)
	first, resent, last := n*35/100, n/2, n*85/100
	stream(8, 0, first, func(i int) { d.deliver(sn(i), w.notice(t, notify, sn(i), oldKey)) }, func() {
		for i := first; i < resent; i++ { // sealed before the switch, delivered after it
			held[i] = w.notice(t, notify, sn(i), oldKey)
		}
		r.write(t, "apiv3-new", newKey)
		r.write(t, "providers.yaml", providers(newFile, oldFile))
		r.hangup(t, "configuration reloaded")
	})
	// The key is set in the merchant platform: new notices are sealed
	// with it; the held ones are resent. Mid-stream, a file naming a key
	// that is not there: refused, nothing changes.
	stream(8, first, last, func(i int) {
		if held[i] != nil {
			d.deliver(sn(i), held[i])
			return
		}
		d.deliver(sn(i), w.notice(t, notify, sn(i), newKey))
	}, func() {
		r.write(t, "providers.yaml", providers(newFile, filepath.Join(r.dir, "apiv3-missing")))
		r.hangup(t, "configuration reload refused: nothing changed")
		if v := r.gauge(t, "paynotify_config_reload_success"); v != "0" {
			t.Errorf("after a refused reload paynotify_config_reload_success is %s, want 0", v)
		}
	})
	if v := r.gauge(t, "paynotify_config_reload_success"); v != "0" {
		t.Errorf("paynotify_config_reload_success is %s while the file is broken, want 0", v)
	}
	// Every notice the old key sealed is in: the old key goes.
	r.write(t, "providers.yaml", providers(newFile))
	at := r.gauge(t, "paynotify_config_reload_timestamp_seconds")
	status, body := r.reloadAsked(t, "APIv3 key reset: the old key dropped")
	if status != http.StatusOK || !strings.Contains(body, `"account":"`+w.mchID+`"`) || !strings.Contains(body, `"name":"official"`) {
		t.Fatalf("POST /admin/reload: %d %s", status, body)
	}
	if v := r.gauge(t, "paynotify_config_reload_success"); v != "1" || r.gauge(t, "paynotify_config_reload_timestamp_seconds") == at {
		t.Errorf("after a good reload: success %s, timestamp %s (was %s)", v, r.gauge(t, "paynotify_config_reload_timestamp_seconds"), at)
	}
	stream(8, last, n, func(i int) { d.deliver(sn(i), w.notice(t, notify, sn(i), newKey)) }, nil)
	t.Logf("%s: %d notices in %v, %d resent after a 5xx", driver, n, time.Since(start).Round(time.Millisecond), d.resent.Load())

	if len(d.lost) > 0 {
		t.Fatalf("%d notices refused for good, e.g. %s", len(d.lost), d.lost[0])
	}
	assertAppliedOnce(t, r.store, n, sn)
	// The old key no longer opens a notice: the reload took effect.
	late := &deliverer{client: r.client, url: notify, accepted: d.accepted}
	late.deliver(sn(n), w.notice(t, notify, sn(n), oldKey))
	if len(late.lost) != 1 {
		t.Errorf("a notice sealed with the dropped key was accepted")
	}
	if o, _ := r.store.Order(context.Background(), sn(n)); o.Status == model.OrderPaid {
		t.Errorf("order %s paid by a notice sealed with the dropped key", o.OrderSN)
	}
	audit, err := r.store.AuditPage(context.Background(), model.OperatorAdminAPI, 0, 10, false)
	if err != nil || len(audit) != 1 || audit[0].Action != model.AuditConfigReload || audit[0].Note != "APIv3 key reset: the old key dropped" {
		t.Errorf("admin_audit: %+v %v, want the one admin reload", audit, err)
	}
}

// alipayRenewal is an Alipay app in certificate mode whose Alipay
// certificate the test renews.
type alipayRenewal struct {
	app, seller  string
	old, renewed rotationCert
}

// rotationCert is one of Alipay's certificates: its key signs
// notifications, its serial names it (alipay_cert_sn).
type rotationCert struct{ key, pem, sn string }

// newRotationCert issues a certificate of a new key (or of key, if set)
// with serial.
func newRotationCert(t *testing.T, serial int64, key string) rotationCert {
	t.Helper()
	if key == "" {
		key, _ = newKeyPair(t)
	}
	block, _ := pem.Decode([]byte(key))
	priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey := priv.(*rsa.PrivateKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "Ant Financial Certification Authority Class 2 R1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return rotationCert{key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), sn: alipay.CertSN(cert)}
}

// notice is Alipay's TRADE_SUCCESS for order sn paying 9.00, signed with
// c's key and naming its alipay_cert_sn.
func (a alipayRenewal) notice(t *testing.T, to, sn string, c rotationCert) func() (*http.Request, error) {
	form := url.Values{
		"notify_type": {"trade_status_sync"}, "notify_id": {"n-" + sn}, "notify_time": {"2026-12-07 12:00:00"},
		"app_id": {a.app}, "seller_id": {a.seller}, "charset": {"utf-8"}, "version": {"1.0"},
		"trade_no": {"2026120722001400000" + strings.TrimPrefix(sn, "ALI-")}, "out_trade_no": {sn}, "trade_status": {"TRADE_SUCCESS"},
		"total_amount": {"9.00"}, "gmt_payment": {alipay.FormatTime(time.Now().Add(-time.Minute))},
	}
	signed, err := alipay.SignForm(c.key, form)
	if err != nil {
		t.Error(err)
	}
	signed.Set("alipay_cert_sn", c.sn) // not in the signed content, as Alipay's rule has it
	body := signed.Encode()
	return func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, to, strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		}
		return req, err
	}
}

// Alipay renews its certificate while first notices stream in, as
// docs/rotation.md runs it: the new certificate listed beside the old
// and SIGHUP mid-stream; notices the old key signed before the switch
// delivered after it; a file naming a certificate that is not there
// mid-stream (refused, the certificates in force go on); the old one
// dropped through POST /admin/reload, after which its signature is
// refused. Every order is paid exactly once.
func TestReloadAlipayCertificateRenewal(t *testing.T) {
	for driver, n := range map[string]int{dao.DriverMySQL: 600, dao.DriverSQLite: 300} {
		t.Run(driver, func(t *testing.T) { testReloadAlipayCertificate(t, driver, n) })
	}
}

func testReloadAlipayCertificate(t *testing.T, driver string, n int) {
	sn := func(i int) string { return fmt.Sprintf("ALI-%09d", i) }
	appKey, _ := newKeyPair(t)
	a := alipayRenewal{app: "2021000000000024", seller: "2088000000000024",
		old: newRotationCert(t, 24001, ""), renewed: newRotationCert(t, 24002, "")}
	r := newRotation(t)
	appCert := r.write(t, "appCertPublicKey.crt", newRotationCert(t, 24100, appKey).pem)
	appKeyFile, root := r.write(t, "app_private_key.pem", appKey), r.write(t, "alipayRootCert.crt", a.old.pem)
	oldFile, newFile := r.write(t, "alipayCertPublicKey_RSA2.crt", a.old.pem), r.write(t, "alipayCertPublicKey_RSA2-2027.crt", a.renewed.pem)
	providers := func(certFiles ...string) string {
		return fmt.Sprintf(`alipay:
  - seller_id: %q
    gateway: http://127.0.0.1:9/gateway.do
    apps:
      - app_id: %q
        name: web
        private_key_file: %s
        app_cert_file: %s
        alipay_public_cert_files: [%s]
        alipay_root_cert_file: %s
`, a.seller, a.app, appKeyFile, appCert, strings.Join(certFiles, ", "), root)
	}
	r.start(t, driver, providers(oldFile))
	createOrders(t, r.store, n+1, sn)
	notify := r.in.base + "/alipay/notify"
	d := &deliverer{client: r.client, url: notify, accepted: func(_ int, body string) bool { return body == "success" }, tries: 3}

	held := make([]func() (*http.Request, error), n)
	first, resent, last := n*35/100, n/2, n*85/100
	stream(8, 0, first, func(i int) { d.deliver(sn(i), a.notice(t, notify, sn(i), a.old)) }, func() {
		for i := first; i < resent; i++ { // signed before the switch, delivered after it
			held[i] = a.notice(t, notify, sn(i), a.old)
		}
		r.write(t, "providers.yaml", providers(newFile, oldFile))
		r.hangup(t, "configuration reloaded")
	})
	// Alipay signs with the new certificate's key; the held notices are
	// resent. Mid-stream, a file naming a certificate not there.
	stream(8, first, last, func(i int) {
		if held[i] != nil {
			d.deliver(sn(i), held[i])
			return
		}
		d.deliver(sn(i), a.notice(t, notify, sn(i), a.renewed))
	}, func() {
		r.write(t, "providers.yaml", providers(newFile, filepath.Join(r.dir, "missing.crt")))
		r.hangup(t, "configuration reload refused: nothing changed")
		if v := r.gauge(t, "paynotify_config_reload_success"); v != "0" {
			t.Errorf("after a refused reload paynotify_config_reload_success is %s, want 0", v)
		}
	})
	r.write(t, "providers.yaml", providers(newFile))
	if status, body := r.reloadAsked(t, "Alipay certificate renewed: the old one dropped"); status != http.StatusOK ||
		!strings.Contains(body, `"account":"`+a.seller+`"`) || !strings.Contains(body, `"app":"`+a.app+`"`) {
		t.Fatalf("POST /admin/reload: %d %s", status, body)
	}
	stream(8, last, n, func(i int) { d.deliver(sn(i), a.notice(t, notify, sn(i), a.renewed)) }, nil)
	if len(d.lost) > 0 {
		t.Fatalf("%d notices refused for good, e.g. %s", len(d.lost), d.lost[0])
	}
	assertAppliedOnce(t, r.store, n, sn)
	late := &deliverer{client: r.client, url: notify, accepted: d.accepted}
	late.deliver(sn(n), a.notice(t, notify, sn(n), a.old))
	if len(late.lost) != 1 {
		t.Errorf("a notice signed with the dropped certificate's key was accepted")
	}
}

// The environment form reloads its key files too (POST /admin/reload on
// an in-process serve): Alipay's public key replaced in
// ALIPAY_PUBLIC_KEY_FILE is in force after the reload, and a file that
// does not parse is refused with the variable named and changes nothing
// (the key in force goes on, nothing of the file is logged).
func TestReloadEnvironmentForm(t *testing.T) {
	r := newRotation(t)
	appKey, _ := newKeyPair(t)
	oldKey, oldPub := newKeyPair(t)
	newKey, newPub := newKeyPair(t)
	pubFile := r.write(t, "alipay_public_key.pem", oldPub)
	db := filepath.Join(r.dir, "env.db")
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "ADMIN_TOKEN=" + rotationAdminToken, "PUBLIC_URL=https://pay.example",
		"RECON_AT=off", "ALIPAY_APP_ID=2021000000000025", "ALIPAY_SELLER_ID=2088000000000025",
		"ALIPAY_APP_PRIVATE_KEY_FILE=" + r.write(t, "app_private_key.pem", appKey), "ALIPAY_PUBLIC_KEY_FILE=" + pubFile}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	base, logs := start(t, []string{"serve"}, environ)
	r.in = &instance{base: base, log: logs}
	a := alipayRenewal{app: "2021000000000025", seller: "2088000000000025"}
	sn := func(i int) string { return fmt.Sprintf("ALI-%09d", i) }
	createOrders(t, store, 20, sn)
	notify := base + "/alipay/notify"
	answer := func(i int, key string) string {
		t.Helper()
		req, err := a.notice(t, notify, sn(i), rotationCert{key: key})()
		if err != nil {
			t.Fatal(err)
		}
		rsp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer rsp.Body.Close()
		b, _ := io.ReadAll(rsp.Body)
		return string(b)
	}
	if got := answer(0, newKey); got != "failure" {
		t.Fatalf("signed with a key not yet configured: %q", got)
	}
	r.write(t, "alipay_public_key.pem", newPub)
	if status, body := r.reloadAsked(t, "Alipay key replaced"); status != http.StatusOK || !strings.Contains(body, `"app":"2021000000000025"`) {
		t.Fatalf("reload: %d %s", status, body)
	}
	if got := answer(0, newKey); got != "success" {
		t.Fatalf("signed with the reloaded key: %q", got)
	}
	if got := answer(1, oldKey); got != "failure" {
		t.Fatalf("signed with the replaced key: %q", got)
	}

	// Reloads race each other and notifications: each answers 200, each
	// is audited once, and every notification is taken.
	const racing = 8
	var wg sync.WaitGroup
	statuses := make(chan int, racing)
	d := &deliverer{client: r.client, url: notify, accepted: func(_ int, body string) bool { return body == "success" }, tries: 3}
	for i := range racing {
		wg.Add(2)
		go func() {
			defer wg.Done()
			status, _ := r.reloadAsked(t, fmt.Sprintf("race %d", i))
			statuses <- status
		}()
		go func() {
			defer wg.Done()
			d.deliver(sn(10+i), a.notice(t, notify, sn(10+i), rotationCert{key: newKey}))
		}()
	}
	wg.Wait()
	close(statuses)
	for status := range statuses {
		if status != http.StatusOK {
			t.Errorf("a racing reload answered %d", status)
		}
	}
	if len(d.lost) > 0 {
		t.Fatalf("notices refused while reloads raced: %v", d.lost)
	}
	audit, err := store.AuditPage(context.Background(), model.OperatorAdminAPI, 0, 100, false)
	if err != nil || len(audit) != racing+1 {
		t.Errorf("admin_audit holds %d reloads (%v), want %d", len(audit), err, racing+1)
	}
	for _, a := range audit {
		if a.Action != model.AuditConfigReload || a.TargetKind != model.TargetConfig || a.TargetID != "environment" ||
			!strings.Contains(a.After, "alipay 2088000000000025/2021000000000025") {
			t.Errorf("audit row %+v", a)
		}
	}

	r.write(t, "alipay_public_key.pem", "not a key")
	status, body := r.reloadAsked(t, "")
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "config_refused") || !strings.Contains(body, "ALIPAY_PUBLIC_KEY") {
		t.Fatalf("a key that does not parse: %d %s, want 422 naming ALIPAY_PUBLIC_KEY", status, body)
	}
	if got := answer(1, newKey); got != "success" {
		t.Fatalf("after a refused reload the key in force: %q", got)
	}
	if v := r.gauge(t, "paynotify_config_reload_success"); v != "0" {
		t.Errorf("paynotify_config_reload_success %s after a refused reload, want 0", v)
	}
	if !strings.Contains(logs.String(), "configuration reload refused: nothing changed") {
		t.Errorf("no ERROR line for the refused reload:\n%s", logs)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "not a key") || strings.Contains(line, "PRIVATE KEY-----") {
			t.Errorf("a log line quotes key material: %s", line)
		}
	}
}

// What the routes, jobs and reconciliations were wired with at start is
// not reloaded: a PROVIDERS_FILE that adds a seller, or changes the
// first, is refused as needing a restart (the configuration in force goes
// on), while an app added under the seller is taken.
func TestReloadNeedsRestart(t *testing.T) {
	r := newRotation(t)
	appKey, _ := newKeyPair(t)
	_, alipayPub := newKeyPair(t)
	keyFile, pubFile := r.write(t, "app_private_key.pem", appKey), r.write(t, "alipay_public_key.pem", alipayPub)
	file := func(apps ...string) string {
		var b strings.Builder
		for i := 0; i < len(apps); i += 2 {
			if i == 0 || apps[i] != apps[i-2] {
				fmt.Fprintf(&b, "  - seller_id: %q\n    apps:\n", apps[i])
			}
			fmt.Fprintf(&b, "      - {app_id: %q, private_key_file: %s, alipay_public_key_file: %s}\n", apps[i+1], keyFile, pubFile)
		}
		return "alipay:\n" + b.String()
	}
	r.file = r.write(t, "providers.yaml", file("2088000000000026", "2021000000000026"))
	db := filepath.Join(r.dir, "restart.db")
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "ADMIN_TOKEN=" + rotationAdminToken, "PUBLIC_URL=https://pay.example",
		"RECON_AT=off", "PROVIDERS_FILE=" + r.file}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	base, logs := start(t, []string{"serve"}, environ)
	r.in = &instance{base: base, log: logs}
	for name, f := range map[string]string{
		"FirstChanged": file("2088000000000027", "2021000000000027", "2088000000000026", "2021000000000026"),
		"SellerAdded":  file("2088000000000026", "2021000000000026", "2088000000000027", "2021000000000027"),
	} {
		r.write(t, "providers.yaml", f)
		if status, body := r.reloadAsked(t, ""); status != http.StatusUnprocessableEntity || !strings.Contains(body, "needs a restart") {
			t.Fatalf("%s: %d %s, want 422 saying it needs a restart", name, status, body)
		}
	}
	r.write(t, "providers.yaml", file("2088000000000026", "2021000000000026", "2088000000000026", "2021000000000126"))
	status, body := r.reloadAsked(t, "")
	if status != http.StatusOK || !strings.Contains(body, `"app":"2021000000000126"`) {
		t.Fatalf("an app added: %d %s", status, body)
	}
}

// Renewing the WeChat Pay merchant certificate: after the reload, calls
// are signed with the new merchant key and name its serial (the merchant
// platform that accepts only the new certificate takes the payment
// start); before it, with the old one.
func TestReloadMerchantKey(t *testing.T) {
	r := newRotation(t)
	oldKey, oldPub := newKeyPair(t)
	newKey, newPub := newKeyPair(t)
	wechatKey, wechatPub := newKeyPair(t)
	const mchID, appID, keyID, apiV3Key = "1900000026", "wx0000000000000026", "PUB_KEY_ID_0119000000000026", "rotation-merchant-apiv3-key-0123"
	const oldSerial, newSerial = "5157F09EFDC096DE15EBE81A47057A7232F1B826", "6157F09EFDC096DE15EBE81A47057A7232F1B826"
	platform := func(pub, serial string) *fakewechatpay.Server {
		wx, err := fakewechatpay.New(fakewechatpay.Config{MchID: mchID, AppID: appID, APIv3Key: apiV3Key, PrivateKey: wechatKey,
			PublicKeyID: keyID, Sign: fakewechatpay.SignPublicKey, MerchantPublicKey: pub, MerchantSerial: serial})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wx.Close)
		return wx
	}
	// WeChat Pay before the renewal, and after it with the old
	// certificate revoked: each takes calls signed by its merchant key.
	before, after := platform(oldPub, oldSerial), platform(newPub, newSerial)
	beforeGW, afterGW := httptest.NewServer(before.Handler()), httptest.NewServer(after.Handler())
	t.Cleanup(beforeGW.Close)
	t.Cleanup(afterGW.Close)
	keyFile, pubFile, apiv3File := filepath.Join(r.dir, "apiclient_key.pem"), r.write(t, "pub_key.pem", wechatPub), r.write(t, "apiv3", apiV3Key)
	file := func(serial, gateway string) string {
		return fmt.Sprintf(`wechatpay:
  - mchid: %q
    apiv3_key_files: [%s]
    merchant_key_file: %s
    merchant_serial: %s
    public_key_file: %s
    public_key_id: %s
    gateway: %s
    apps:
      - { appid: %s, name: official }
`, mchID, apiv3File, keyFile, serial, pubFile, keyID, gateway, appID)
	}
	r.write(t, "apiclient_key.pem", oldKey)
	r.file = r.write(t, "providers.yaml", file(oldSerial, beforeGW.URL))
	secret := "rotation-merchant-jwt-secret-0123456789"
	db := filepath.Join(r.dir, "merchant.db")
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "ADMIN_TOKEN=" + rotationAdminToken, "PUBLIC_URL=https://pay.example",
		"RECON_AT=off", "PROVIDERS_FILE=" + r.file, "API_JWT_SECRET=" + secret, "ORDER_PAY_TIMEOUT=24h"}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	base, logs := start(t, []string{"serve"}, environ)
	r.in = &instance{base: base, log: logs}
	createOrders(t, store, 2, func(i int) string { return fmt.Sprintf("MCHKEY-%d", i) })
	token, err := handler.MemberToken([]byte(secret), 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pay := func(sn string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/orders/"+sn+"/pay", strings.NewReader(`{"provider":"wechatpay","method":"native"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "pay-"+sn)
		rsp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer rsp.Body.Close()
		b, _ := io.ReadAll(rsp.Body)
		return fmt.Sprintf("%d %s", rsp.StatusCode, b)
	}
	if got := pay("MCHKEY-0"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("pay with the old certificate: %s", got)
	}
	// The new key and serial in place (and, standing in for the old
	// certificate's revocation, a platform that knows only the new one).
	r.write(t, "apiclient_key.pem", newKey)
	r.write(t, "providers.yaml", file(newSerial, afterGW.URL))
	if status, body := r.reloadAsked(t, "merchant certificate renewed"); status != http.StatusOK {
		t.Fatalf("reload: %d %s", status, body)
	}
	if got := pay("MCHKEY-1"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("pay with the new certificate: %s\n%s", got, logs)
	}
	if _, ok := after.Trade("MCHKEY-1"); !ok {
		t.Fatal("the payment started after the reload did not reach the platform that takes the new key only")
	}
	if _, ok := before.Trade("MCHKEY-1"); ok {
		t.Fatal("the payment started after the reload went through the old configuration")
	}
}
