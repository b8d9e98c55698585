// Package listen is the receiving end of paynotify's webhooks for the
// receiver's developer: an HTTP handler that verifies each delivery with
// the official Standard Webhooks library — what any receiver's own code
// would use — prints it, and optionally forwards it to the application
// being built. `paynotify listen` serves one; `paynotify dev` can start
// one in-process.
package listen

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// MaxBody is the largest delivery body the receiver reads; a larger one is
// refused (413). paynotify's payloads are a few hundred bytes.
const MaxBody = 1 << 20

// Tolerance is how far a delivery's webhook-timestamp may be from now:
// the official library's window, against replays.
const Tolerance = 5 * time.Minute

// Config is what a Receiver needs.
type Config struct {
	// Secret is the endpoint's signing secret, "whsec_" + base64.
	Secret string
	// Forward, if set, is the absolute http(s) URL each verified delivery
	// is sent on to, headers and body; the receiver answers its status.
	Forward string
	// Out receives one line per delivery ("verified <id> <type>" then the
	// body, or "refused <reason>"). Writes are serialised.
	Out io.Writer
	// Client forwards; nil is a client with a 30 s timeout that never
	// follows a redirect (the redirect's status is answered as it is).
	Client *http.Client
}

// Receiver verifies deliveries: an http.Handler.
type Receiver struct {
	wh      *standardwebhooks.Webhook
	forward string
	client  *http.Client

	mu  sync.Mutex // serialises writes to out: one delivery's lines stay together
	out io.Writer
}

// New checks cfg and returns its Receiver. Its errors never quote the
// secret.
func New(cfg Config) (*Receiver, error) {
	if err := CheckSecret(cfg.Secret); err != nil {
		return nil, err
	}
	wh, err := standardwebhooks.NewWebhook(cfg.Secret)
	if err != nil {
		return nil, errors.New("-secret: not a signing secret")
	}
	if cfg.Forward != "" {
		if err := checkForward(cfg.Forward); err != nil {
			return nil, err
		}
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{
			Timeout:       30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	return &Receiver{wh: wh, forward: cfg.Forward, client: client, out: out}, nil
}

// CheckSecret says what is wrong with a signing secret, without quoting
// it: it must be "whsec_" followed by standard base64 of at least one byte.
func CheckSecret(secret string) error {
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return errors.New("-secret must begin with whsec_ (the endpoint's signing secret, as creating or rotating it answered)")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return errors.New("-secret: what follows whsec_ is not standard base64")
	}
	if len(key) == 0 {
		return errors.New("-secret: no key after whsec_")
	}
	return nil
}

func checkForward(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-forward %q: want an absolute http:// or https:// URL, such as http://localhost:3000/webhooks", raw)
	}
	return nil
}

// ServeHTTP verifies one delivery: 401 and "refused <reason>" if it does
// not verify; otherwise "verified <webhook-id> <type>" and the body, then
// 204, or the forward URL's answer (502 if it cannot be reached).
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		rc.refuse(w, http.StatusMethodNotAllowed, "method "+req.Method+": a delivery is a POST")
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxBody+1))
	if err != nil {
		rc.refuse(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	if len(body) > MaxBody {
		rc.refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", MaxBody))
		return
	}
	if err := rc.wh.Verify(body, req.Header); err != nil {
		rc.refuse(w, http.StatusUnauthorized, reason(err, req.Header, time.Now()))
		return
	}
	id := req.Header.Get(standardwebhooks.HeaderWebhookID)
	rc.print("verified %s %s\n%s\n", id, eventType(body), bytes.TrimRight(body, "\n"))
	if rc.forward == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rc.forwardTo(w, req, id, body)
}

// forwardTo sends the verified delivery on, headers and body, and answers
// what the forward URL answered.
func (rc *Receiver) forwardTo(w http.ResponseWriter, req *http.Request, id string, body []byte) {
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, rc.forward, bytes.NewReader(body))
	if err != nil {
		rc.print("forward of %s failed: %v\n", id, err)
		http.Error(w, "forward failed", http.StatusBadGateway)
		return
	}
	for k, vs := range req.Header {
		if !hopByHop[http.CanonicalHeaderKey(k)] {
			out.Header[k] = append([]string(nil), vs...)
		}
	}
	resp, err := rc.client.Do(out)
	if err != nil {
		rc.print("forward of %s to %s failed: %v\n", id, rc.forward, err)
		http.Error(w, "forward failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	rc.print("forwarded %s to %s: %d\n", id, rc.forward, resp.StatusCode)
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// hopByHop are the headers of one connection, not of the delivery (RFC
// 9110 §7.6.1), and those the client sets itself.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Host": true, "Accept-Encoding": true,
}

func (rc *Receiver) refuse(w http.ResponseWriter, status int, why string) {
	rc.print("refused %s\n", why)
	http.Error(w, "refused "+why, status)
}

func (rc *Receiver) print(format string, args ...any) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	fmt.Fprintf(rc.out, format, args...)
}

// reason says in words why the library refused a delivery.
func reason(err error, h http.Header, now time.Time) string {
	switch {
	case errors.Is(err, standardwebhooks.ErrRequiredHeaders):
		var missing []string
		for _, k := range []string{standardwebhooks.HeaderWebhookID, standardwebhooks.HeaderWebhookTimestamp, standardwebhooks.HeaderWebhookSignature} {
			if h.Get(k) == "" {
				missing = append(missing, k)
			}
		}
		return "missing header " + strings.Join(missing, ", ") + ": not a Standard Webhooks delivery"
	case errors.Is(err, standardwebhooks.ErrInvalidHeaders):
		return fmt.Sprintf("webhook-timestamp %q is not Unix seconds", h.Get(standardwebhooks.HeaderWebhookTimestamp))
	case errors.Is(err, standardwebhooks.ErrMessageTooOld), errors.Is(err, standardwebhooks.ErrMessageTooNew):
		sec, _ := strconv.ParseInt(h.Get(standardwebhooks.HeaderWebhookTimestamp), 10, 64)
		off := now.Sub(time.Unix(sec, 0)).Round(time.Second)
		if off < 0 {
			return fmt.Sprintf("webhook-timestamp %s ahead of this clock (more than %s): check the clocks", -off, Tolerance)
		}
		return fmt.Sprintf("webhook-timestamp %s old (more than %s): a replay, or a clock off", off, Tolerance)
	case errors.Is(err, standardwebhooks.ErrNoMatchingSignature):
		if !strings.Contains(h.Get(standardwebhooks.HeaderWebhookSignature), "v1,") {
			return "webhook-signature has no v1 signature"
		}
		return fmt.Sprintf("no signature of webhook-id %s matches the secret: the body was changed, or it is signed with another secret", h.Get(standardwebhooks.HeaderWebhookID))
	}
	return err.Error()
}

// eventType is the payload's "type", or "-" if it has none.
func eventType(body []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &p) != nil || p.Type == "" {
		return "-"
	}
	return strings.Join(strings.Fields(p.Type), "_") // one word, whatever it holds
}

// Serve serves h on ln until ctx ends, then shuts down gracefully (5 s at
// most for deliveries in flight). It returns nil when ctx ended it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
