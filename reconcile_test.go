package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/fakealipay"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
)

// paynotify reconcile against a fake Alipay: exit 0 for a clean day, 1
// (with the run printed) for differences or a failed run, 2 for a -date it
// cannot read; nothing is repaired twice.
func TestReconcileCommand(t *testing.T) {
	fake, aliEnv := startFakeAlipay(t)
	db := filepath.Join(t.TempDir(), "recon.db")
	store := migratedSQLite(t, db)
	environ := append([]string{"DB_DRIVER=sqlite", "DB_DSN=" + db}, aliEnv...)
	reconcile := func(t *testing.T, args ...string) (handler.RunView, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(context.Background(), environment{args: append([]string{"reconcile"}, args...), environ: environ,
			stdin: strings.NewReader(""), stdout: &out, stderr: &errOut})
		var r handler.RunView // the admin API's shape, read back as the API's clients read it
		if out.Len() > 0 {
			if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
				t.Fatalf("output %s: %v", out.String(), jerr)
			}
		}
		return r, err
	}
	day := func(d string, hour int) time.Time {
		at, _ := time.ParseInLocation("2006-01-02", d, model.Beijing)
		return at.Add(time.Duration(hour) * time.Hour)
	}

	// A clean day: one payment, in the bill and in the ledger.
	if _, err := store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES ('CLI-1', 1, '10.00')"); err != nil {
		t.Fatal(err)
	}
	fake.AddPaidTrade("CLI-1", "T-CLI-1", decimal.RequireFromString("10.00"), day("2026-11-28", 10))
	paidAt := day("2026-11-28", 10).UTC()
	if _, _, err := service.NewPayments(store).Observe(context.Background(), model.Observation{Provider: model.ProviderAlipay, Ref: "n", OutTradeNo: "CLI-1", TradeNo: "T-CLI-1", Amount: decimal.RequireFromString("10.00"), PaidAt: &paidAt}); err != nil {
		t.Fatal(err)
	}
	r, err := reconcile(t, "-date", "2026-11-28")
	if err != nil || exitCode(err, &bytes.Buffer{}) != 0 || r.State != string(model.ReconDone) || r.Unresolved != 0 {
		t.Fatalf("clean day: %+v, %v", r, err)
	}
	// The totals under the API's names, money as the API writes it.
	if r.Bill["payments"] != 1.0 || r.Bill["payment_amount"] != "10.00" || r.Ledger["payment_amount"] != "10.00" || r.Bill["refund_amount"] != "0.00" {
		t.Fatalf("clean day's totals: bill %v, ledger %v; want payment_amount \"10.00\" in both, as the API writes them", r.Bill, r.Ledger)
	}

	// A day with money for no order: repaired as UNMATCHED, exit 1.
	fake.AddPaidTrade("CLI-GONE", "T-CLI-GONE", decimal.RequireFromString("5.00"), day("2026-11-29", 11))
	r, err = reconcile(t, "-date", "2026-11-29")
	if exitCode(err, &bytes.Buffer{}) != 1 || !strings.Contains(err.Error(), "1 unresolved differences") || r.Counts[string(model.ReconUnmatched)] != 1 {
		t.Fatalf("day with differences: %+v, %v", r, err)
	}
	// Again: the same finding, nothing recorded twice.
	if r, err = reconcile(t, "-date", "2026-11-29"); exitCode(err, &bytes.Buffer{}) != 1 || r.Attempts != 2 {
		t.Fatalf("again: %+v, %v", r, err)
	}
	var n int
	if err := store.SQL().QueryRow("SELECT COUNT(*) FROM oms_order_payment WHERE trade_no = 'T-CLI-GONE'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d payments, %v", n, err)
	}

	// A damaged bill: the run failed, exit 1, the reason said.
	fake.AddPaidTrade("CLI-2", "T-CLI-2", decimal.RequireFromString("1.00"), day("2026-11-27", 9))
	fake.ServeBill("2026-11-27", []byte("not a zip"))
	r, err = reconcile(t, "-date", "2026-11-27")
	if exitCode(err, &bytes.Buffer{}) != 1 || r.State != string(model.ReconFailed) || !strings.Contains(err.Error(), "not a readable ZIP") {
		t.Fatalf("damaged bill: %+v, %v", r, err)
	}

	// A date it cannot read: a usage error, exit 2, nothing run.
	if _, err := reconcile(t, "-date", "30/11/2026"); exitCode(err, &bytes.Buffer{}) != 2 {
		t.Fatalf("bad date: %v", err)
	}
	// A date no bill can have: before Alipay's first, or not yet over.
	for _, d := range []string{"0000-01-01", "2004-11-30", time.Now().In(model.Beijing).Format("2006-01-02")} {
		if _, err := reconcile(t, "-date", d); exitCode(err, &bytes.Buffer{}) != 2 {
			t.Errorf("-date %s: %v, want a usage error", d, err)
		}
	}
}

// startFakeAlipay starts a fake Alipay gateway on keys of its own and
// returns it with the ALIPAY_* environment that points serve at it.
func startFakeAlipay(t *testing.T) (*fakealipay.Server, []string) {
	t.Helper()
	appKey, appPub := newKeyPair(t)
	alipayKey, alipayPub := newKeyPair(t)
	const appID, sellerID = "2021000000000042", "2088000000000042"
	ali, err := fakealipay.New(fakealipay.Config{AppID: appID, SellerID: sellerID, PrivateKey: alipayKey, AppPublicKey: appPub})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(ali.Handler())
	t.Cleanup(gw.Close)
	t.Cleanup(ali.Close)
	return ali, []string{"ALIPAY_APP_ID=" + appID, "ALIPAY_SELLER_ID=" + sellerID, "ALIPAY_APP_PRIVATE_KEY=" + appKey,
		"ALIPAY_PUBLIC_KEY=" + alipayPub, "ALIPAY_SANDBOX_GATEWAY=" + ali.GatewayURL(gw.URL)}
}

// migratedSQLite opens the SQLite database at path, migrated, closed when
// the test ends: the database a command under test is pointed at.
func migratedSQLite(t *testing.T, path string) *dao.Store {
	t.Helper()
	store, err := dao.Open(context.Background(), dao.DriverSQLite, path, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return store
}
