package listen_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"paynotify/webhook/listen"
)

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

// serve runs a Receiver of cfg on a loopback port until the test ends and
// returns its URL.
func serve(t *testing.T, cfg listen.Config) string {
	t.Helper()
	rc, err := listen.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- listen.Serve(ctx, ln, rc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func secret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// post sends body signed with sec by the official library.
func post(t *testing.T, url, sec, id, body string) (*http.Response, string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(sec)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(id, now, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "paynotify-test")
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// With Forward, a verified delivery reaches the application as it came —
// its headers (the signature too, so the application can verify it
// again) and body — and the sender gets the application's answer; a
// delivery that does not verify never reaches it.
func TestForward(t *testing.T) {
	type got struct {
		header http.Header
		body   string
	}
	seen := make(chan got, 10)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.Header.Clone(), string(b)}
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/elsewhere":
			t.Errorf("the receiver followed a redirect")
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, "queued")
		}
	}))
	defer app.Close()
	sec := secret(t)
	body := `{"type":"webhook.test","timestamp":"2026-12-02T07:00:00Z","data":{"endpoint_id":"ep1"}}`

	t.Run("Verified", func(t *testing.T) {
		out := &syncBuffer{}
		url := serve(t, listen.Config{Secret: sec, Forward: app.URL + "/hooks", Out: out})
		resp, answer := post(t, url, sec, "msg-1", body)
		if resp.StatusCode != http.StatusAccepted || answer != "queued" {
			t.Fatalf("answered %d %q, want the application's 202 queued", resp.StatusCode, answer)
		}
		g := <-seen
		if g.body != body {
			t.Errorf("application got body %q", g.body)
		}
		for _, k := range []string{"Content-Type", "User-Agent", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
			if g.header.Get(k) == "" {
				t.Errorf("application got no %s: %v", k, g.header)
			}
		}
		wh, _ := standardwebhooks.NewWebhook(sec)
		if err := wh.Verify([]byte(g.body), g.header); err != nil {
			t.Errorf("the forwarded delivery does not verify: %v", err)
		}
		want := "verified msg-1 webhook.test\n" + body + "\nforwarded msg-1 to " + app.URL + "/hooks: 202\n"
		if out.String() != want {
			t.Errorf("printed %q, want %q", out, want)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		url := serve(t, listen.Config{Secret: sec, Forward: app.URL + "/hooks", Out: io.Discard})
		resp, _ := post(t, url, secret(t), "msg-2", body)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("answered %d, want 401", resp.StatusCode)
		}
		select {
		case g := <-seen:
			t.Errorf("a refused delivery was forwarded: %q", g.body)
		default:
		}
	})
	t.Run("RedirectNotFollowed", func(t *testing.T) {
		url := serve(t, listen.Config{Secret: sec, Forward: app.URL + "/moved", Out: io.Discard})
		resp, _ := post(t, url, sec, "msg-3", body)
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("answered %d, want the application's 302", resp.StatusCode)
		}
		<-seen
	})
	t.Run("ApplicationDown", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		down := "http://" + ln.Addr().String() + "/hooks"
		ln.Close()
		out := &syncBuffer{}
		url := serve(t, listen.Config{Secret: sec, Forward: down, Out: out})
		resp, _ := post(t, url, sec, "msg-4", body)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("answered %d, want 502", resp.StatusCode)
		}
		if !strings.Contains(out.String(), "forward of msg-4 to "+down+" failed") {
			t.Errorf("printed %q", out)
		}
	})
}

// Only a POST is a delivery; a body past MaxBody is refused unread.
func TestRefusesWhatIsNoDelivery(t *testing.T) {
	out := &syncBuffer{}
	url := serve(t, listen.Config{Secret: secret(t), Out: out})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %d, want 405", resp.StatusCode)
	}
	resp, err = http.Post(url, "application/json", bytes.NewReader(make([]byte, listen.MaxBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a large body answered %d, want 413", resp.StatusCode)
	}
	if want := "refused method GET: a delivery is a POST\nrefused body over 1048576 bytes\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out, want)
	}
}
