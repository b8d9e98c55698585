package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/console"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// The merchant the end-to-end stack is configured as.
const (
	e2eAppID    = "2021000000000001"
	e2eSellerID = "2088000000000001"
)

// findBrowser finds headless-capable Chromium (Debian's chromium first).
// Outside CI a missing browser skips the test, loudly; under CI it fails:
// .ci/run installs chromium.
func findBrowser(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("CHROME_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatal("no Chromium found (chromium, chromium-browser, google-chrome; or set CHROME_PATH): CI must run the browser test — apt-get install -y chromium")
	}
	tb.Skip("SKIPPING the browser test: no Chromium found. Install it (apt-get install -y chromium) or set CHROME_PATH.")
	return ""
}

// stack is the service as serve wires it — notify endpoint, refund
// worker, console — over a real store and a fake Alipay.
type stack struct {
	store   *dao.Store
	srv     *httptest.Server
	fake    *fakealipay.Server
	refunds *service.Refunds
	signKey string
}

func newStack(t *testing.T, store *dao.Store) *stack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{store: store, signKey: devkey.Read(t, "alipay_private_key.pem")}
	s.fake, err = fakealipay.New(fakealipay.Config{
		AppID: e2eAppID, SellerID: e2eSellerID, PrivateKey: s.signKey, AppPublicKey: devkey.Read(t, "app_public_key.pem"),
		NotifyURL: "http://" + ln.Addr().String() + "/alipay/notify",
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	gateway := httptest.NewServer(s.fake.Handler())
	client, err := alipay.New(alipay.Config{
		AppID: e2eAppID, SellerID: e2eSellerID, AppPrivateKey: devkey.Read(t, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"), SandboxGateway: s.fake.GatewayURL(gateway.URL),
	})
	if err != nil {
		ln.Close()
		gateway.Close()
		t.Fatal(err)
	}
	payments := service.NewPayments(store)
	s.refunds = service.NewRefunds(store, service.Providers{model.ProviderAlipay: alipay.NewProvider(client, "", "")}, log)
	dashboard, queues, lookup := service.NewDashboard(store), service.NewQueues(store), service.NewLookup(store)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	c, err := console.New(console.Deps{Log: log, Dashboard: dashboard, Queues: queues, Lookup: lookup, Sessions: service.NewSessions(store, time.Hour), Refunds: s.refunds,
		Operators: operatorHashes(t), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewUnstartedServer(handler.New(handler.Deps{Log: log, Verifier: client, Payments: payments, Refunds: s.refunds,
		Dashboard: dashboard, Queues: queues, Lookup: lookup, Console: c, DB: store, Registry: reg, Metrics: m}))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	t.Cleanup(gateway.Close)
	t.Cleanup(s.fake.Close)
	return s
}

// notify posts a signed TRADE_SUCCESS for a trade the fake knows as paid.
func (s *stack) notify(t *testing.T, outTradeNo, tradeNo, amount string) {
	t.Helper()
	paid := time.Now().Add(-time.Minute)
	s.fake.AddPaidTrade(outTradeNo, tradeNo, decimal.RequireFromString(amount), paid)
	bj := paid.In(model.Beijing).Format("2006-01-02 15:04:05")
	form, err := alipay.SignForm(s.signKey, url.Values{
		"app_id": {e2eAppID}, "seller_id": {e2eSellerID}, "charset": {"utf-8"}, "notify_type": {"trade_status_sync"},
		"notify_id": {"e2e" + tradeNo}, "notify_time": {bj}, "gmt_create": {bj}, "gmt_payment": {bj},
		"out_trade_no": {outTradeNo}, "trade_no": {tradeNo}, "trade_status": {string(alipay.TradeSuccess)},
		"total_amount": {amount}, "receipt_amount": {amount}, "subject": {"paynotify e2e " + outTradeNo}, "version": {"1.0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.PostForm(s.srv.URL+"/alipay/notify", form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, res.Status)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("notify %s: %s", tradeNo, b.String())
	}
}

// TestBrowser drives the console in headless Chromium: sign in, find an
// order paid twice, see both payments on its timeline, refund the second
// from the queue, and see the audit entry and the refund end REFUNDED at
// the fake Alipay. With CONSOLE_SCREENSHOTS=DIR it saves the overview, a
// timeline and a queue there (docs/console.md shows the ones in docs/).
func TestBrowser(t *testing.T) {
	browser := findBrowser(t)
	store := daotest.Open(t, dao.DriverMySQL)
	s := newStack(t, store)
	ctx := t.Context()

	if _, err := store.PlaceOrder(ctx, model.OrderRequest{MemberID: 7, IdempotencyKey: "e2e-1", RequestHash: "h"}, func(ctx context.Context, tx *dao.PlaceTx) error {
		id, err := tx.InsertOrder(ctx, model.Order{OrderSN: "E2E-1001", MemberID: 7, PayAmount: decimal.RequireFromString("88.00"),
			TotalAmount: decimal.RequireFromString("108.00"), CouponAmount: decimal.RequireFromString("20.00")})
		if err != nil {
			return err
		}
		return tx.InsertItems(ctx, id, "E2E-1001", []model.OrderItem{{SKUID: 1, Quantity: 1, Price: decimal.RequireFromString("108.00")}})
	}); err != nil {
		t.Fatal(err)
	}
	s.notify(t, "E2E-1001", "2026120122001400000000001", "88.00")
	s.notify(t, "E2E-1001", "2026120122001400000000002", "88.00") // the buyer paid twice
	shots := os.Getenv("CONSOLE_SCREENSHOTS")
	if shots != "" {
		seedBackground(t, s)
	}

	alloc, cancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profileDir(t)),
		chromedp.WindowSize(1280, 1000), // a laptop: every page fits
	)
	defer cancel()
	bctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	defer cancel()
	bctx, cancel = context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shoot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		var png []byte
		run("screenshot "+name, chromedp.FullScreenshot(&png, 100))
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var text string

	// Sign in: the console sends a stranger to its sign-in page.
	run("sign in",
		chromedp.Navigate(s.srv.URL+"/console/"),
		chromedp.WaitVisible(`input[name=operator]`),
		chromedp.SendKeys(`input[name=operator]`, "alice"),
		chromedp.SendKeys(`input[name=password]`, passwords["alice"]),
		chromedp.Click(`section.login button[type=submit]`),
		chromedp.WaitVisible(`figure.chart`),
		chromedp.Text(`main`, &text),
	)
	if !strings.Contains(text, "Overview") || !strings.Contains(text, "payments owed back") || rawEnum.MatchString(text) {
		t.Fatalf("overview (the queue by its one name, no raw enum):\n%s", text)
	}
	shoot("console-overview.png")

	// Search the order: its timeline shows both payments.
	run("search",
		chromedp.SendKeys(`header form.search input[name=q]`, "E2E-1001"),
		chromedp.Submit(`header form.search input[name=q]`),
		chromedp.WaitVisible(`ol.timeline`),
		chromedp.Text(`main`, &text),
	)
	for _, want := range []string{"2026120122001400000000001", "2026120122001400000000002", "Payment recorded, decided: applied",
		"Payment recorded, decided: owed back now owed back", "why: order already paid"} {
		if !strings.Contains(squashSpace(text), want) {
			t.Errorf("timeline lacks %q:\n%s", want, text)
		}
	}
	var badges string
	run("badges", chromedp.Evaluate(`Array.from(document.querySelectorAll('span.badge')).map(e => e.innerText).join(' | ')`, &badges))
	if rawEnum.MatchString(badges) || strings.Contains(badges, "REFUNDED") || strings.Contains(badges, "APPLIED") {
		t.Errorf("the timeline's badges show raw enums: %s", badges)
	}
	// An id never wraps inside itself.
	var wrap string
	run("ids", chromedp.Evaluate(`getComputedStyle(document.querySelector('code.id')).whiteSpace`, &wrap))
	if wrap != "nowrap" {
		t.Errorf("code.id white-space %q, want nowrap", wrap)
	}

	// Refund the second payment from the queue, through the confirmation.
	run("queue",
		chromedp.Click(`header nav a[href="/console/queues/payments"]`),
		chromedp.WaitVisible(`a[href="/console/payments/2026120122001400000000002/refund"]`),
	)
	shoot("console-queue.png")
	run("queue words", chromedp.Text(`main`, &text))
	if !strings.Contains(text, "Payments owed back") || !strings.Contains(text, "Queue refund…") || strings.Contains(text, "Refund now") || rawEnum.MatchString(text) {
		t.Errorf("the queue's words (one name, an action that says it queues):\n%s", text)
	}
	run("confirm words",
		chromedp.Click(`a[href="/console/payments/2026120122001400000000002/refund"]`),
		chromedp.WaitVisible(`section.confirm`),
		chromedp.Text(`main`, &text),
	)
	if !strings.Contains(text, "the refund worker asks Alipay on its next round") || strings.Contains(text, "now rather than") {
		t.Errorf("the confirmation says the money goes back now; it is queued:\n%s", text)
	}
	run("refund",
		chromedp.SendKeys(`section.confirm input[name=note]`, "buyer paid twice"),
		chromedp.Click(`section.confirm button[type=submit]`),
		chromedp.WaitVisible(`p.flash`),
		chromedp.Text(`main`, &text),
	)
	if !strings.Contains(text, "Refund recorded") || !strings.Contains(text, "payment.refund") {
		t.Fatalf("after the refund:\n%s", text)
	}

	// The refund worker's round asks the fake Alipay, which refunds it.
	if n, err := s.refunds.Execute(ctx); err != nil || n != 1 {
		t.Fatalf("refund round: %d refunded, %v", n, err)
	}
	run("timeline after",
		chromedp.Navigate(s.srv.URL+"/console/orders/E2E-1001"),
		chromedp.WaitVisible(`ol.timeline`),
		chromedp.Text(`main`, &text),
	)
	for _, want := range []string{"payment.refund by alice", "buyer paid twice", "Event payment.refunded",
		"Refund requested: money owed back, in full, by alice", "owed back (order already paid) → refunding"} {
		if !strings.Contains(text, want) {
			t.Errorf("timeline after the refund lacks %q:\n%s", want, text)
		}
	}
	shoot("console-timeline.png")
	var badge string
	run("refund state", chromedp.Text(`table.refunds span.badge`, &badge))
	if badge != "refunded" {
		t.Fatalf("the refund is %q, want refunded", badge)
	}
	// The payment's badge on the timeline is where it is now, and says so.
	if !strings.Contains(squashSpace(text), "Payment recorded, decided: owed back now refunded") {
		t.Errorf("the second payment's timeline entry does not say it is refunded now:\n%s", text)
	}
	// A refunded payment offers no refund.
	run("payment page",
		chromedp.Navigate(s.srv.URL+"/console/payments/2026120122001400000000002"),
		chromedp.WaitVisible(`dl.facts`),
		chromedp.Text(`main`, &text),
	)
	if strings.Contains(text, "Refund this payment") || strings.Contains(text, "Queue its refund") {
		t.Errorf("a refunded payment offers a refund:\n%s", text)
	}
	// The refunds page opens on a tab with rows: nothing failed or in
	// progress, so on the one refunded.
	run("refunds",
		chromedp.Click(`header nav a[href="/console/queues/refunds"]`),
		chromedp.WaitVisible(`nav.tabs`),
		chromedp.Text(`main`, &text),
	)
	if !strings.Contains(text, "1 refund(s) confirmed by") {
		t.Errorf("the refunds page opens on an empty tab:\n%s", text)
	}
	// At 1280 px the refunds table is whole (no column cut off or
	// scrolled away) and the header is one line, "Sign out" on it.
	var fits struct {
		Table, Main  float64
		SignOut, Top float64
	}
	run("refunds layout", chromedp.Evaluate(`(() => {
		const t = document.querySelector('table.refunds'), m = document.querySelector('main');
		return {Table: t.getBoundingClientRect().right, Main: m.getBoundingClientRect().right,
			SignOut: document.querySelector('form.logout button').getBoundingClientRect().top,
			Top: Math.max(...Array.from(document.querySelectorAll('header.top button, header.top .brand'),
				e => e.getBoundingClientRect().top + (e.getBoundingClientRect().height > 40 ? 100 : 0)))};
	})()`, &fits))
	if fits.Table > fits.Main+1 {
		t.Errorf("the refunds table ends at %.0f px, past the page's %.0f", fits.Table, fits.Main)
	}
	if math.Abs(fits.SignOut-fits.Top) > 20 { // a button two lines high counts as a wrap
		t.Errorf("the header wraps: Sign out at %.0f px, the brand at %.0f", fits.SignOut, fits.Top)
	}
	run("audit",
		chromedp.Click(`header nav a[href="/console/audit"]`),
		chromedp.WaitVisible(`table.audit`),
		chromedp.Text(`table.audit`, &text),
	)
	if !strings.Contains(text, "payment.refund") || !strings.Contains(text, "alice") {
		t.Fatalf("audit log:\n%s", text)
	}
	if strings.Contains(text, "session.sign_in") {
		t.Errorf("the audit log is flooded with sign-ins unasked:\n%s", text)
	}
	if f, err := store.Refund(ctx, "RP-2026120122001400000000002"); err != nil || f.State != model.RefundRefunded {
		t.Fatalf("refund in the database: %+v %v", f, err)
	}
}

// rawEnum finds a state shown as its enum (refund_pending, REFUND_PENDING)
// in a page's visible text, where people read words; an event type
// (payment.refund_pending) is a name, not a state.
var rawEnum = regexp.MustCompile(`(^|[^.\w])(refund_pending|REFUND_PENDING|REFUND_FAILED|AWAITING_PAYMENT)\b`)

// squashSpace folds runs of white space into one space.
func squashSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// profileDir is a fresh Chromium profile, removed when the test ends.
// Chromium's helper processes may still write to it for a moment after
// the browser is gone, so removal is retried until a deadline.
func profileDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "paynotify-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Logf("chromium profile %s left behind: %v", dir, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return dir
}

// seedBackground adds a realistic morning to the screenshots: orders paid
// over the last two hours, a few paid twice, two payments for no order,
// and yesterday's reconciliation with a difference.
func seedBackground(t *testing.T, s *stack) {
	t.Helper()
	ctx := t.Context()
	s.notify(t, "LOST-20261130-0042", "2026120122001400000009901", "129.00")
	s.notify(t, "LOST-20261130-0043", "2026120122001400000009902", "35.50")
	bill, ledger := decimal.RequireFromString("87.40"), decimal.RequireFromString("88.00")
	reconRun(t, s.store, time.Now().In(model.Beijing).AddDate(0, 0, -1).Format("2006-01-02"),
		model.ReconItem{Outcome: model.ReconAmountDiffers, Ref: "2026113022001400000001234", TradeNo: "2026113022001400000001234",
			BillAmount: &bill, LedgerAmount: &ledger, Detail: "the bill and the ledger disagree on the amount"})
	for i := range 120 {
		sn := fmt.Sprintf("SO-2026120%04d", i)
		amount := fmt.Sprintf("%d.%02d", 20+(i*37)%400, (i*13)%100)
		mustOrder(t, s.store, sn, int64(100+i%17), amount)
		trade := fmt.Sprintf("20261201220014%012d", 1000+i)
		s.notify(t, sn, trade, amount)
		if i%23 == 5 {
			s.notify(t, sn, trade+"9", amount) // paid twice
		}
		// Spread them over the last two hours for the chart.
		at := time.Now().Add(-time.Duration((i*97)%118) * time.Minute).UTC()
		if _, err := s.store.SQL().ExecContext(ctx, "UPDATE oms_order_payment SET create_time = ? WHERE trade_no IN (?, ?)", at, trade, trade+"9"); err != nil {
			t.Fatal(err)
		}
	}
}
