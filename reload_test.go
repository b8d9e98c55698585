package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/fakewechatpay"
	"paynotify/handler"
	"paynotify/model"
)

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
// on), while an app added under the seller is taken. The seller's first
// app, whose are the rows that name no app, is not reloaded either:
// replacing, reordering or removing it is refused, naming the seller and
// both apps.
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
	firstAppChanged := func(name, f string) {
		t.Helper()
		r.write(t, "providers.yaml", f)
		status, body := r.reloadAsked(t, "")
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "needs a restart") ||
			!strings.Contains(body, "alipay account 2088000000000026's first app is 2021000000000126, was 2021000000000026") {
			t.Fatalf("%s: %d %s, want 422 naming the seller's first app, old and new, and that it needs a restart", name, status, body)
		}
	}
	firstAppChanged("FirstAppReplaced", file("2088000000000026", "2021000000000126"))
	r.write(t, "providers.yaml", file("2088000000000026", "2021000000000026", "2088000000000026", "2021000000000126"))
	status, body := r.reloadAsked(t, "")
	if status != http.StatusOK || !strings.Contains(body, `"app":"2021000000000126"`) {
		t.Fatalf("an app added: %d %s", status, body)
	}
	firstAppChanged("AppsReordered", file("2088000000000026", "2021000000000126", "2088000000000026", "2021000000000026"))
	firstAppChanged("FirstAppRemoved", file("2088000000000026", "2021000000000126"))
	r.write(t, "providers.yaml", file("2088000000000026", "2021000000000026"))
	if status, body := r.reloadAsked(t, ""); status != http.StatusOK || strings.Contains(body, "2021000000000126") {
		t.Fatalf("the added app removed: %d %s", status, body)
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
