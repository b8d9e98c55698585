package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/internal/proctest"
	"paynotify/model"
)

// The deadlines the silent-database tests run the service with, and how
// late after one an answer may come: unwinding, never another wait.
const (
	silentNotifyTimeout = 2 * time.Second
	silentAPITimeout    = 3 * time.Second
	answerMargin        = time.Second
	silentJWTSecret     = "silent-db-test-secret-0123456789abcdef"
)

// commitPacket is MySQL's COMMIT on the wire (COM_QUERY "COMMIT").
var commitPacket = []byte("\x03COMMIT")

// silentTradeNo is the trade of the notification under test; only its
// transaction sends it (inserting the payment), so COMMIT on the
// connection that sent it is the notification's.
const silentTradeNo = "2026113022001499990001"

// silentDB is a migrated MySQL database the service reaches through a
// proxy that can go silent, a direct store on it, an order SILENT-1 of
// member 1 awaiting 12.30, and Alipay's signed notification paying it.
type silentDB struct {
	proxy   *proctest.Proxy
	store   *dao.Store
	environ []string
	notice  string // the signed form body paying SILENT-1
}

func newSilentDB(t *testing.T) *silentDB {
	t.Helper()
	dsn := daotest.MySQLDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := proctest.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()

	appKey, _ := newKeyPair(t)
	alipayKey, alipayPub := newKeyPair(t)
	environ := []string{
		"DB_DRIVER=mysql", "DB_DSN=" + cfg.FormatDSN(),
		"NOTIFY_TIMEOUT=" + silentNotifyTimeout.String(), "API_TIMEOUT=" + silentAPITimeout.String(),
		"API_JWT_SECRET=" + silentJWTSecret,
		"ALIPAY_APP_ID=2021000000000077", "ALIPAY_SELLER_ID=2088000000000077",
		"ALIPAY_APP_PRIVATE_KEY=" + appKey, "ALIPAY_PUBLIC_KEY=" + alipayPub,
		// The jobs stay out of the way: only the requests under test talk
		// to the database.
		"ORDER_CLOSE_INTERVAL=1h", "ALIPAY_JOBS_INTERVAL=1h",
	}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := dao.Open(ctx, dao.DriverMySQL, dsn, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, sn := range []string{"SILENT-1", "SILENT-2"} {
		if _, err := store.CreateOrder(ctx, sn, 1, decimal.RequireFromString("12.30")); err != nil {
			t.Fatal(err)
		}
	}
	form := url.Values{
		"app_id": {"2021000000000077"}, "seller_id": {"2088000000000077"}, "notify_id": {"silent-1"},
		"notify_type": {"trade_status_sync"}, "trade_status": {"TRADE_SUCCESS"}, "out_trade_no": {"SILENT-1"},
		"trade_no": {silentTradeNo}, "total_amount": {"12.30"}, "gmt_payment": {"2026-11-30 14:00:00"},
	}
	signed, err := alipay.SignForm(alipayKey, form)
	if err != nil {
		t.Fatal(err)
	}
	return &silentDB{proxy: proxy, store: store, environ: environ, notice: signed.Encode()}
}

// checkPaid fails unless SILENT-1 is paid.
func (s *silentDB) checkPaid(t *testing.T) {
	t.Helper()
	o, err := s.store.Order(context.Background(), "SILENT-1")
	if err != nil || o.Status != model.OrderPaid {
		t.Fatalf("order after recovery: %+v %v", o, err)
	}
}

// timed calls f and says how long it took.
func timed[T any](f func() T) (T, time.Duration) {
	start := time.Now()
	v := f()
	return v, time.Since(start)
}

// checkInTime fails if an answer took longer than its deadline allows.
func checkInTime(t *testing.T, what string, took, deadline time.Duration) {
	t.Helper()
	if took > deadline+answerMargin {
		t.Errorf("%s answered after %v; its deadline is %v (+%v)", what, took.Round(time.Millisecond), deadline, answerMargin)
	}
}

// A database that goes silent — connections open, nothing answered — costs
// Alipay a "failure" within the notify deadline, never a hang, and /readyz
// says not ready. When it answers again, the resend applies normally.
func TestSilentDatabaseFailsFastAndRecovers(t *testing.T) {
	db := newSilentDB(t)
	base, _ := start(t, []string{"serve"}, db.environ)

	db.proxy.Freeze(true)
	got, took := timed(func() string { return post(t, base+"/alipay/notify", db.notice) })
	if got != "failure" {
		t.Fatalf("answer while the database is silent: %q, want failure", got)
	}
	checkInTime(t, "a notification on a silent database", took, silentNotifyTimeout)
	if code := get(t, base+"/readyz"); code != 503 {
		t.Fatalf("/readyz while the database is silent: %d, want 503", code)
	}
	db.proxy.Freeze(false)
	if got := post(t, base+"/alipay/notify", db.notice); got != "success" {
		t.Fatalf("answer to the resend: %q, want success", got)
	}
	if code := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz after recovery: %d", code)
	}
	db.checkPaid(t)
}

