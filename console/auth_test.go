package console_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"paynotify/console"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

func TestSignIn(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)

		t.Run("WrongPassword", func(t *testing.T) {
			c := e.client(t)
			if r := c.login(t, "alice", "not-her-password"); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "Wrong operator or password") {
				t.Fatalf("wrong password: %d\n%s", r.status, r.body)
			}
			c.mustGet(t, "/console/", http.StatusSeeOther)
		})
		t.Run("UnknownOperator", func(t *testing.T) {
			c := e.client(t)
			if r := c.login(t, "mallory", passwords["alice"]); r.status != http.StatusUnauthorized {
				t.Fatalf("unknown operator: %d", r.status)
			}
		})
		t.Run("ForgedForm", func(t *testing.T) {
			// A form posted without the sign-in page's value (another
			// site's form) is refused even with the right password.
			c := e.client(t)
			r := c.post(t, "/console/login", url.Values{"operator": {"alice"}, "password": {passwords["alice"]}})
			if r.status != http.StatusForbidden {
				t.Fatalf("forged sign-in: %d", r.status)
			}
			c.mustGet(t, "/console/", http.StatusSeeOther)
		})
		t.Run("Cookie", func(t *testing.T) {
			c := e.client(t)
			page := c.mustGet(t, "/console/login", http.StatusOK)
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/console/login", strings.NewReader(url.Values{
				"login_csrf": {field(t, loginField, page.body)}, "operator": {"alice"}, "password": {passwords["alice"]},
				"next": {"/console/audit"},
			}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-Proto", "https")
			r := c.do(t, req)
			if r.status != http.StatusSeeOther || r.location != "/console/audit" {
				t.Fatalf("sign in: %d %q", r.status, r.location)
			}
			var session *http.Cookie
			for _, ck := range (&http.Response{Header: r.header}).Cookies() {
				if ck.Name == "paynotify_console" {
					session = ck
				}
			}
			if session == nil {
				t.Fatalf("no session cookie in %v", r.header["Set-Cookie"])
			}
			if !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteStrictMode || session.Path != "/console" ||
				session.MaxAge <= 0 || session.MaxAge > 3600 || len(session.Value) != 64 {
				t.Errorf("session cookie %+v: want HttpOnly, Secure behind HTTPS, SameSite=Strict, Path=/console, expiring within the TTL", session)
			}
			// Only the token's hash is stored.
			if _, err := store.Session(t.Context(), session.Value, time.Now()); err == nil {
				t.Error("the raw token finds a session: it must be stored hashed")
			}
		})
		t.Run("PlainHTTPCookieNotSecure", func(t *testing.T) {
			c := e.signedIn(t, "bob")
			u, _ := url.Parse(e.srv.URL + "/console/")
			for _, ck := range c.http.Jar.Cookies(u) {
				if ck.Name == "paynotify_console" && ck.Secure {
					t.Error("Secure cookie over plain HTTP: the browser would never send it back")
				}
			}
		})
		t.Run("SignInAndOutAudited", func(t *testing.T) {
			c := e.signedIn(t, "alice")
			before := len(audits(t, store))
			if r := c.post(t, "/console/logout", url.Values{"csrf": {c.csrf(t)}}); r.status != http.StatusSeeOther {
				t.Fatalf("sign out: %d", r.status)
			}
			c.mustGet(t, "/console/", http.StatusSeeOther)
			rows := audits(t, store)
			if len(rows) != before+1 || rows[len(rows)-1].Action != model.AuditSignOut || rows[len(rows)-1].Operator != "alice" {
				t.Fatalf("audit after sign-out: %+v", rows[before:])
			}
			var signIns int
			for _, a := range rows {
				if a.Action == model.AuditSignIn {
					signIns++
				}
			}
			if signIns == 0 {
				t.Error("no sign-in audited")
			}
		})
		t.Run("NextStaysInConsole", func(t *testing.T) {
			c := e.client(t)
			page := c.mustGet(t, "/console/login?next=//evil.example/", http.StatusOK)
			r := c.post(t, "/console/login", url.Values{"login_csrf": {field(t, loginField, page.body)},
				"operator": {"bob"}, "password": {passwords["bob"]}, "next": {"//evil.example/"}})
			if r.status != http.StatusSeeOther || r.location != "/console/" {
				t.Fatalf("redirect after sign-in: %d %q", r.status, r.location)
			}
		})
	})
}

