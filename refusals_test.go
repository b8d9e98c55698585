package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"paynotify/alipay"
	"paynotify/fakewechatpay"
)

// rawAnswer is what the server answered a hand-written request.
type rawAnswer struct {
	status int
	header http.Header
	body   string
}

// exchange writes head (the request line and headers, without the blank
// line) and then body on a connection of its own, half-closing it after
// the body when halfClose is set and otherwise keeping it open, and reads
// the answer. The server may answer before the body is written: the
// write then fails, which is the server's right.
func exchange(t *testing.T, addr, head string, body func(io.Writer), halfClose bool) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server's own read deadline (10 s) ends a slow body first.
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	go func() {
		w := bufio.NewWriter(conn)
		fmt.Fprintf(w, "%s\r\nHost: %s\r\n\r\n", head, addr)
		body(w)
		if w.Flush() == nil && halfClose {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, resp.Header, string(b)}
}

// bodyOf is a body of n bytes of b.
func bodyOf(b []byte, n int) func(io.Writer) {
	return func(w io.Writer) {
		for n > 0 {
			k := min(n, len(b))
			if _, err := w.Write(b[:k]); err != nil {
				return
			}
			n -= k
		}
	}
}

// Bodies no notification has, sent to both notify paths of a real server
// (dev, with serve's timeouts): each is refused in its surface's own
// shape, never a panic, and its cause logged once. An over-cap body,
// signed or not, chunked or not, is 413; a body short of its
// Content-Length is 400 (Alipay: 200 "failure"); one that never ends is
// 408 once the server's read deadline passes.
func TestNotifyRefusesBadBodies(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	base, logs := start(t, []string{"dev", "-db", db}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	addr := strings.TrimPrefix(base, "http://")
	const big = 10 << 20

	// A signed 10 MB notification of each provider.
	wxBody := append([]byte(`{"id":"`), bytes.Repeat([]byte("x"), big)...)
	wxBody = append(wxBody, `"}`...)
	g, err := fakewechatpay.SignNotification(devKey("wechatpay_private_key.pem"), devWeChatPublicKeyID, time.Now(), wxBody)
	if err != nil {
		t.Fatal(err)
	}
	wxSigned := make(http.Header)
	g.Set(wxSigned)
	var wxHead strings.Builder
	for k := range wxSigned {
		fmt.Fprintf(&wxHead, "\r\n%s: %s", k, wxSigned.Get(k))
	}
	form, err := alipay.SignForm(devKey("alipay_private_key.pem"), url.Values{
		"app_id": {"2021000000000001"}, "notify_id": {"1"}, "out_trade_no": {"DEMO-1001"},
		"trade_status": {"TRADE_SUCCESS"}, "total_amount": {"0.01"}, "body": {strings.Repeat("x", big)},
	})
	if err != nil {
		t.Fatal(err)
	}
	aliSigned := []byte(form.Encode())

	surfaces := []struct {
		name, path, contentType string
		signedHead              string
		signed                  []byte
		// badBody is the status of a body that ends early: Alipay's
		// answer to a notification it could read no form from is 200
		// "failure", as to any other it refuses.
		badBody int
		// refused reports whether body is the surface's refusal.
		refused func(body string) bool
	}{
		{"WeChatPay", "/wechatpay/notify", "application/json", wxHead.String(), wxBody, http.StatusBadRequest,
			func(b string) bool { return strings.HasPrefix(b, `{"code":"FAIL","message":`) }},
		{"Alipay", "/alipay/notify", "application/x-www-form-urlencoded", "", aliSigned, http.StatusOK,
			func(b string) bool { return b == "failure" }},
	}
	junk := bytes.Repeat([]byte("x"), 32<<10)
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			post := "POST " + s.path + " HTTP/1.1\r\nContent-Type: " + s.contentType
			cases := []struct {
				name       string
				head       string
				body       func(io.Writer)
				halfClose  bool
				wantStatus int
			}{
				{"OverCap", post + fmt.Sprintf("\r\nContent-Length: %d", big), bodyOf(junk, big), false, http.StatusRequestEntityTooLarge},
				{"SignedOverCap", post + s.signedHead + fmt.Sprintf("\r\nContent-Length: %d", len(s.signed)), bodyOf(s.signed, len(s.signed)), false, http.StatusRequestEntityTooLarge},
				{"ChunkedOverCap", post + "\r\nTransfer-Encoding: chunked", func(w io.Writer) {
					for range big / len(junk) {
						if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", len(junk), junk); err != nil {
							return
						}
					}
					fmt.Fprint(w, "0\r\n\r\n")
				}, false, http.StatusRequestEntityTooLarge},
				{"ChunkedMalformed", post + "\r\nTransfer-Encoding: chunked", func(w io.Writer) { fmt.Fprint(w, "zz\r\nabc\r\n") }, true, s.badBody},
				{"ShortOfContentLength", post + "\r\nContent-Length: 1000", bodyOf([]byte("0123456789"), 10), true, s.badBody},
				{"SlowBody", post + "\r\nContent-Length: 1000", bodyOf([]byte("0123456789"), 10), false, http.StatusRequestTimeout},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					a := exchange(t, addr, c.head, c.body, c.halfClose)
					if a.status != c.wantStatus || !s.refused(a.body) {
						t.Errorf("answered %d %q, want %d and the surface's refusal", a.status, a.body, c.wantStatus)
					}
				})
			}
		})
	}
	t.Cleanup(func() {
		out := logs.String()
		if strings.Contains(out, "panic") {
			t.Errorf("a bad body panicked:\n%s", out)
		}
		// 2 surfaces × 6 cases, each refusal logged once with its cause.
		if n := strings.Count(out, `msg="notification refused"`); n != 12 {
			t.Errorf("%d refusals logged, want 12:\n%s", n, out)
		}
	})
}

