package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao/daotest"
	"paynotify/fakewechatpay"
	"paynotify/model"
	"paynotify/service"
)

// paynotify reconcile with WeChat Pay configured: one run per provider
// (Alipay's and WeChat Pay's), the exit status the worst of them;
// -provider runs one; a provider not configured or not known is refused.
func TestReconcileCommandPerProvider(t *testing.T) {
	_, aliEnv := startFakeAlipay(t)
	dir := t.TempDir()
	wx, wechatEnv := startFakeWechat(t, dir)

	db := filepath.Join(dir, "recon.db")
	store := migratedSQLite(t, db)
	alipayEnv := append([]string{"DB_DRIVER=sqlite", "DB_DSN=" + db}, aliEnv...)
	bothEnv := append(append([]string{}, alipayEnv...), wechatEnv...)
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
	// A WeChat Pay-only deployment reconciles WeChat Pay's day alone, with
	// or without -provider, and names the route of what it found.
	wechatOnly := append([]string{"DB_DRIVER=sqlite", "DB_DSN=" + db}, wechatEnv...)
	for _, args := range [][]string{{"-date", date}, {"-provider", "wechatpay", "-date", date}} {
		runs, code, msg = reconcile(t, wechatOnly, args...)
		if code != 1 || len(runs) != 1 || runs[model.ProviderWechatpay].Counts[model.ReconMissingAtProvider] != 1 ||
			!strings.Contains(msg, "GET /admin/reconciliations/wechatpay/"+date) {
			t.Fatalf("WeChat Pay only, %q: exit %d (%s), runs %+v", args, code, msg, runs)
		}
	}
	if _, code, msg = reconcile(t, wechatOnly, "-provider", "alipay", "-date", date); code != 1 || !strings.Contains(msg, "alipay is not configured") {
		t.Fatalf("-provider alipay, WeChat Pay only: exit %d (%s)", code, msg)
	}
	// Four months back: WeChat Pay keeps three, and says so. Asked for
	// every provider, it is skipped and Alipay's run decides; asked for by
	// name, or alone, it fails.
	old := now.AddDate(0, -4, 0).Format(time.DateOnly)
	if runs, code, msg = reconcile(t, wechatOnly, "-date", old); code != 1 || len(runs) != 0 || !strings.Contains(msg, "WeChat Pay keeps trade bills for 3 months") {
		t.Fatalf("four months back: exit %d (%s), runs %+v", code, msg, runs)
	}
	if runs, code, msg = reconcile(t, bothEnv, "-provider", "wechatpay", "-date", old); code != 1 || len(runs) != 0 || !strings.Contains(msg, "WeChat Pay keeps trade bills for 3 months") {
		t.Fatalf("-provider wechatpay, four months back: exit %d (%s), runs %+v", code, msg, runs)
	}
	if runs, code, msg = reconcile(t, bothEnv, "-date", old); code != 0 || len(runs) != 1 || runs[model.ProviderAlipay].State != model.ReconDone ||
		!strings.Contains(msg, "wechatpay 1900000042 skipped: invalid request: WeChat Pay keeps trade bills for 3 months") {
		t.Fatalf("every provider, four months back: exit %d (%s), runs %+v", code, msg, runs)
	}

	// -account names one account of the provider: its run alone (the
	// environment's seller, 2088000000000042); one it has not, or an
	// account without its provider, is a command line it cannot use.
	if runs, code, msg = reconcile(t, bothEnv, "-provider", "alipay", "-account", "2088000000000042", "-date", date); code != 0 || len(runs) != 1 ||
		runs[model.ProviderAlipay].State != model.ReconDone {
		t.Fatalf("-provider alipay -account 2088000000000042: exit %d (%s), runs %+v", code, msg, runs)
	}
	if _, code, msg = reconcile(t, bothEnv, "-provider", "alipay", "-account", "2088000000000099", "-date", date); code != 2 ||
		!strings.Contains(msg, `has no account "2088000000000099" (its accounts: 2088000000000042)`) {
		t.Fatalf("an account Alipay has not: exit %d (%s)", code, msg)
	}
	if _, code, msg = reconcile(t, bothEnv, "-account", "2088000000000042", "-date", date); code != 2 || !strings.Contains(msg, "name its provider with -provider") {
		t.Fatalf("-account without -provider: exit %d (%s)", code, msg)
	}

	// A command line it cannot use says why, with the usage, and exits 2.
	for _, args := range [][]string{{"-provider", "paypal", "-date", date}, {"-date", "2030-01-01"}, {"-date", "1999-01-01"}} {
		if _, code, msg = reconcile(t, bothEnv, args...); code != 2 || !strings.Contains(msg, "paynotify reconcile: -") || !strings.Contains(msg, "usage: paynotify reconcile") {
			t.Fatalf("%q: exit %d, want 2 with the reason and the usage:\n%s", args, code, msg)
		}
	}
}

