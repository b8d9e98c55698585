package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// newSecret is a signing secret as paynotify makes one: whsec_ + base64
// of 32 random bytes.
func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// signWith signs (id, at, body) with each secret by the official library
// and returns the delivery's headers, the signatures space-separated as
// during a rotation.
func signWith(t *testing.T, id string, at time.Time, body string, secrets ...string) http.Header {
	t.Helper()
	var sigs []string
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, at, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		sigs = append(sigs, sig)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, fmt.Sprint(at.Unix()))
	h.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " "))
	return h
}

func deliver(t *testing.T, url string, h http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// paynotify listen verifies each delivery with the official library:
// signed ones are printed and answered 2xx, anything else refused 401
// with its reason, and printed as such.
func TestListenVerifiesDeliveries(t *testing.T) {
	secret, old, other := newSecret(t), newSecret(t), newSecret(t)
	base, out := start(t, []string{"listen", "-secret", secret, "-addr", "127.0.0.1:0"}, nil)
	if !strings.Contains(out.String(), "listening on "+base) {
		t.Fatalf("no listening line:\n%s", out)
	}
	body := `{"type":"order.paid","timestamp":"2026-12-02T07:00:00.123Z","data":{"order_id":7,"order_sn":"DEMO-1001","provider":"alipay","amount":"20.00","sequence":2}}`
	now := time.Now()
	cases := []struct {
		name       string
		id         string
		header     http.Header
		body       string
		wantStatus int
		wantLine   string
	}{
		{name: "Signed", id: "evt-signed", header: signWith(t, "evt-signed", now, body, secret), body: body,
			wantStatus: http.StatusNoContent, wantLine: "verified evt-signed order.paid\n" + body + "\n"},
		{name: "TwoSignaturesDuringRotation", id: "evt-rotated", header: signWith(t, "evt-rotated", now, body, old, secret), body: body,
			wantStatus: http.StatusNoContent, wantLine: "verified evt-rotated order.paid\n" + body + "\n"},
		{name: "TamperedBody", id: "evt-tampered", header: signWith(t, "evt-tampered", now, body, secret), body: strings.Replace(body, "20.00", "2000.00", 1),
			wantStatus: http.StatusUnauthorized, wantLine: "refused no signature of webhook-id evt-tampered matches the secret"},
		{name: "WrongSecret", id: "evt-other", header: signWith(t, "evt-other", now, body, other), body: body,
			wantStatus: http.StatusUnauthorized, wantLine: "refused no signature of webhook-id evt-other matches the secret"},
		{name: "StaleTimestamp", id: "evt-stale", header: signWith(t, "evt-stale", now.Add(-10*time.Minute), body, secret), body: body,
			wantStatus: http.StatusUnauthorized, wantLine: "refused webhook-timestamp 10m"},
		{name: "NoHeaders", header: http.Header{}, body: body,
			wantStatus: http.StatusUnauthorized, wantLine: "refused missing header webhook-id, webhook-timestamp, webhook-signature"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, answer := deliver(t, base, c.header, c.body)
			if status != c.wantStatus {
				t.Errorf("answered %d %q, want %d", status, answer, c.wantStatus)
			}
			if !strings.Contains(out.String(), c.wantLine) {
				t.Errorf("printed:\n%s\nwant %q", out, c.wantLine)
			}
			if c.wantStatus == http.StatusUnauthorized && !strings.HasPrefix(answer, "refused ") {
				t.Errorf("401 answer %q does not say why", answer)
			}
		})
	}
	if strings.Contains(out.String(), "verified evt-tampered") || strings.Contains(out.String(), "verified evt-other") || strings.Contains(out.String(), "verified evt-stale") {
		t.Errorf("a delivery that does not verify was printed as verified:\n%s", out)
	}
	if strings.Contains(out.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Errorf("the secret was printed:\n%s", out)
	}
}

// listen's command line: what is wrong is said, exit 2, nothing served,
// and the secret is never echoed.
func TestListenUsageErrors(t *testing.T) {
	good := newSecret(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{name: "NoSecret", args: nil, want: "-secret is required"},
		{name: "NoPrefix", args: []string{"-secret", "c2VjcmV0c2VjcmV0c2VjcmV0"}, want: "-secret must begin with whsec_"},
		{name: "NotBase64", args: []string{"-secret", "whsec_not*base64!"}, want: "-secret: what follows whsec_ is not standard base64"},
		{name: "EmptyKey", args: []string{"-secret", "whsec_"}, want: "-secret: no key after whsec_"},
		{name: "ForwardNotAURL", args: []string{"-secret", good, "-forward", "localhost:3000/hooks"}, want: `-forward "localhost:3000/hooks": want an absolute http:// or https:// URL`},
		{name: "ForwardNoHost", args: []string{"-secret", good, "-forward", "http:///hooks"}, want: `-forward "http:///hooks": want an absolute`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err, stdout, stderr, _ := runCommand(t, append([]string{"listen"}, c.args...)...)
			if code := exitCode(err, &bytes.Buffer{}); code != 2 {
				t.Fatalf("err %v, exit %d, want 2\n%s", err, code, stderr)
			}
			if !strings.Contains(stderr, "paynotify listen: "+c.want) || !strings.Contains(stderr, "usage: paynotify listen") {
				t.Errorf("stderr does not say %q and show the usage:\n%s", c.want, stderr)
			}
			if stdout != "" {
				t.Errorf("printed on stdout:\n%s", stdout)
			}
			for _, a := range c.args {
				if strings.HasPrefix(a, "whsec_") && len(a) > 10 && strings.Contains(stderr, a) {
					t.Errorf("stderr quotes the secret:\n%s", stderr)
				}
			}
		})
	}
	t.Run("BusyAddress", func(t *testing.T) {
		base, _ := start(t, []string{"listen", "-secret", good, "-addr", "127.0.0.1:0"}, nil)
		err, _, _, _ := runCommand(t, "listen", "-secret", good, "-addr", strings.TrimPrefix(base, "http://"))
		if err == nil || !strings.Contains(err.Error(), "address already in use") || exitCode(err, &bytes.Buffer{}) != 1 {
			t.Errorf("second listen on %s: %v, want address already in use, exit 1", base, err)
		}
	})
}
