package fakealipay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"paynotify/alipay"
)

// ErrNotAcknowledged: the service did not answer a notification with
// "success" (or could not be reached), so Alipay would send it again.
var ErrNotAcknowledged = errors.New("fakealipay: notification not acknowledged")

// Outcome is what became of one notification.
type Outcome string

// Outcomes of a notification.
const (
	// Acknowledged: the service answered exactly "success".
	Acknowledged Outcome = "acknowledged"
	// Refused: the service answered something else (see Answer).
	Refused Outcome = "refused"
	// Unreachable: no answer (see Answer), or the trade has no notify_url.
	Unreachable Outcome = "unreachable"
	// Lost: dropped on the way, by LoseNotifications.
	Lost Outcome = "lost"
	// Held: waiting for ReleaseHeld, by HoldNotifications.
	Held Outcome = "held"
	// Sending: a held notification being released.
	Sending Outcome = "sending"
)

// Notification is one notification the fake sent or meant to send.
type Notification struct {
	URL     string
	Form    url.Values // as signed and posted
	Outcome Outcome
	// Answer is the service's answer, or why there was none.
	Answer string
}

// Notifications returns every notification attempt in order: each
// duplicate and each Resend is an entry of its own; a held notification
// keeps its place and takes its outcome when released.
func (s *Server) Notifications() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Notification, len(s.notes))
	for i, n := range s.notes {
		n.Form = cloneForm(n.Form)
		out[i] = n
	}
	return out
}

// LoseNotifications makes every following notification vanish on the way
// (Outcome Lost) while on is true.
func (s *Server) LoseNotifications(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = on
}

// DuplicateNotifications makes every following notification arrive n times;
// n of 1 or less restores single delivery.
func (s *Server) DuplicateNotifications(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.copies = n
}

// HoldNotifications keeps every following notification back (Outcome Held)
// while on is true, until ReleaseHeld or ReleaseHeldReversed: delayed
// notifications, and reordered ones.
func (s *Server) HoldNotifications(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
}

// ReleaseHeld sends the held notifications in the order they were held.
// The error joins every one not acknowledged.
func (s *Server) ReleaseHeld(ctx context.Context) error { return s.release(ctx, false) }

// ReleaseHeldReversed sends the held notifications newest first: the
// service sees them out of order.
func (s *Server) ReleaseHeldReversed(ctx context.Context) error { return s.release(ctx, true) }

// release sends the held notifications, each settling in place.
func (s *Server) release(ctx context.Context, reversed bool) error {
	s.mu.Lock()
	var held []int
	for i, n := range s.notes {
		if n.Outcome == Held {
			s.notes[i].Outcome = Sending
			held = append(held, i)
		}
	}
	s.mu.Unlock()
	if reversed {
		slices.Reverse(held)
	}
	var errs []error
	for _, i := range held {
		s.mu.Lock()
		n := s.notes[i]
		s.mu.Unlock()
		n.Outcome, n.Answer = s.post(ctx, n.URL, n.Form)
		s.mu.Lock()
		s.notes[i] = n
		s.mu.Unlock()
		errs = append(errs, acknowledged(n))
	}
	return errors.Join(errs...)
}

// Resend posts notification i (an index into Notifications) again, as
// Alipay retries: same notify_id, same signature. It is a new attempt,
// recorded at the end, and ignores LoseNotifications and HoldNotifications.
func (s *Server) Resend(ctx context.Context, i int) error {
	s.mu.Lock()
	if i < 0 || i >= len(s.notes) {
		s.mu.Unlock()
		return fmt.Errorf("fakealipay: no notification %d", i)
	}
	n := s.notes[i]
	s.mu.Unlock()
	return acknowledged(s.deliver(ctx, n.URL, n.Form))
}

// WaitNotifications waits until every notification sent in the background
// (those of refunds, sent after the call is answered, and resends) has
// settled.
func (s *Server) WaitNotifications() { s.bg.Wait() }

// notifyLater sends a notification in the background, as Alipay does
// after answering a call: a service that handles the notification while
// still inside the call must not deadlock the fake.
func (s *Server) notifyLater(to string, form url.Values) {
	s.bg.Go(func(ctx context.Context) { s.notify(ctx, to, form) })
}

// notify signs form and sends it to the trade's notify_url, subject to the
// notification faults.
func (s *Server) notify(ctx context.Context, to string, form url.Values) {
	signed, err := alipay.SignForm(s.cfg.PrivateKey, form)
	if err != nil {
		// New checked the key; a form with a repeated key is a bug here.
		s.record(Notification{URL: to, Form: form, Outcome: Unreachable, Answer: "sign: " + err.Error()})
		return
	}
	s.mu.Lock()
	lose, hold, copies := s.lose, s.hold, max(s.copies, 1)
	s.mu.Unlock()
	switch {
	case lose:
		s.record(Notification{URL: to, Form: signed, Outcome: Lost})
	case hold:
		s.record(Notification{URL: to, Form: signed, Outcome: Held})
	default:
		acked := false
		for range copies {
			acked = s.deliver(ctx, to, signed).Outcome == Acknowledged || acked
		}
		if !acked {
			s.bg.Resend(s.cfg.Resends, func(ctx context.Context) bool {
				return s.deliver(ctx, to, signed).Outcome == Acknowledged
			})
		}
	}
}

// deliver posts one notification and records the attempt.
func (s *Server) deliver(ctx context.Context, to string, form url.Values) Notification {
	n := Notification{URL: to, Form: form}
	n.Outcome, n.Answer = s.post(ctx, to, form)
	s.record(n)
	return n
}

// record appends a notification attempt.
func (s *Server) record(n Notification) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, n)
}

// post sends form as Alipay does: a form-encoded POST, acknowledged only
// by a body of exactly "success".
func (s *Server) post(ctx context.Context, to string, form url.Values) (Outcome, string) {
	if to == "" {
		return Unreachable, "no notify_url"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, strings.NewReader(form.Encode()))
	if err != nil {
		return Unreachable, err.Error()
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	resp, err := s.client.Do(req)
	if err != nil {
		return Unreachable, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if err != nil {
		return Unreachable, err.Error()
	}
	// Alipay wants the seven characters and nothing else, whatever the
	// HTTP status.
	if string(body) != "success" {
		return Refused, string(body)
	}
	return Acknowledged, string(body)
}

// acknowledged is nil for an acknowledged notification.
func acknowledged(n Notification) error {
	if n.Outcome == Acknowledged {
		return nil
	}
	return fmt.Errorf("%w: %s to %s: %s %q", ErrNotAcknowledged, n.Form.Get("notify_id"), n.URL, n.Outcome, n.Answer)
}

// cloneForm copies a form deeply.
func cloneForm(f url.Values) url.Values {
	c := make(url.Values, len(f))
	for k, vs := range f {
		c[k] = slices.Clone(vs)
	}
	return c
}
