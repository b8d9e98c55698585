package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"paynotify/internal/netguard"
	"paynotify/model"
)

// Sender posts deliveries: through netguard's dialer (every connection's
// address checked after DNS), never following a redirect, each request
// bounded by a timeout.
type Sender struct {
	client    *http.Client
	userAgent string
	now       func() time.Time
}

// NewSender returns a sender dialling under p, each request given timeout
// to answer (WEBHOOK_TIMEOUT).
func NewSender(p netguard.Policy, timeout time.Duration) *Sender {
	c := netguard.Client(p, timeout)
	t := c.Transport.(*http.Transport)
	// Keep-alive for every endpoint's slots: no total bound (the default
	// 100 would close one endpoint's idle connections for another's past
	// 25 endpoints), at most 16 per endpoint (WEBHOOK_CONCURRENCY's 4 and
	// then some).
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 16
	t.ResponseHeaderTimeout = timeout
	// A redirect is an answer that is not a 2xx: it is logged and retried,
	// never followed (the Location could name anything).
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Sender{client: c, userAgent: UserAgent(), now: time.Now}
}

// Result is what one attempt came to.
type Result struct {
	At       time.Time
	Duration time.Duration
	Status   int    // 0: no answer
	Body     string // the first KiB of the answer, as valid UTF-8
	Err      error  // why it did not deliver (nil for a 2xx)
	Kind     model.AttemptResult
	// Abandoned: the caller's context ended (shutdown) — not the
	// endpoint's doing, nothing to record.
	Abandoned bool
}

// answerKept is how much of an answer's body an attempt keeps.
const answerKept = 1024

// answerDrained is how much more of it is read to keep the connection.
const answerDrained = 64 << 10

// Send posts body to url as delivery id, signed with every secret.
func (s *Sender) Send(ctx context.Context, url, id string, secrets []string, body []byte) Result {
	start := s.now()
	r := Result{At: start}
	done := func(r Result) Result {
		r.Duration = s.now().Sub(start)
		if r.Err == nil && r.Kind == "" {
			r.Kind = model.AttemptDelivered
		}
		return r
	}
	sig, err := Sign(secrets, id, start, body)
	if err != nil {
		r.Err, r.Kind = err, model.AttemptError
		return done(r)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		r.Err, r.Kind = err, model.AttemptError
		return done(r)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(start.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	resp, err := s.client.Do(req)
	if err != nil {
		r.Err, r.Kind = err, classify(err)
		r.Abandoned = ctx.Err() != nil
		return done(r)
	}
	defer resp.Body.Close()
	r.Status = resp.StatusCode
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, answerKept))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, answerDrained))
	r.Body = strings.ToValidUTF8(string(kept), string(utf8.RuneError))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
	case resp.StatusCode == http.StatusGone:
		r.Err, r.Kind = errors.New("410 Gone: the endpoint asked to be disabled"), model.AttemptGone
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		r.Err, r.Kind = fmt.Errorf("answered %d (a redirect, not followed: register the URL it names)", resp.StatusCode), model.AttemptStatus
	default:
		r.Err, r.Kind = fmt.Errorf("answered %d, not a 2xx", resp.StatusCode), model.AttemptStatus
	}
	return done(r)
}

// classify tells a timeout from any other failure to get an answer.
func classify(err error) model.AttemptResult {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return model.AttemptTimeout
	}
	return model.AttemptError
}