// A wrong method is 405 with Allow on every surface of a real server
// (dev: both providers, the APIs and the console), and it and an unknown
// path are answered in the surface's own shape: the APIs' JSON error,
// WeChat Pay's {"code":"FAIL"}, Alipay's "failure", the console's page.
// Before, gin answered each 404 text/plain.
func TestSurfacesAnswerInTheirShape(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	base, _ := start(t, []string{"dev", "-db", db}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	apiErr := func(code string) func(string) bool {
		return func(body string) bool {
			var e struct {
				Error struct{ Code, Message string }
			}
			return json.Unmarshal([]byte(body), &e) == nil && e.Error.Code == code && e.Error.Message != ""
		}
	}
	wxFail := func(body string) bool {
		var e struct{ Code, Message string }
		return json.Unmarshal([]byte(body), &e) == nil && e.Code == "FAIL" && e.Message != ""
	}
	aliFail := func(body string) bool { return body == "failure" }
	page := func(words string) func(string) bool {
		return func(body string) bool { return strings.Contains(body, "<html") && strings.Contains(body, words) }
	}
	cases := []struct {
		method, path string
		status       int
		allow        string
		shape        func(string) bool
	}{
		{http.MethodDelete, "/api/v1/orders", 405, "POST", apiErr("method_not_allowed")},
		{http.MethodGet, "/api/v1/orders/X/cancel", 405, "POST", apiErr("method_not_allowed")},
		{http.MethodPut, "/admin/outbox", 405, "GET", apiErr("method_not_allowed")},
		{http.MethodDelete, "/admin/orders/X/refunds", 405, "GET, POST", apiErr("method_not_allowed")},
		{http.MethodGet, "/wechatpay/notify", 405, "POST", wxFail},
		{http.MethodGet, "/alipay/notify", 405, "POST", aliFail},
		{http.MethodDelete, "/console/login", 405, "GET, POST", page("does not take DELETE")},
		{http.MethodGet, "/api/v1/nope", 404, "", apiErr("not_found")},
		{http.MethodGet, "/admin/nope", 404, "", apiErr("not_found")},
		{http.MethodPost, "/wechatpay/nope", 404, "", wxFail},
		{http.MethodPost, "/alipay/nope", 404, "", aliFail},
		{http.MethodGet, "/console/nope", 404, "", page("No such page.")},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, base+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Allow's order is the router's.
		allow := strings.Split(resp.Header.Get("Allow"), ", ")
		slices.Sort(allow)
		if allow := strings.Join(allow, ", "); resp.StatusCode != c.status || allow != c.allow || !c.shape(string(b)) {
			t.Errorf("%s %s: %d Allow %q %s %q, want %d Allow %q in the surface's shape",
				c.method, c.path, resp.StatusCode, allow, resp.Header.Get("Content-Type"), b, c.status, c.allow)
		}
	}
}