// A background job on a silent database waits at most DB_TIMEOUT for any
// one answer (the connection's read timeout; before, a fixed 30 s): the
// round fails, says so, and runs again next interval.
func TestSilentDatabaseFailsJobRoundsWithinDBTimeout(t *testing.T) {
	const dbTimeout, interval = time.Second, 200 * time.Millisecond
	db := newSilentDB(t)
	_, logs := start(t, []string{"serve"}, append(db.environ,
		"DB_TIMEOUT="+dbTimeout.String(), "ORDER_CLOSE_INTERVAL="+interval.String()))

	const failed = `"msg":"job round failed"`
	before := strings.Count(logs.String(), failed)
	db.proxy.Freeze(true)
	silenced := time.Now()
	for strings.Count(logs.String(), failed) == before {
		if time.Since(silenced) > time.Minute {
			t.Fatalf("no job round failed in a minute of silence:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond) // polling the log, not waiting for time to pass
	}
	checkInTime(t, "a job round on a silent database", time.Since(silenced), interval+dbTimeout)
	db.proxy.Freeze(false)
}

// A request whose COMMIT gets no answer — the database went silent after
// the transaction's statements — is answered by its deadline: the
// go-sql-driver runs COMMIT without a context, and before, such a request
// hung until the driver's 30 s read timeout. Whether the COMMIT took or
// not, the resend settles it.
func TestSilentCommitIsAnsweredByTheDeadline(t *testing.T) {
	db := newSilentDB(t)
	base, _ := start(t, []string{"serve"}, db.environ)

	t.Run("Notify", func(t *testing.T) {
		committing := db.proxy.FreezeAfter([]byte(silentTradeNo), commitPacket)
		got, took := timed(func() string { return post(t, base+"/alipay/notify", db.notice) })
		mustHaveHappened(t, committing, "the notification never sent COMMIT")
		if got != "failure" {
			t.Errorf("answer while COMMIT goes unanswered: %q, want failure", got)
		}
		checkInTime(t, "a notification stuck in COMMIT", took, silentNotifyTimeout)
		db.proxy.Freeze(false)
		if got := post(t, base+"/alipay/notify", db.notice); got != "success" {
			t.Fatalf("answer to the resend: %q, want success", got)
		}
		db.checkPaid(t)
	})

	t.Run("OrderAPI", func(t *testing.T) {
		token, err := handler.MemberToken([]byte(silentJWTSecret), 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cancel := func() int {
			req, err := http.NewRequest(http.MethodPost, base+"/api/v1/orders/SILENT-2/cancel", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		committing := db.proxy.FreezeAfter([]byte("SILENT-2"), commitPacket)
		code, took := timed(cancel)
		mustHaveHappened(t, committing, "the cancel never sent COMMIT")
		if code != http.StatusServiceUnavailable {
			t.Errorf("cancel while COMMIT goes unanswered: %d, want 503", code)
		}
		checkInTime(t, "a cancel stuck in COMMIT", took, silentAPITimeout)
		db.proxy.Freeze(false)
		if code := cancel(); code != http.StatusOK {
			t.Fatalf("cancel again: %d, want 200", code)
		}
	})
}

// SIGTERM while a notification is stuck in COMMIT: the drain waits for it
// no longer than its deadline, it is answered, and the program exits —
// well inside the shutdown grace. Before, such requests outlived the 20 s
// grace and got no answer.
func TestSIGTERMDrainIsBoundedByTheDeadline(t *testing.T) {
	db := newSilentDB(t)
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	addr := make(chan string, 1)
	exited := make(chan error, 1)
	logs := &syncBuffer{}
	go func() {
		exited <- run(ctx, environment{
			args: []string{"serve"}, environ: append([]string{"HTTP_ADDR=127.0.0.1:0"}, db.environ...),
			stdin: strings.NewReader(""), stdout: logs, stderr: logs,
			listening: func(a string) { addr <- a },
		})
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-exited:
		t.Fatalf("serve exited before listening: %v\n%s", err, logs)
	}

	committing := db.proxy.FreezeAfter([]byte(silentTradeNo), commitPacket)
	answered := make(chan string, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Post(base+"/alipay/notify",
			"application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(db.notice))
		if err != nil {
			answered <- "no answer: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- string(b)
	}()
	select {
	case <-committing:
	case <-time.After(30 * time.Second):
		t.Fatal("the notification never sent COMMIT")
	}
	sent := time.Now()
	sigterm()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve still running a minute after SIGTERM\n%s", logs)
	}
	checkInTime(t, "the drain after SIGTERM", time.Since(sent), silentNotifyTimeout)
	// The driver's own report of the connection cut under the COMMIT is
	// in the JSON log, not a plain-text line beside it.
	driver := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var entry struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("log line is not JSON: %q", line)
		}
		if entry.Msg == "mysql driver" {
			driver++
		}
	}
	if driver == 0 {
		t.Errorf("no WARN from the MySQL driver about the connection cut under COMMIT in:\n%s", logs)
	}
	if got := <-answered; got != "failure" {
		t.Errorf("the notification in flight at SIGTERM got %q, want failure", got)
	}
	db.proxy.Freeze(false)
}

// mustHaveHappened fails the test unless done is closed.
func mustHaveHappened(t *testing.T, done <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-done:
	default:
		t.Fatal(msg)
	}
}