func TestSignInRateLimited(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		c := e.client(t)
		for i := range 5 {
			if r := c.login(t, "alice", "guess"); r.status != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i+1, r.status)
			}
		}
		// Now even the right password waits, and says how long.
		r := c.login(t, "alice", passwords["alice"])
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Fatalf("after 5 failures: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
		}
		// A name nobody has is limited alike: the answers do not tell
		// which names are operators.
		for i := range 5 {
			if r := c.login(t, "mallory", "guess"); r.status != http.StatusUnauthorized {
				t.Fatalf("unknown name, failure %d: %d", i+1, r.status)
			}
		}
		if r := c.login(t, "mallory", "guess"); r.status != http.StatusTooManyRequests {
			t.Fatalf("unknown name after 5 failures: %d", r.status)
		}
		// From another address alice is not locked out: the guesser spent
		// only his own tries at her name.
		if r := e.clientFrom(t, "127.0.0.2").login(t, "alice", passwords["alice"]); r.status != http.StatusSeeOther {
			t.Fatalf("alice from another address: %d\n%s", r.status, r.body)
		}
		e.clock.advance(16 * time.Minute)
		if r := c.login(t, "alice", passwords["alice"]); r.status != http.StatusSeeOther {
			t.Fatalf("after the window: %d\n%s", r.status, r.body)
		}
	})
}

// TestSignInBurstLimited: 32 tries at once from one address are counted
// before any password is checked, so all but the first five wait.
func TestSignInBurstLimited(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		const burst = 32
		forms := make([]url.Values, burst)
		clients := make([]*client, burst)
		for i := range forms {
			clients[i] = e.client(t)
			page := clients[i].mustGet(t, "/console/login", http.StatusOK)
			forms[i] = url.Values{"login_csrf": {field(t, loginField, page.body)}, "operator": {"alice"}, "password": {"guess"}}
		}
		statuses := make([]int, burst)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range forms {
			wg.Go(func() {
				<-start
				statuses[i] = clients[i].post(t, "/console/login", forms[i]).status
			})
		}
		close(start)
		wg.Wait()
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if count[http.StatusUnauthorized] != 5 || count[http.StatusTooManyRequests] != burst-5 {
			t.Fatalf("a burst of %d: %v, want 5 × 401 and the rest 429", burst, count)
		}
	})
}

// TestSignInGlobalLimit: guesses spread over many addresses and names run
// into the global limit, which a browser that has signed in as the name
// before does not: a stranger cannot lock a returning operator out.
func TestSignInGlobalLimit(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		returning := e.clientFrom(t, "127.0.0.9")
		if r := returning.login(t, "bob", passwords["bob"]); r.status != http.StatusSeeOther {
			t.Fatalf("bob signs in: %d", r.status)
		}
		if r := returning.post(t, "/console/logout", url.Values{"csrf": {returning.csrf(t)}}); r.status != http.StatusSeeOther {
			t.Fatalf("bob signs out: %d", r.status)
		}
		// 100 failures from 20 addresses, five names each.
		for a := range 20 {
			g := e.clientFrom(t, fmt.Sprintf("127.0.1.%d", a+1))
			for n := range 5 {
				if r := g.login(t, fmt.Sprintf("guess%d", n), "guess"); r.status != http.StatusUnauthorized {
					t.Fatalf("guess from address %d, name %d: %d", a, n, r.status)
				}
			}
		}
		if r := e.clientFrom(t, "127.0.2.1").login(t, "bob", passwords["bob"]); r.status != http.StatusTooManyRequests {
			t.Fatalf("bob from a new browser past the global limit: %d", r.status)
		}
		if r := returning.login(t, "bob", passwords["bob"]); r.status != http.StatusSeeOther {
			t.Fatalf("bob from his own browser past the global limit: %d\n%s", r.status, r.body)
		}
		returning.post(t, "/console/logout", url.Values{"csrf": {returning.csrf(t)}})
		// The device cookie is bob's only: for alice it counts for nothing.
		if r := returning.login(t, "alice", passwords["alice"]); r.status != http.StatusTooManyRequests {
			t.Fatalf("alice from bob's browser past the global limit: %d", r.status)
		}
	})
}

// TestSignInLogsNoTypedName: a password typed into the name field must not
// reach the log.
func TestSignInLogsNoTypedName(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		var logged strings.Builder
		var mu sync.Mutex
		e := newEnv(t, store, func(d *console.Deps) {
			d.Log = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
		})
		c := e.client(t)
		const typed = "my-secret-password-in-the-name-field"
		for range 7 {
			c.login(t, typed, "x")
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(logged.String(), typed) || !strings.Contains(logged.String(), "operator_tag=") {
			t.Fatalf("log:\n%s", logged.String())
		}
	})
}

