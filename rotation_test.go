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
	"math/big"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/fakewechatpay"
	"paynotify/model"
	"paynotify/wechatpay"
)

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
