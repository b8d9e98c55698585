package fakewechatpay

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"paynotify/model"
	"paynotify/wechatpay"
)

// ErrNotAcknowledged: the service did not answer a notification with a
// 2xx (or could not be reached), so WeChat Pay sends it again.
var ErrNotAcknowledged = errors.New("fakewechatpay: notification not acknowledged")

// Outcome is what became of one notification attempt.
type Outcome string

// Outcomes of a notification attempt.
const (
	// Acknowledged: the service answered 2xx.
	Acknowledged Outcome = "acknowledged"
	// Refused: the service answered 4xx or 5xx (see Status, Answer).
	Refused Outcome = "refused"
	// Unreachable: no answer (see Answer).
	Unreachable Outcome = "unreachable"
	// Lost: dropped on the way, by LoseNotifications.
	Lost Outcome = "lost"
	// Held: waiting for ReleaseHeld, by HoldNotifications.
	Held Outcome = "held"
	// Sending: a held notification being released.
	Sending Outcome = "sending"
)

// Notification is one notification attempt.
type Notification struct {
	URL string
	// ID and EventType are the notification's (a resend keeps its id).
	ID, EventType string
	// Header holds the Wechatpay-* headers, Body the JSON as posted.
	Header http.Header
	Body   []byte
	// Resource is the decrypted resource.
	Resource []byte
	// Attempt is 1 for the first delivery, 2… for resends.
	Attempt int
	Outcome Outcome
	// Status is the HTTP status answered (0 if none); Answer the body,
	// or why there was none.
	Status int
	Answer string
}

// Notifications returns every notification attempt in order.
func (s *Server) Notifications() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Notification, len(s.notes))
	copy(out, s.notes)
	return out
}

// LoseNotifications makes every following notification vanish (Outcome
// Lost, no resends) while on is true.
func (s *Server) LoseNotifications(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = on
}

// DuplicateNotifications makes every following notification arrive n
// times; 1 or less restores single delivery.
func (s *Server) DuplicateNotifications(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.copies = n
}

// HoldNotifications keeps every following notification back (Outcome
// Held) while on is true, until ReleaseHeld.
func (s *Server) HoldNotifications(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = on
}

