package main

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// browser is one browser against a running program: its own cookies, its
// connections from addr, and the X-Forwarded-For it sends (what a proxy
// in front would add, or what anyone can forge).
type browser struct {
	t    *testing.T
	base string
	xff  string
	http *http.Client
}

func newBrowser(t *testing.T, base, addr, xff string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	return &browser{t: t, base: base, xff: xff, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values) (int, http.Header, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.xff != "" {
		req.Header.Set("X-Forwarded-For", b.xff)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

var hiddenCSRF = regexp.MustCompile(`name="(login_csrf|csrf)" value="([0-9a-f]+)"`)

// login posts the sign-in form and answers its status and Retry-After.
func (b *browser) login(name, password string) (int, string) {
	b.t.Helper()
	_, _, page := b.do(http.MethodGet, "/console/login", nil)
	m := hiddenCSRF.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no login_csrf on the sign-in page:\n%s", page)
	}
	code, h, _ := b.do(http.MethodPost, "/console/login", url.Values{"login_csrf": {m[2]}, "operator": {name}, "password": {password}})
	return code, h.Get("Retry-After")
}

// logout signs out from the overview's form.
func (b *browser) logout() {
	b.t.Helper()
	_, _, page := b.do(http.MethodGet, "/console/", nil)
	m := hiddenCSRF.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no csrf on the overview:\n%s", page)
	}
	if code, _, _ := b.do(http.MethodPost, "/console/logout", url.Values{"csrf": {m[2]}}); code != http.StatusSeeOther {
		b.t.Fatalf("sign out: %d", code)
	}
}

// startWithOperators runs dev with operators alice and bob (password
// name+"-pw") and environ.
func startWithOperators(t *testing.T, environ ...string) (string, *syncBuffer) {
	t.Helper()
	var ops []string
	for _, name := range []string{"alice", "bob"} {
		h, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, name+":"+string(h))
	}
	return start(t, []string{"dev", "-db", filepath.Join(t.TempDir(), "dev.db")},
		append([]string{"CONSOLE_OPERATORS=" + strings.Join(ops, ","), "ALIPAY_JOBS_INTERVAL=1h"}, environ...))
}

// TestSignInLockout, issue 23's scenario from outside: five wrong tries at
// alice from one address (behind a proxy, everyone's) lock that address's
// strangers out of her name, and bob's browser too, but not her own
// browser; X-Forwarded-For counts for nothing without TRUSTED_PROXIES.
func TestSignInLockout(t *testing.T) {
	base, _ := startWithOperators(t)
	alice := newBrowser(t, base, "127.0.0.1", "")
	bob := newBrowser(t, base, "127.0.0.1", "")
	for name, b := range map[string]*browser{"alice": alice, "bob": bob} {
		if code, _ := b.login(name, name+"-pw"); code != http.StatusSeeOther {
			t.Fatalf("%s signs in: %d", name, code)
		}
		b.logout()
	}
	stranger := newBrowser(t, base, "127.0.0.1", "198.51.100.1")
	for i := range 5 {
		if code, _ := stranger.login("alice", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("stranger's failure %d: %d", i+1, code)
		}
	}
	if code, retry := stranger.login("alice", "alice-pw"); code != http.StatusTooManyRequests || retry == "" {
		t.Fatalf("alice's password without her cookie: %d, Retry-After %q; want 429", code, retry)
	}
	// Without TRUSTED_PROXIES a forged X-Forwarded-For is not another
	// client.
	forged := newBrowser(t, base, "127.0.0.1", "198.51.100.2")
	if code, _ := forged.login("alice", "alice-pw"); code != http.StatusTooManyRequests {
		t.Fatalf("another X-Forwarded-For, no TRUSTED_PROXIES: %d, want 429", code)
	}
	if code, _ := bob.login("alice", "alice-pw"); code != http.StatusTooManyRequests {
		t.Fatalf("alice's name from bob's browser: %d, want 429", code)
	}
	if code, _ := alice.login("alice", "alice-pw"); code != http.StatusSeeOther {
		t.Fatalf("alice from her own browser: %d, want 303", code)
	}
}

// TestTrustedProxies: with TRUSTED_PROXIES naming the proxy, two clients
// behind it (one connection address, different X-Forwarded-For) are
// limited apart and logged apart; a connection from an address not
// named cannot pick its client by X-Forwarded-For.
func TestTrustedProxies(t *testing.T) {
	base, logs := startWithOperators(t, "TRUSTED_PROXIES=127.0.0.1, 10.0.0.0/8")
	one := newBrowser(t, base, "127.0.0.1", "203.0.113.1")
	for i := range 5 {
		if code, _ := one.login("alice", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("client 203.0.113.1's failure %d: %d", i+1, code)
		}
	}
	if code, _ := one.login("alice", "alice-pw"); code != http.StatusTooManyRequests {
		t.Fatalf("client 203.0.113.1 after 5 failures: %d, want 429", code)
	}
	two := newBrowser(t, base, "127.0.0.1", "203.0.113.2")
	if code, _ := two.login("alice", "alice-pw"); code != http.StatusSeeOther {
		t.Fatalf("client 203.0.113.2 behind the same proxy: %d, want 303", code)
	}
	if !strings.Contains(logs.String(), "client=203.0.113.1") || !strings.Contains(logs.String(), "client=203.0.113.2") {
		t.Errorf("the access log does not name the clients behind the proxy:\n%s", logs)
	}
	// 127.0.0.2 is no proxy of ours: its X-Forwarded-For is ignored, so
	// five failures under varying headers are one client's.
	for i := range 5 {
		b := newBrowser(t, base, "127.0.0.2", "203.0.113."+string(rune('3'+i)))
		if code, _ := b.login("bob", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("untrusted 127.0.0.2, failure %d: %d", i+1, code)
		}
	}
	if code, _ := newBrowser(t, base, "127.0.0.2", "203.0.113.9").login("bob", "bob-pw"); code != http.StatusTooManyRequests {
		t.Fatalf("untrusted 127.0.0.2 with yet another X-Forwarded-For: %d, want 429", code)
	}
}
