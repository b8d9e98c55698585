package console_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"golang.org/x/crypto/bcrypt"

	"paynotify/console"
	"paynotify/dao"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// Operators every test console knows, with their passwords.
var passwords = map[string]string{"alice": "alice-password-1", "bob": "bob-password-22"}

var (
	hashOnce sync.Once
	hashes   map[string]string
)

// operatorHashes hashes passwords once per test binary, at bcrypt's
// cheapest cost.
func operatorHashes(tb testing.TB) map[string]string {
	hashOnce.Do(func() {
		hashes = map[string]string{}
		for name, pw := range passwords {
			h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
			if err != nil {
				panic(err)
			}
			hashes[name] = string(h)
		}
	})
	return hashes
}

// clock is a settable time for the console's rate limiter and pages.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a console over a real store, served by a real HTTP server.
type env struct {
	store    *dao.Store
	srv      *httptest.Server
	clock    *clock
	payments *service.Payments
	refunds  *service.Refunds
	metrics  *metrics.Metrics
}

// only configures just the named operators.
func only(names ...string) func(*console.Deps) {
	return func(d *console.Deps) {
		chosen := map[string]string{}
		for _, name := range names {
			chosen[name] = d.Operators[name]
		}
		d.Operators = chosen
	}
}

// configured leaves only the named providers configured: their
// reconcilers resolve items, and the overview shows their runs.
func configured(providers ...model.Provider) func(*console.Deps) {
	return func(d *console.Deps) {
		chosen := service.Reconcilers{}
		for _, p := range providers {
			chosen[p] = d.BillReconcilers[p]
		}
		d.BillReconcilers = chosen
		d.Dashboard.Accounts = nil
		for _, p := range providers {
			d.Dashboard.Accounts = append(d.Dashboard.Accounts, model.BillAccount{Provider: p})
		}
	}
}

// newEnv serves a console over store, with operators alice and bob,
// changed by opts.
func newEnv(tb testing.TB, store *dao.Store, opts ...func(*console.Deps)) *env {
	tb.Helper()
	e := &env{store: store, clock: &clock{t: time.Now()}, payments: service.NewPayments(store), metrics: metrics.New(prometheus.NewRegistry())}
	log := slog.New(slog.NewTextHandler(testLog{tb}, nil))
	e.refunds = service.NewRefunds(store, nil, log)
	d := console.Deps{
		Log: log, Dashboard: service.NewDashboard(store), Queues: service.NewQueues(store), Lookup: service.NewLookup(store), Sessions: service.NewSessions(store, time.Hour), Refunds: e.refunds,
		BillReconcilers: service.Reconcilers{},
		Operators:       operatorHashes(tb), Metrics: e.metrics, Now: e.clock.now,
	}
	for _, p := range model.Providers() {
		r := service.NewBillReconciler(store, nil, e.payments, log)
		r.Provider = p
		d.BillReconcilers[p] = []*service.BillReconciler{r}
	}
	for _, o := range opts {
		o(&d)
	}
	c, err := console.New(d)
	if err != nil {
		tb.Fatalf("console.New: %v", err)
	}
	e.srv = httptest.NewServer(c)
	tb.Cleanup(e.srv.Close)
	return e
}

// client is one browser: its own cookies, and it does not follow
// redirects, so tests see them.
type client struct {
	e    *env
	http *http.Client
}

func (e *env) client(tb testing.TB) *client {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &client{e: e, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// clientFrom is a browser whose connections come from addr, another
// loopback address (the limiter counts per client address).
func (e *env) clientFrom(tb testing.TB, addr string) *client {
	tb.Helper()
	c := e.client(tb)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	c.http.Transport = &http.Transport{DialContext: d.DialContext}
	return c
}

// lockedWriter is a log destination several handlers may write at once.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// response is what a request got.
type response struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (c *client) do(tb testing.TB, req *http.Request) response {
	tb.Helper()
	res, err := c.http.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return response{status: res.StatusCode, body: string(b), location: res.Header.Get("Location"), header: res.Header}
}

func (c *client) get(tb testing.TB, path string) response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, c.e.srv.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return c.do(tb, req)
}

func (c *client) post(tb testing.TB, path string, form url.Values) response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, c.e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(tb, req)
}

// mustGet fetches a page and fails unless it answers want.
func (c *client) mustGet(tb testing.TB, path string, want int) response {
	tb.Helper()
	r := c.get(tb, path)
	if r.status != want {
		tb.Fatalf("GET %s: %d, want %d\n%s", path, r.status, want, r.body)
	}
	return r
}

var (
	csrfField  = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	loginField = regexp.MustCompile(`name="login_csrf" value="([0-9a-f]+)"`)
	keyField   = regexp.MustCompile(`name="key" value="([0-9a-f-]+)"`)
)

// field finds a hidden field's value in body.
func field(tb testing.TB, re *regexp.Regexp, body string) string {
	tb.Helper()
	m := re.FindStringSubmatch(body)
	if m == nil {
		tb.Fatalf("no %s in page:\n%s", re, body)
	}
	return m[1]
}

// login posts the sign-in form as a browser would, after fetching it.
func (c *client) login(tb testing.TB, name, password string) response {
	tb.Helper()
	page := c.mustGet(tb, "/console/login", http.StatusOK)
	return c.post(tb, "/console/login", url.Values{
		"login_csrf": {field(tb, loginField, page.body)}, "operator": {name}, "password": {password}, "next": {"/console/"},
	})
}

// signedIn returns a client signed in as operator.
func (e *env) signedIn(tb testing.TB, operator string) *client {
	tb.Helper()
	c := e.client(tb)
	if r := c.login(tb, operator, passwords[operator]); r.status != http.StatusSeeOther || r.location != "/console/" {
		tb.Fatalf("sign in as %s: %d %q\n%s", operator, r.status, r.location, r.body)
	}
	return c
}

// csrf is the client's anti-forgery token, from a page it can see.
func (c *client) csrf(tb testing.TB) string {
	tb.Helper()
	return field(tb, csrfField, c.mustGet(tb, "/console/audit", http.StatusOK).body)
}

// mustOrder creates an order awaiting payment.
func mustOrder(tb testing.TB, store *dao.Store, sn string, member int64, amount string) model.Order {
	tb.Helper()
	o, err := store.CreateOrder(tb.Context(), sn, member, decimal.RequireFromString(amount))
	if err != nil {
		tb.Fatalf("create order %s: %v", sn, err)
	}
	return o
}

// pay records a payment of amount for out_trade_no, as a notification
// would.
func (e *env) pay(tb testing.TB, outTradeNo, tradeNo, amount string) model.Outcome {
	tb.Helper()
	paidAt := time.Now().UTC().Truncate(time.Second)
	_, outcome, err := e.payments.Observe(tb.Context(), model.Observation{
		Provider: model.ProviderAlipay, Ref: "n-" + tradeNo, OutTradeNo: outTradeNo, TradeNo: tradeNo,
		Amount: decimal.RequireFromString(amount), PaidAt: &paidAt,
	})
	if err != nil {
		tb.Fatalf("observe %s: %v", tradeNo, err)
	}
	return outcome
}

// audits lists every admin_audit row, oldest first.
func audits(tb testing.TB, store *dao.Store) []model.Audit {
	tb.Helper()
	rows, err := store.AuditPage(tb.Context(), "", 0, 1000, true)
	if err != nil {
		tb.Fatal(err)
	}
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	return rows
}

// testLog sends the console's log to the test's.
type testLog struct{ tb testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
