package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/model"
)

// syncBuffer collects a program's log while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the whole program in-process on a free port, stops it when
// the test ends, and returns its base URL and log.
func start(t *testing.T, args []string, environ []string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	logs := &syncBuffer{}
	done := make(chan error, 1)
	env := environment{
		args: args, environ: append([]string{"HTTP_ADDR=127.0.0.1:0"}, environ...),
		stdin: strings.NewReader(""), stdout: logs, stderr: logs,
		listening: func(a string) { addr <- a },
	}
	go func() { done <- run(ctx, env) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v\n%s", err, logs)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a, logs
	case err := <-done:
		done <- err
		t.Fatalf("program exited before listening: %v\n%s", err, logs)
	}
	return "", nil
}

func post(t *testing.T, url, body string) string {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(url, "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func get(t *testing.T, url string) int {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// What QA does on a fresh clone: `go run . dev`, then replay every file in
// testdata/notify with curl. Each answer, and the ledger at the end, is
// what docs/development.md promises.
func TestDevReplaysTestdata(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	// The refund worker would refund the REFUND_PENDING payments while we
	// look — its first round, at start, may run as late as the replay on
	// a loaded machine: -manual-refunds leaves them to an operator.
	base, logs := start(t, []string{"dev", "-db", db, "-manual-refunds"}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	if !strings.Contains(logs.String(), "curl --data @testdata/notify/01_pay_demo_1001.form") {
		t.Errorf("dev does not print the curl line:\n%s", logs)
	}
	// The loop as the docs write it: for f in testdata/notify/*.form — the
	// shell's order is the names' order, which must be the cases' order.
	files, err := filepath.Glob(filepath.Join("testdata", "notify", "*.form"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) != len(notifyCases) {
		t.Fatalf("%d replay files, %d cases", len(files), len(notifyCases))
	}
	for i, f := range files {
		c := notifyCases[i]
		if filepath.Base(f) != c.name+".form" {
			t.Fatalf("replay file %d is %s, want %s.form: the names' order is the replay order", i+1, f, c.name)
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// curl --data @file strips newlines; so do we.
		if got := post(t, base+"/alipay/notify", strings.TrimSpace(string(body))); got != c.answer {
			t.Errorf("%s: answer %q, want %q", c.name, got, c.answer)
		}
	}

	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	want := map[string]struct {
		status model.OrderStatus
		states []model.PaymentState
		app    string // the app its first payment is recorded in, if set
	}{
		"DEMO-1001": {model.OrderPaid, []model.PaymentState{model.PaymentApplied, model.PaymentRefundPending}, ""},
		"DEMO-1002": {model.OrderAwaitingPayment, []model.PaymentState{model.PaymentRefundPending}, ""},
		"DEMO-1003": {model.OrderClosed, []model.PaymentState{model.PaymentRefundPending}, ""},
		"DEMO-1004": {model.OrderPaid, []model.PaymentState{model.PaymentApplied}, ""},
		"DEMO-1005": {model.OrderPaid, []model.PaymentState{model.PaymentApplied}, devMobileAppID}, // dev's second app
	}
	for sn, w := range want {
		o, err := store.Order(context.Background(), sn)
		if err != nil {
			t.Fatal(err)
		}
		// A demo order has its lines: items total what they add up to, less
		// the points, is what it pays — never "items total 0.00".
		items, err := store.OrderItems(context.Background(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		sum := decimal.Zero
		for _, it := range items {
			sum = sum.Add(it.Price.Mul(decimal.NewFromInt(int64(it.Quantity))))
		}
		if len(items) == 0 || !sum.Equal(o.TotalAmount) || !o.TotalAmount.Sub(o.IntegrationAmount).Equal(o.PayAmount) {
			t.Errorf("%s: items %+v total %s, less %s of points, pays %s: they do not add up", sn, items, o.TotalAmount, o.IntegrationAmount, o.PayAmount)
		}
		pays, err := store.PaymentsByOrder(context.Background(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		var states []model.PaymentState
		for _, p := range pays {
			states = append(states, p.State)
		}
		if o.Status != w.status || len(states) != len(w.states) {
			t.Errorf("%s: status %d payments %v, want %d %v", sn, o.Status, states, w.status, w.states)
			continue
		}
		for i := range states {
			if states[i] != w.states[i] {
				t.Errorf("%s: payments %v, want %v", sn, states, w.states)
			}
		}
		if w.app != "" && pays[0].App != w.app {
			t.Errorf("%s: paid in app %q, want %q", sn, pays[0].App, w.app)
		}
	}
}

// serve names every missing setting in one message, and refuses the
// development keys.
func TestServeRefusesBadConfiguration(t *testing.T) {
	cases := []struct {
		name    string
		environ []string
		want    []string
	}{
		{name: "NothingSet", want: []string{"ALIPAY_APP_ID", "ALIPAY_SELLER_ID", "ALIPAY_APP_PRIVATE_KEY", "ALIPAY_PUBLIC_KEY"}},
		{name: "MalformedKeys", environ: []string{"ALIPAY_APP_ID=2021000000000009", "ALIPAY_SELLER_ID=2088000000000009",
			"ALIPAY_APP_PRIVATE_KEY=not-a-key", "ALIPAY_PUBLIC_KEY=also-not-a-key"},
			want: []string{"ALIPAY_APP_PRIVATE_KEY", "ALIPAY_PUBLIC_KEY"}},
		{name: "DevelopmentKeys", environ: []string{"ALIPAY_APP_ID=2021000000000009", "ALIPAY_SELLER_ID=2088000000000009",
			"ALIPAY_APP_PRIVATE_KEY_FILE=testdata/dev/app_private_key.pem", "ALIPAY_PUBLIC_KEY_FILE=testdata/dev/alipay_public_key.pem"},
			want: []string{"ALIPAY_APP_PRIVATE_KEY is a development key", "ALIPAY_PUBLIC_KEY is a development key"}},
		{name: "BadDriver", environ: []string{"DB_DRIVER=postgres"}, want: []string{"DB_DRIVER"}},
		{name: "DevelopmentAPIv3Key", environ: []string{"WECHATPAY_MCHID=1900000009", "WECHATPAY_APIV3_KEY=" + devWeChatAPIv3Key},
			want: []string{"WECHATPAY_APIV3_KEY is paynotify dev's public key"}},
		{name: "DevelopmentWebhookKey", environ: []string{"WEBHOOK_SECRET_KEY=" + devWebhookKey}, want: []string{"WEBHOOK_SECRET_KEY is paynotify dev's public key"}},
		// WeChat Pay is on once any of its settings is: then it names the rest,
		// and refuses the development keys.
		{name: "WeChatPayHalfSet", environ: []string{"WECHATPAY_MCHID=1900000009", "WECHATPAY_MERCHANT_KEY_FILE=testdata/dev/wechatpay_merchant_private_key.pem"},
			want: []string{"WECHATPAY_APPID is required", "WECHATPAY_APIV3_KEY", "WECHATPAY_MERCHANT_SERIAL is required", "WECHATPAY_MERCHANT_KEY_FILE is a development key"}},
		// The container image's default: MySQL, and nothing to reach it by.
		{name: "MySQLWithoutDSN", environ: []string{"DB_DRIVER=mysql"}, want: []string{"DB_DSN is required with DB_DRIVER=mysql"}},
		// A malformed value does not hide the missing ones: all at once.
		{name: "MalformedAndMissing", environ: []string{"NOTIFY_TIMEOUT=4", "DB_MAX_OPEN_CONNS=many"},
			want: []string{"NOTIFY_TIMEOUT", "DB_MAX_OPEN_CONNS", "ALIPAY_APP_ID", "ALIPAY_SELLER_ID", "ALIPAY_APP_PRIVATE_KEY", "ALIPAY_PUBLIC_KEY"}},
		{name: "BadStreamReplicas", environ: []string{"NATS_STREAM_REPLICAS=7"}, want: []string{"NATS_STREAM_REPLICAS"}},
		{name: "BadTrustedProxies", environ: []string{"TRUSTED_PROXIES=10.0.0.0/8,proxy.internal"}, want: []string{`TRUSTED_PROXIES="10.0.0.0/8,proxy.internal": "proxy.internal" is not an IP address or CIDR`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), environment{args: []string{"serve"}, environ: c.environ, stdout: &out, stderr: &out})
			if err == nil {
				t.Fatal("serve started")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "not-a-key") {
				t.Errorf("error repeats the key material:\n%v", err)
			}
		})
	}
}

// newKeyPair makes a throwaway RSA key pair (private PKCS#8 PEM, public
// PKIX PEM): serve refuses the development keys.
func newKeyPair(t *testing.T) (private, public string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	private = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	public, err = alipay.PublicKeyOf(private)
	if err != nil {
		t.Fatal(err)
	}
	return private, public
}

// In dev, money a replayed notification cannot apply goes back through the
// fake Alipay: the replay files' trades are known to it, and the refund
// worker refunds the REFUND_PENDING payment exactly once.
func TestDevRefundsWhatItCannotApply(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	base, _ := start(t, []string{"dev", "-db", db}, []string{"ALIPAY_JOBS_INTERVAL=20ms"})
	body, err := os.ReadFile(filepath.Join("testdata", "notify", "04_underpay_demo_1002.form"))
	if err != nil {
		t.Fatal(err)
	}
	if got := post(t, base+"/alipay/notify", strings.TrimSpace(string(body))); got != "success" {
		t.Fatalf("underpayment answered %q", got)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/admin/orders/DEMO-1002/refunds", nil)
		req.Header.Set("Authorization", "Bearer "+devAdminToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `"state":"REFUNDED"`) {
			if strings.Count(string(b), `"out_request_no"`) != 1 || !strings.Contains(string(b), `"amount":"0.01"`) {
				t.Fatalf("refunds: %s, want one of 0.01", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refund after 20s: %s", b)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	// The metrics say so: the refund by result, the requests by route
	// template, never by the order_sn in the path.
	waitForMetrics(t, base, []string{
		`paynotify_refunds_total{account="2088000000000001",provider="alipay",result="refunded"} 1`,
		`paynotify_refunds_total{account="2088000000000001",provider="alipay",result="failed"} 0`,
		`paynotify_http_requests_total{method="POST",route="/alipay/notify",status="200"} 1`,
		`paynotify_http_requests_total{method="GET",route="/admin/orders/:sn/refunds",status="200"}`,
		`paynotify_notify_group_size_count`,
		`paynotify_notify_group_fallbacks_total{reason="busy"}`,
	}, []string{"DEMO-1002"})
}

// waitForMetrics polls /metrics until every line in want is there (a
// line without a value matches any), and checks that none of never is.
func waitForMetrics(t *testing.T, base string, want, never []string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		var missing []string
		for _, w := range want {
			if !strings.Contains(body, w+"\n") && !strings.Contains(body, w+" ") {
				missing = append(missing, w)
			}
		}
		for _, n := range never {
			if strings.Contains(body, n) {
				t.Fatalf("/metrics carries %q:\n%s", n, body)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q after 20s:\n%s", missing, body)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// A WeChat Pay-only merchant runs serve without any ALIPAY_* variable:
// no Alipay notify endpoint, no Alipay reconciliation, and serve up; the
// console shows and resolves WeChat Pay's reconciliation, and /metrics
// reports WeChat Pay's last reconciled date only.
func TestServeWechatpayOnly(t *testing.T) {
	dir := t.TempDir()
	merchant, _ := newKeyPair(t)
	_, wechat := newKeyPair(t)
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + filepath.Join(dir, "wx.db"),
		"WECHATPAY_MCHID=1230000109", "WECHATPAY_APPID=wxd678efh567hg6787",
		"WECHATPAY_APIV3_KEY=0123456789abcdef0123456789abcdef", "WECHATPAY_MERCHANT_KEY_FILE=" + write("apiclient_key.pem", merchant),
		"WECHATPAY_MERCHANT_SERIAL=5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
		"WECHATPAY_PUBLIC_KEY_FILE=" + write("pub_key.pem", wechat), "WECHATPAY_PUBLIC_KEY_ID=PUB_KEY_ID_0112345678202401010000000000000000",
		"ADMIN_TOKEN=wechat-only-admin-token", "RECON_AT=off"}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	// A WeChat Pay run of the 30th with one item to resolve.
	store, err := dao.Open(context.Background(), dao.DriverSQLite, filepath.Join(dir, "wx.db"), dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	recon, attempt, err := store.ClaimRun(ctx, model.BillAccount{Provider: model.ProviderWechatpay}, "2026-11-30", "test", time.Now(), time.Minute, nil)
	if err == nil {
		err = store.SaveItems(ctx, []model.ReconItem{{RunID: recon.ID, AttemptNo: attempt, Outcome: model.ReconUnmatched,
			Ref: "4200000001202611300000000099", TradeNo: "4200000001202611300000000099"}})
	}
	if err == nil {
		err = store.FinishRun(ctx, recon.ID, "test", attempt, dao.RunResult{State: model.ReconDone, Items: 1}, time.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, []string{"serve"}, environ)
	if code := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	resp, err := http.Post(base+"/alipay/notify", "application/x-www-form-urlencoded", strings.NewReader("a=b"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/alipay/notify without Alipay: %d, want 404", resp.StatusCode)
	}
	consoleResolvesWechatpay(t, base, store, recon.ID)
}

// consoleResolvesWechatpay signs in to a WeChat Pay-only serve's console
// as admin and resolves the one item of WeChat Pay's run runID; /metrics
// has WeChat Pay's last reconciled date and no Alipay series.
func consoleResolvesWechatpay(t *testing.T, base string, store *dao.Store, runID int64) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fetch := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	hidden := func(name, body string) string {
		t.Helper()
		m := regexp.MustCompile(`name="` + name + `" value="([0-9a-f-]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s field in:\n%s", name, body)
		}
		return m[1]
	}
	_, login := fetch(http.MethodGet, "/console/login", nil)
	if code, body := fetch(http.MethodPost, "/console/login", url.Values{"login_csrf": {hidden("login_csrf", login)}, "operator": {"admin"},
		"password": {"wechat-only-admin-token"}, "next": {"/console/"}}); code != http.StatusSeeOther {
		t.Fatalf("sign in: %d\n%s", code, body)
	}
	_, overview := fetch(http.MethodGet, "/console/", nil)
	// The run is from before runs were kept per account (account ''):
	// the merchant's, the only one configured.
	if !strings.Contains(overview, `WeChat Pay <code class="id">1230000109</code>: <a href="/console/reconciliations/wechatpay/2026-11-30?account=1230000109">`) || strings.Contains(overview, "Alipay") {
		t.Errorf("overview of a WeChat Pay-only serve:\n%s", overview)
	}
	code, queue := fetch(http.MethodGet, "/console/queues/reconciliation", nil)
	if code != http.StatusOK || !strings.Contains(queue, "/resolve") {
		t.Fatalf("reconciliation queue: %d, no resolve form\n%s", code, queue)
	}
	items, err := store.ReconItems(context.Background(), runID, "", 10)
	if err != nil || len(items) != 1 {
		t.Fatalf("items: %v %v", items, err)
	}
	path := "/console/reconciliation/items/" + strconv.FormatInt(items[0].ID, 10) + "/resolve"
	if code, body := fetch(http.MethodPost, path, url.Values{"csrf": {hidden("csrf", queue)}, "key": {hidden("key", queue)},
		"note": {"refunded in WeChat Pay's merchant platform"}, "next": {"/console/queues/reconciliation"}}); code != http.StatusSeeOther {
		t.Fatalf("resolve: %d\n%s", code, body)
	}
	items, _ = store.ReconItems(context.Background(), runID, "", 10)
	if items[0].ResolvedAt == nil || items[0].ResolvedBy != "admin" {
		t.Fatalf("item after resolve: %+v", items[0])
	}

	_, metrics := fetch(http.MethodGet, "/metrics", nil)
	if !strings.Contains(metrics, `paynotify_reconciliation_last_success_date{account="1230000109",provider="wechatpay"} `) ||
		strings.Contains(metrics, `paynotify_reconciliation_last_success_date{account="",provider="alipay"}`) {
		t.Errorf("/metrics of a WeChat Pay-only serve:\n%s", metrics)
	}
}