// Two `serve` processes on one MariaDB database are asked at once to
// reconcile one WeChat Pay date (POST /admin/reconciliations/wechatpay/
// {date}/run to each), a day further back each round, until each process
// has been seen to claim the date first: the notification lost that day
// is repaired once whichever wins — one payment, one order.paid, one
// REPAIRED item — and the other is answered 409 (the date is running
// elsewhere) or, had the winner finished, the date's run again.
func TestReconcileWechatPayAcrossTwoInstances(t *testing.T) {
	wx, wechatEnv := startFakeWechat(t, t.TempDir())
	const adminToken = "instances-admin-token-0123456789"
	dsn := daotest.MySQLDatabase(t)
	ti := startTwoInstancesOn(t, [2]string{dsn, dsn}, dsn, append(wechatEnv,
		"ADMIN_TOKEN="+adminToken, "RECON_AT=off", "WECHATPAY_JOBS_INTERVAL=1h")...)
	runAt := func(i int, date string) (int, string, error) {
		req, err := http.NewRequest(http.MethodPost, ti.inst[i].base+"/admin/reconciliations/wechatpay/"+date+"/run", nil)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := ti.client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		var view struct{ State string }
		err = json.NewDecoder(resp.Body).Decode(&view)
		return resp.StatusCode, view.State, err
	}
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		if err := ti.store.SQL().QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	// Days back from yesterday: the fake and the SDK sign with the real
	// time, and WeChat Pay keeps three months of bills.
	yesterday := time.Now().In(model.Beijing).AddDate(0, 0, -1)
	seen, answers := map[int]bool{}, map[int]int{}
	round := 0
	for ; round < 40 && !(seen[0] && seen[1]); round++ {
		day := yesterday.AddDate(0, 0, -round)
		date := day.Format(time.DateOnly)
		sn, transactionID := fmt.Sprintf("WXINST-%d", round), fmt.Sprintf("4200002026120200000000%06d", round)
		ti.order(t, sn, "50.00")
		paidAt, _ := time.ParseInLocation(time.DateTime, date+" 10:00:00", model.Beijing)
		wx.AddPaidTrade(sn, transactionID, 5000, paidAt)

		var codes [2]int
		var states [2]string
		var errs [2]error
		// Which process's request goes out first alternates: goroutines
		// released at once are not scheduled fairly.
		swap := round % 2
		together(2, func(g int) {
			i := g ^ swap
			codes[i], states[i], errs[i] = runAt(i, date)
		})
		for i := range codes {
			switch {
			case errs[i] != nil:
				t.Fatalf("%s: instance %d: %v", date, i, errs[i])
			case codes[i] == http.StatusOK && states[i] == string(model.ReconDone),
				codes[i] == http.StatusAccepted && states[i] == string(model.ReconRunning),
				codes[i] == http.StatusConflict:
			default:
				t.Fatalf("%s: instance %d answered %d %q:\n%s", date, i, codes[i], states[i], ti.inst[i].log)
			}
		}
		answers[codes[0]]++
		answers[codes[1]]++
		if codes[0] == http.StatusConflict && codes[1] == http.StatusConflict {
			t.Fatalf("%s: both instances found the date running elsewhere", date)
		}
		// A run answered 202 goes on after its request: wait for its end.
		waitFor(t, date+"'s run done", func() bool {
			return count("SELECT COUNT(*) FROM recon_run WHERE provider = 'wechatpay' AND bill_date = ? AND state = ?", date, model.ReconDone) == 1
		})
		var winner string
		if err := ti.store.SQL().QueryRow(`SELECT a.owner FROM recon_attempt a JOIN recon_run r ON r.id = a.run_id
			WHERE r.provider = 'wechatpay' AND r.bill_date = ? AND a.attempt_no = 1`, date).Scan(&winner); err != nil {
			t.Fatal(err)
		}
		// A process's runs are owned by host-pid-…
		for i, in := range ti.inst {
			if strings.Contains(winner, fmt.Sprintf("-%d-", in.cmd.Process.Pid)) {
				seen[i] = true
			}
		}
		o, pays := ti.state(t, sn)
		if o.Status != model.OrderPaid || len(pays) != 1 || pays[0].Provider != model.ProviderWechatpay || pays[0].State != model.PaymentApplied {
			t.Fatalf("%s: order %+v, payments %+v", date, o, pays)
		}
		if n := count("SELECT COUNT(*) FROM outbox WHERE aggregate_id = ? AND event_type = ?", o.ID, model.EventOrderPaid); n != 1 {
			t.Fatalf("%s: %d order.paid events", date, n)
		}
		if n := count(`SELECT COUNT(*) FROM recon_item i JOIN recon_run r ON r.id = i.run_id
			WHERE r.provider = 'wechatpay' AND i.outcome = ? AND i.trade_no = ?`, model.ReconRepaired, transactionID); n != 1 {
			t.Fatalf("%s: %d REPAIRED items", date, n)
		}
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("first claims seen %v in %d rounds: the race did not show both", seen, round)
	}
	t.Logf("each process claimed first within %d rounds; answers by HTTP status %v", round, answers)

	// Four months back: WeChat Pay keeps three. Refused as a bad request
	// before any run is claimed.
	old := yesterday.AddDate(0, -4, 0).Format(time.DateOnly)
	if code, _, _ := runAt(0, old); code != http.StatusBadRequest {
		t.Fatalf("POST …/wechatpay/%s/run answered %d, want 400", old, code)
	}
	if n := count("SELECT COUNT(*) FROM recon_run WHERE provider = 'wechatpay' AND bill_date = ?", old); n != 0 {
		t.Fatalf("a refused date left %d runs", n)
	}
}

