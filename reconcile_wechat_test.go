package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/fakealipay"
	"paynotify/fakewechatpay"
	"paynotify/model"
	"paynotify/service"
)

// paynotify reconcile with WeChat Pay configured: one run per provider
// (Alipay's and WeChat Pay's), the exit status the worst of them;
// -provider runs one; a provider not configured or not known is refused.
func TestReconcileCommandPerProvider(t *testing.T) {
	appKey, appPub := newKeyPair(t)
	alipayKey, alipayPub := newKeyPair(t)
	merchantKey, merchantPub := newKeyPair(t)
	wechatKey, wechatPub := newKeyPair(t)
	const appID, sellerID = "2021000000000042", "2088000000000042"
	const mchID, wxAppID, serial, keyID = "1900000042", "wx0000000000000042", "5157F09EFDC096DE15EBE81A47057A7232F1B8E1", "PUB_KEY_ID_0119000000000042"
	const apiV3Key = "0123456789abcdef0123456789abcdef"
	ali, err := fakealipay.New(fakealipay.Config{AppID: appID, SellerID: sellerID, PrivateKey: alipayKey, AppPublicKey: appPub})
	if err != nil {
		t.Fatal(err)
	}
	aliGW := httptest.NewServer(ali.Handler())
	t.Cleanup(aliGW.Close)
	t.Cleanup(ali.Close)
	wx, err := fakewechatpay.New(fakewechatpay.Config{MchID: mchID, AppID: wxAppID, APIv3Key: apiV3Key, PrivateKey: wechatKey,
		PublicKeyID: keyID, Sign: fakewechatpay.SignPublicKey, MerchantPublicKey: merchantPub, MerchantSerial: serial})
	if err != nil {
		t.Fatal(err)
	}
	wxGW := httptest.NewServer(wx.Handler())
	t.Cleanup(wxGW.Close)
	t.Cleanup(wx.Close)

	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	db := filepath.Join(dir, "recon.db")
	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	alipayEnv := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "ALIPAY_APP_ID=" + appID, "ALIPAY_SELLER_ID=" + sellerID,
		"ALIPAY_APP_PRIVATE_KEY=" + appKey, "ALIPAY_PUBLIC_KEY=" + alipayPub, "ALIPAY_SANDBOX_GATEWAY=" + ali.GatewayURL(aliGW.URL)}
	bothEnv := append(append([]string{}, alipayEnv...), "WECHATPAY_MCHID="+mchID, "WECHATPAY_APPID="+wxAppID,
		"WECHATPAY_APIV3_KEY="+apiV3Key, "WECHATPAY_MERCHANT_KEY_FILE="+file("apiclient_key.pem", merchantKey),
		"WECHATPAY_MERCHANT_SERIAL="+serial, "WECHATPAY_PUBLIC_KEY_FILE="+file("pub_key.pem", wechatPub),
		"WECHATPAY_PUBLIC_KEY_ID="+keyID, "WECHATPAY_GATEWAY="+wxGW.URL)
	// printedRun is what the command prints of a run (the admin API's shape).
	type printedRun struct {
		Provider model.Provider
		State    model.ReconState
		Attempts int
		Counts   map[model.ReconOutcome]int
		Bill     struct{ Payments int }
	}
	reconcile := func(t *testing.T, environ []string, args ...string) (map[model.Provider]printedRun, int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), environment{args: append([]string{"reconcile"}, args...), environ: environ,
			stdin: strings.NewReader(""), stdout: &out, stderr: &errOut})
		runs := map[model.Provider]printedRun{}
		dec := json.NewDecoder(&out)
		for {
			var r printedRun
			if jerr := dec.Decode(&r); errors.Is(jerr, io.EOF) {
				break
			} else if jerr != nil {
				t.Fatalf("output %s: %v", out.String(), jerr)
			}
			runs[r.Provider] = r
		}
		var msg bytes.Buffer
		code := exitCode(err, &msg)
		return runs, code, msg.String() + errOut.String()
	}

	// Yesterday: the fakes sign with the real time, and a day's bill is
	// there the morning after.
	now := time.Now().In(model.Beijing)
	date := now.AddDate(0, 0, -1).Format(time.DateOnly)
	day, _ := time.ParseInLocation(time.DateOnly, date, model.Beijing)
	paidAt := day.Add(10 * time.Hour)
	if _, err := store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES ('WXCLI-1', 1, '10.00')"); err != nil {
		t.Fatal(err)
	}
	wx.AddPaidTrade("WXCLI-1", "4200000000000000000000000042", 1000, paidAt)
	at := paidAt.UTC()
	if _, _, err := service.NewPayments(store).Observe(context.Background(), model.Observation{Provider: model.ProviderWechatpay,
		Ref: "n", OutTradeNo: "WXCLI-1", TradeNo: "4200000000000000000000000042", Amount: decimal.RequireFromString("10.00"), PaidAt: &at}); err != nil {
		t.Fatal(err)
	}

	// Both clean: Alipay had no business (no bill), WeChat Pay's matches.
	runs, code, msg := reconcile(t, bothEnv, "-date", date)
	if code != 0 || len(runs) != 2 || runs[model.ProviderWechatpay].Bill.Payments != 1 || runs[model.ProviderAlipay].State != model.ReconDone {
		t.Fatalf("exit %d (%s), runs %+v", code, msg, runs)
	}

	// A WeChat Pay payment the bill lacks: WeChat Pay's run is 1, so is
	// the whole; Alipay's alone is 0.
	forgedAt := paidAt.Add(time.Hour).UTC()
	if _, err := store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES ('WXCLI-2', 1, '5.00')"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := service.NewPayments(store).Observe(context.Background(), model.Observation{Provider: model.ProviderWechatpay,
		Ref: "n2", OutTradeNo: "WXCLI-2", TradeNo: "4200000000000000000000000043", Amount: decimal.RequireFromString("5.00"), PaidAt: &forgedAt}); err != nil {
		t.Fatal(err)
	}
	runs, code, msg = reconcile(t, bothEnv, "-date", date)
	if code != 1 || len(runs) != 2 || runs[model.ProviderWechatpay].Counts[model.ReconMissingAtProvider] != 1 || !strings.Contains(msg, "wechatpay") {
		t.Fatalf("exit %d (%s), runs %+v", code, msg, runs)
	}
	if runs, code, msg = reconcile(t, bothEnv, "-provider", "alipay", "-date", date); code != 0 || len(runs) != 1 || runs[model.ProviderAlipay].Attempts != 3 {
		t.Fatalf("-provider alipay: exit %d (%s), runs %+v", code, msg, runs)
	}
	if runs, code, _ = reconcile(t, bothEnv, "-provider", "wechatpay", "-date", date); code != 1 || len(runs) != 1 || runs[model.ProviderWechatpay].Attempts != 3 {
		t.Fatalf("-provider wechatpay: exit %d, runs %+v", code, runs)
	}
	if _, code, msg = reconcile(t, alipayEnv, "-provider", "wechatpay", "-date", date); code != 1 || !strings.Contains(msg, "wechatpay is not configured") {
		t.Fatalf("-provider wechatpay without WECHATPAY_*: exit %d (%s)", code, msg)
	}
	if _, code, _ = reconcile(t, bothEnv, "-provider", "paypal", "-date", date); code != 2 {
		t.Fatalf("-provider paypal: exit %d, want 2", code)
	}
}