// TestUnknownNameCostsAsMuch: the stand-in hash an unknown name is checked
// against has the configured hashes' cost — hash-password's 12 for real
// deployments — so its timing does not tell names apart.
func TestUnknownNameCostsAsMuch(t *testing.T) {
	for _, cost := range []int{bcrypt.MinCost, console.PasswordCost} {
		h, err := bcrypt.GenerateFromPassword([]byte("pw"), cost)
		if err != nil {
			t.Fatal(err)
		}
		c, err := console.New(console.Deps{Operators: map[string]string{"alice": string(h)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := console.DummyCost(c); got != cost {
			t.Errorf("operators at cost %d: the unknown name's hash has cost %d", cost, got)
		}
	}
}

func TestPagesNeedSignIn(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		mustOrder(t, store, "SN-1", 7, "10.00")
		e.pay(t, "SN-1", "T-1", "10.00")
		pages := []string{"/console/", "/console/search?q=SN-1", "/console/orders/SN-1", "/console/payments/T-1",
			"/console/queues/refunds", "/console/queues/outbox", "/console/queues/payments", "/console/audit",
			"/console/orders/SN-1/refund", "/console/payments/T-1/refund", "/console/refunds/AS-1/retry"}
		anon := e.client(t)
		for _, p := range pages {
			r := anon.mustGet(t, p, http.StatusSeeOther)
			if want := "/console/login?next=" + url.QueryEscape(p); r.location != want {
				t.Errorf("GET %s signed out: to %q, want %q", p, r.location, want)
			}
		}
		for _, p := range []string{"/console/logout", "/console/zone", "/console/orders/SN-1/refund", "/console/payments/T-1/refund",
			"/console/refunds/AS-1/retry", "/console/refunds/AS-1/resolve", "/console/outbox/1/requeue"} {
			if r := anon.post(t, p, url.Values{}); r.status != http.StatusUnauthorized {
				t.Errorf("POST %s signed out: %d", p, r.status)
			}
		}
		// A made-up cookie is no session.
		u, _ := url.Parse(e.srv.URL + "/console/")
		anon.http.Jar.SetCookies(u, []*http.Cookie{{Name: "paynotify_console", Value: strings.Repeat("a", 64), Path: "/console"}})
		anon.mustGet(t, "/console/", http.StatusSeeOther)
	})
}

func TestRemovedOperatorSignedOut(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		before := newEnv(t, store)
		c := before.signedIn(t, "bob")
		c.mustGet(t, "/console/", http.StatusOK)
		// The deployer removes bob and restarts: his session no longer works.
		after := newEnv(t, store, only("alice"))
		c.e = after
		u, _ := url.Parse(before.srv.URL + "/console/")
		v, _ := url.Parse(after.srv.URL + "/console/")
		c.http.Jar.SetCookies(v, c.http.Jar.Cookies(u))
		c.mustGet(t, "/console/", http.StatusSeeOther)
	})
}

func TestChangingFormsNeedCSRF(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		alice := e.signedIn(t, "alice")
		bob := e.signedIn(t, "bob")
		aliceToken, bobToken := alice.csrf(t), bob.csrf(t)
		cases := []struct {
			name string
			form url.Values
			// origin, if set, is sent as the Origin header.
			origin string
		}{
			{"Missing", url.Values{"zone": {"UTC"}}, ""},
			{"AnotherOperatorsToken", url.Values{"zone": {"UTC"}, "csrf": {bobToken}}, ""},
			{"Garbage", url.Values{"zone": {"UTC"}, "csrf": {"00"}}, ""},
			{"OtherOrigin", url.Values{"zone": {"UTC"}, "csrf": {aliceToken}}, "https://evil.example"},
			{"NullOrigin", url.Values{"zone": {"UTC"}, "csrf": {aliceToken}}, "null"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/console/zone", strings.NewReader(tc.form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if tc.origin != "" {
					req.Header.Set("Origin", tc.origin)
				}
				if r := alice.do(t, req); r.status != http.StatusForbidden {
					t.Fatalf("%d, want 403", r.status)
				}
				if page := alice.mustGet(t, "/console/", http.StatusOK); !strings.Contains(page.body, `<option value="Asia/Shanghai" selected>`) {
					t.Fatal("the zone changed")
				}
			})
		}
		t.Run("BehindProxy", func(t *testing.T) {
			// A proxy that rewrites Host says where the browser was.
			form := url.Values{"zone": {"Asia/Shanghai"}, "csrf": {aliceToken}}
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/console/zone", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "https://console.example.com")
			req.Header.Set("X-Forwarded-Host", "console.example.com")
			if r := alice.do(t, req); r.status != http.StatusSeeOther {
				t.Fatalf("through a proxy: %d, want 303", r.status)
			}
		})
		if r := alice.post(t, "/console/zone", url.Values{"zone": {"UTC"}, "csrf": {aliceToken}, "next": {"/console/"}}); r.status != http.StatusSeeOther {
			t.Fatalf("with the token: %d", r.status)
		}
		if page := alice.mustGet(t, "/console/", http.StatusOK); !strings.Contains(page.body, `<option value="UTC" selected>`) {
			t.Fatal("the zone did not change")
		}
		if r := alice.post(t, "/console/zone", url.Values{"zone": {"Mars/Olympus"}, "csrf": {aliceToken}}); r.status != http.StatusBadRequest {
			t.Fatalf("unknown zone: %d", r.status)
		}
	})
}