// ReleaseHeld sends the held notifications in the order they were held,
// each once (no resends). The error joins every one not acknowledged.
func (s *Server) ReleaseHeld(ctx context.Context) error {
	s.mu.Lock()
	var held []int
	for i, n := range s.notes {
		if n.Outcome == Held {
			s.notes[i].Outcome = Sending
			held = append(held, i)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, i := range held {
		s.mu.Lock()
		n := s.notes[i]
		s.mu.Unlock()
		n = s.send(ctx, n)
		s.mu.Lock()
		s.notes[i] = n
		s.mu.Unlock()
		errs = append(errs, acknowledged(n))
	}
	return errors.Join(errs...)
}

// Resend posts notification i (an index into Notifications) again, as a
// WeChat Pay resend: same id and body, signed afresh (a resend's
// timestamp is new). It is recorded at the end.
func (s *Server) Resend(ctx context.Context, i int) error {
	s.mu.Lock()
	if i < 0 || i >= len(s.notes) {
		s.mu.Unlock()
		return fmt.Errorf("fakewechatpay: no notification %d", i)
	}
	n := s.notes[i]
	s.mu.Unlock()
	n.Attempt++
	return acknowledged(s.deliver(ctx, n))
}

// SendProbe sends a signature probe to url, as WeChat Pay does to check a
// merchant refuses bad signatures: a notification whose
// Wechatpay-Signature starts WECHATPAY/SIGNTEST/. A service that
// acknowledges it has failed; the error is nil only if it was refused.
func (s *Server) SendProbe(ctx context.Context, url string) (Notification, error) {
	n, err := s.build(url, wechatpay.EventTransactionSuccess, "支付成功", "transaction", map[string]string{"probe": "true"})
	if err != nil {
		return Notification{}, err
	}
	n.Header.Set(wechatpay.HeaderSignature, wechatpay.ProbePrefix+nonce(64))
	n = s.deliver(ctx, n)
	if n.Outcome != Refused {
		return n, fmt.Errorf("fakewechatpay: signature probe %s, want refused", n.Outcome)
	}
	return n, nil
}

// WaitNotifications waits until every notification sent in the
// background (refunds', resends) has settled.
func (s *Server) WaitNotifications() { s.bg.Wait() }

// envelope is a notification's body.
type envelope struct {
	ID           string   `json:"id"`
	CreateTime   string   `json:"create_time"`
	ResourceType string   `json:"resource_type"`
	EventType    string   `json:"event_type"`
	Summary      string   `json:"summary"`
	Resource     resource `json:"resource"`
}

// resource is an encrypted resource.
type resource struct {
	OriginalType   string `json:"original_type"`
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

// build makes a notification: the resource encrypted, the body signed
// when sent.
func (s *Server) build(url, event, summary, originalType string, res any) (Notification, error) {
	plain, err := json.Marshal(res)
	if err != nil {
		return Notification{}, err
	}
	b := Body{
		ID: uuid.NewString(), CreateTime: s.now(), EventType: event, Summary: summary,
		OriginalType: originalType, Nonce: nonce(12), Resource: plain,
	}
	body, err := b.seal(s.aead)
	if err != nil {
		return Notification{}, err
	}
	n := Notification{URL: url, ID: b.ID, EventType: event, Header: make(http.Header), Body: body, Resource: plain, Attempt: 1}
	n.Header.Set("Content-Type", "application/json")
	return n, nil
}

// Body is what a notification's body says before it is sealed.
type Body struct {
	ID, EventType, Summary string
	CreateTime             time.Time
	// OriginalType is "transaction" or "refund": the resource's
	// original_type and its associated_data.
	OriginalType string
	// Nonce is the resource's 12-character nonce.
	Nonce string
	// Resource is the plaintext JSON.
	Resource []byte
}

// Seal encrypts the resource with apiV3Key (AEAD_AES_256_GCM) and returns
// the body as WeChat Pay posts it. The same Body seals to the same bytes,
// so testdata can be regenerated and compared.
func (b Body) Seal(apiV3Key string) ([]byte, error) {
	block, err := aes.NewCipher([]byte(apiV3Key))
	if err != nil {
		return nil, fmt.Errorf("fakewechatpay: APIv3 key: %w", err)
	}
	aead, _ := cipher.NewGCM(block)
	return b.seal(aead)
}

// seal is Seal with the cipher made.
func (b Body) seal(aead cipher.AEAD) ([]byte, error) {
	if len(b.Nonce) != aead.NonceSize() {
		return nil, fmt.Errorf("fakewechatpay: nonce of %d bytes, want %d", len(b.Nonce), aead.NonceSize())
	}
	ct := aead.Seal(nil, []byte(b.Nonce), b.Resource, []byte(b.OriginalType))
	return json.Marshal(envelope{
		ID: b.ID, CreateTime: b.CreateTime.In(model.Beijing).Format(time.RFC3339),
		ResourceType: "encrypt-resource", EventType: b.EventType, Summary: b.Summary,
		Resource: resource{
			OriginalType: b.OriginalType, Algorithm: "AEAD_AES_256_GCM",
			Ciphertext: base64.StdEncoding.EncodeToString(ct), AssociatedData: b.OriginalType, Nonce: b.Nonce,
		},
	})
}

// notify builds and sends a notification, subject to the notification
// faults; the first delivery is made before it returns, resends go on in
// the background.
func (s *Server) notify(ctx context.Context, url, event, summary, originalType string, res any) error {
	n, err := s.build(url, event, summary, originalType, res)
	if err != nil {
		return err
	}
	s.mu.Lock()
	lose, hold, copies := s.lose, s.hold, max(s.copies, 1)
	s.mu.Unlock()
	switch {
	case lose:
		n.Outcome = Lost
		s.record(n)
		return nil
	case hold:
		n.Outcome = Held
		s.record(n)
		return nil
	}
	var first Notification
	for i := range copies {
		d := s.deliver(ctx, n)
		if i == 0 {
			first = d
		}
	}
	if first.Outcome != Acknowledged {
		s.resendLater(n)
	}
	return acknowledged(first)
}

// notifyLater sends a notification in the background.
func (s *Server) notifyLater(url, event, summary, originalType string, res any) {
	s.bg.Go(func(ctx context.Context) {
		s.notify(ctx, url, event, summary, originalType, res)
	})
}

// resendLater resends n on the schedule until a 2xx, in the background.
func (s *Server) resendLater(n Notification) {
	s.bg.Resend(s.resends, func(ctx context.Context) bool {
		n.Attempt++
		return s.deliver(ctx, n).Outcome == Acknowledged
	})
}

// deliver sends n and records the attempt.
func (s *Server) deliver(ctx context.Context, n Notification) Notification {
	n = s.send(ctx, n)
	s.record(n)
	return n
}

// send signs n afresh (a probe keeps its signature) and posts it.
func (s *Server) send(ctx context.Context, n Notification) Notification {
	h := n.Header.Clone()
	g := s.sign(n.Body)
	if sig := h.Get(wechatpay.HeaderSignature); strings.HasPrefix(sig, wechatpay.ProbePrefix) {
		g.Signature = sig
	}
	g.Set(h)
	n.Header = h
	n.Outcome, n.Status, n.Answer = s.post(ctx, n.URL, h, n.Body)
	return n
}

// record appends a notification attempt.
func (s *Server) record(n Notification) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, n)
}

// post sends a notification as WeChat Pay does: a JSON POST, acknowledged
// by any 2xx status whatever the body.
func (s *Server) post(ctx context.Context, url string, h http.Header, body []byte) (Outcome, int, string) {
	if url == "" {
		return Unreachable, 0, "no notify_url"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Unreachable, 0, err.Error()
	}
	req.Header = h.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		return Unreachable, 0, err.Error()
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Refused, resp.StatusCode, string(answer)
	}
	return Acknowledged, resp.StatusCode, string(answer)
}

// acknowledged is nil for an acknowledged notification.
func acknowledged(n Notification) error {
	if n.Outcome == Acknowledged {
		return nil
	}
	return fmt.Errorf("%w: %s %s to %s: %s %d %q", ErrNotAcknowledged, n.EventType, n.ID, n.URL, n.Outcome, n.Status, n.Answer)
}
