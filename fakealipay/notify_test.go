package fakealipay_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/fakealipay"
)

// outcomes lists the outcome of each recorded notification.
func outcomes(e *env) []fakealipay.Outcome {
	var out []fakealipay.Outcome
	for _, n := range e.fake.Notifications() {
		out = append(out, n.Outcome)
	}
	return out
}

// equal reports whether two outcome lists are the same.
func equal(a, b []fakealipay.Outcome) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoseAndResend(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.LoseNotifications(true)
	e.paid(t, "ORD-1", "10.00")
	if got := len(e.recv.Forms()); got != 0 {
		t.Fatalf("a lost notification arrived %d times", got)
	}
	if tr, _ := e.fake.Trade("ORD-1"); tr.Paid.IsZero() {
		t.Fatal("losing the notification lost the payment")
	}

	// Alipay retries with the same notify_id.
	if err := e.fake.Resend(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	forms := e.recv.Forms()
	if len(forms) != 1 || forms[0].Get("notify_id") != e.fake.Notifications()[0].Form.Get("notify_id") {
		t.Fatalf("resent notification: %v", forms)
	}
	if got, want := outcomes(e), []fakealipay.Outcome{fakealipay.Lost, fakealipay.Acknowledged}; !equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
}

func TestDuplicateNotifications(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.DuplicateNotifications(3)
	e.paid(t, "ORD-1", "10.00")
	forms := e.recv.Forms()
	if len(forms) != 3 {
		t.Fatalf("received %d copies, want 3", len(forms))
	}
	for _, f := range forms[1:] {
		if f.Get("notify_id") != forms[0].Get("notify_id") || f.Get("sign") != forms[0].Get("sign") {
			t.Errorf("a duplicate differs: %v", f)
		}
	}
}

// TestHoldReordered: the refund's notification reaches the service before
// the payment's.
func TestHoldReordered(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.HoldNotifications(true)
	e.paid(t, "ORD-1", "10.00")
	rsp, err := e.sdk.TradeRefund(context.Background(), smartwalle.TradeRefund{OutTradeNo: "ORD-1", OutRequestNo: "R1", RefundAmount: "10.00"})
	if err != nil || !rsp.IsSuccess() {
		t.Fatalf("refund: %v %+v", err, rsp)
	}
	e.fake.WaitNotifications()
	if got := len(e.recv.Forms()); got != 0 {
		t.Fatalf("%d held notifications arrived", got)
	}
	e.fake.HoldNotifications(false)

	if err := e.fake.ReleaseHeldReversed(context.Background()); err != nil {
		t.Fatal(err)
	}
	forms := e.recv.Forms()
	if len(forms) != 2 || forms[0].Get("trade_status") != "TRADE_CLOSED" || forms[1].Get("trade_status") != "TRADE_SUCCESS" {
		t.Fatalf("released out of order: %v", forms)
	}
	// Held notifications settle in place.
	if got, want := outcomes(e), []fakealipay.Outcome{fakealipay.Acknowledged, fakealipay.Acknowledged}; !equal(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if err := e.fake.ReleaseHeld(context.Background()); err != nil {
		t.Errorf("releasing nothing: %v", err)
	}
}

func TestNotificationRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.recv.Answer("fail")
	e.paid(t, "ORD-1", "10.00")
	n := e.fake.Notifications()
	if len(n) != 1 || n[0].Outcome != fakealipay.Refused || n[0].Answer != "fail" {
		t.Fatalf("notifications: %+v", n)
	}
	if err := e.fake.Resend(context.Background(), 0); !errors.Is(err, fakealipay.ErrNotAcknowledged) {
		t.Fatalf("resend to a refusing service: %v, want ErrNotAcknowledged", err)
	}

	// "success" with anything around it is not "success" to Alipay.
	e.recv.Answer("success\n")
	if err := e.fake.Resend(context.Background(), 0); !errors.Is(err, fakealipay.ErrNotAcknowledged) {
		t.Fatalf("answer with a newline: %v, want ErrNotAcknowledged", err)
	}
	e.recv.Answer("success")
	if err := e.fake.Resend(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}

func TestNotificationUnreachable(t *testing.T) {
	e := newEnv(t, func(c *fakealipay.Config) { c.NotifyURL = "" })
	e.paid(t, "ORD-1", "10.00")
	if n := e.fake.Notifications(); len(n) != 1 || n[0].Outcome != fakealipay.Unreachable {
		t.Fatalf("notifications: %+v", n)
	}
}

// With a resend schedule, a notification not answered "success" is sent
// again on it, in the background, until it is (fake.Background, the
// runner fakewechatpay's resends share); without one, never.
func TestResendSchedule(t *testing.T) {
	var mu sync.Mutex
	refuse := 2
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if refuse > 0 {
			refuse--
			io.WriteString(w, "fail")
			return
		}
		io.WriteString(w, "success")
	}))
	t.Cleanup(svc.Close)
	e := newEnv(t, func(c *fakealipay.Config) {
		c.NotifyURL = svc.URL
		c.Resends = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}
	})
	e.paid(t, "ORD-RESEND", "10.00")
	e.fake.WaitNotifications()
	want := []fakealipay.Outcome{fakealipay.Refused, fakealipay.Refused, fakealipay.Acknowledged}
	if got := outcomes(e); !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v (resent until acknowledged, then not again)", got, want)
	}
}