func TestAdminTokenSignsInAdmin(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		const token = "an-admin-token-1234"
		e := newEnv(t, store, only(), func(d *console.Deps) { d.AdminToken = token })
		c := e.client(t)
		if r := c.login(t, "alice", passwords["alice"]); r.status != http.StatusUnauthorized {
			t.Fatalf("no operators configured, alice: %d", r.status)
		}
		if r := c.login(t, "someone", token); r.status != http.StatusUnauthorized {
			t.Fatalf("the token under another name: %d", r.status)
		}
		if r := c.login(t, "admin", token+"x"); r.status != http.StatusUnauthorized {
			t.Fatalf("a longer token: %d", r.status)
		}
		if r := c.login(t, "admin", token); r.status != http.StatusSeeOther {
			t.Fatalf("admin with the token: %d\n%s", r.status, r.body)
		}
		if page := c.mustGet(t, "/console/", http.StatusOK); !strings.Contains(page.body, `class="who">admin<`) {
			t.Fatal("not signed in as admin")
		}
	})
}

// TestSignInDeviceBeatsSharedAddress: five wrong tries at alice from her
// own address (a colleague's desk, or everyone behind one reverse proxy)
// lock out every browser there without her device cookie — the stranger's,
// and bob's browser, whose cookie is bob's — but not hers: her browser's
// tries count against its cookie alone, which still stops a thief of the
// cookie after five guesses.
func TestSignInDeviceBeatsSharedAddress(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		alice, bob := e.client(t), e.client(t)
		for name, c := range map[string]*client{"alice": alice, "bob": bob} {
			if r := c.login(t, name, passwords[name]); r.status != http.StatusSeeOther {
				t.Fatalf("%s signs in: %d", name, r.status)
			}
			if r := c.post(t, "/console/logout", url.Values{"csrf": {c.csrf(t)}}); r.status != http.StatusSeeOther {
				t.Fatalf("%s signs out: %d", name, r.status)
			}
		}
		stranger := e.client(t)
		for i := range 5 {
			if r := stranger.login(t, "alice", "guess"); r.status != http.StatusUnauthorized {
				t.Fatalf("stranger's failure %d: %d", i+1, r.status)
			}
		}
		if r := stranger.login(t, "alice", passwords["alice"]); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Fatalf("stranger with alice's password after 5 failures: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
		}
		if r := bob.login(t, "alice", passwords["alice"]); r.status != http.StatusTooManyRequests {
			t.Fatalf("alice's name from bob's browser: %d, want 429 (bob's cookie is not alice's)", r.status)
		}
		if r := alice.login(t, "alice", passwords["alice"]); r.status != http.StatusSeeOther {
			t.Fatalf("alice from her own browser on the same address: %d, want 303\n%s", r.status, r.body)
		}
		alice.post(t, "/console/logout", url.Values{"csrf": {alice.csrf(t)}})
		// Her cookie's own limit: five wrong passwords through it, then it
		// waits too.
		for i := range 5 {
			if r := alice.login(t, "alice", "guess"); r.status != http.StatusUnauthorized {
				t.Fatalf("failure %d through alice's cookie: %d", i+1, r.status)
			}
		}
		if r := alice.login(t, "alice", passwords["alice"]); r.status != http.StatusTooManyRequests {
			t.Fatalf("alice's cookie after 5 failures of its own: %d, want 429", r.status)
		}
	})
}