// startFakeWechat starts a fake WeChat Pay on a loopback port, with keys
// of its own, and returns it with the WECHATPAY_* environment of a
// paynotify that uses it (its key files written in dir).
func startFakeWechat(t *testing.T, dir string) (*fakewechatpay.Server, []string) {
	t.Helper()
	merchantKey, merchantPub := newKeyPair(t)
	wechatKey, wechatPub := newKeyPair(t)
	const mchID, wxAppID, serial, keyID = "1900000042", "wx0000000000000042", "5157F09EFDC096DE15EBE81A47057A7232F1B8E1", "PUB_KEY_ID_0119000000000042"
	const apiV3Key = "0123456789abcdef0123456789abcdef"
	wx, err := fakewechatpay.New(fakewechatpay.Config{MchID: mchID, AppID: wxAppID, APIv3Key: apiV3Key, PrivateKey: wechatKey,
		PublicKeyID: keyID, Sign: fakewechatpay.SignPublicKey, MerchantPublicKey: merchantPub, MerchantSerial: serial})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(wx.Handler())
	t.Cleanup(gw.Close)
	t.Cleanup(wx.Close)
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return wx, []string{"WECHATPAY_MCHID=" + mchID, "WECHATPAY_APPID=" + wxAppID, "WECHATPAY_APIV3_KEY=" + apiV3Key,
		"WECHATPAY_MERCHANT_KEY_FILE=" + file("apiclient_key.pem", merchantKey), "WECHATPAY_MERCHANT_SERIAL=" + serial,
		"WECHATPAY_PUBLIC_KEY_FILE=" + file("pub_key.pem", wechatPub), "WECHATPAY_PUBLIC_KEY_ID=" + keyID, "WECHATPAY_GATEWAY=" + gw.URL}
}
