package fake

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Faults are taken in the order queued, each for as many calls as it was
// queued for, per call name; every call is counted, faulty or not.
func TestFaults(t *testing.T) {
	var q Faults[string]
	q.Add("refund", "fail", 2)
	q.Add("refund", "drop", 1)
	q.Add("query", "late", 1)
	q.Add("refund", "never", 0)
	var got []string
	for range 5 {
		got = append(got, q.Arrive("refund"))
	}
	want := []string{"fail", "fail", "drop", "", ""}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("refund faults %q, want %q", got, want)
		}
	}
	if f := q.Arrive("query"); f != "late" {
		t.Fatalf("query fault %q, want late", f)
	}
	if q.Calls("refund") != 5 || q.Calls("query") != 1 || q.Calls("close") != 0 {
		t.Fatalf("calls refund %d, query %d, close %d", q.Calls("refund"), q.Calls("query"), q.Calls("close"))
	}
}

// A resend stops at the first acknowledged send, or when the schedule
// ends; Wait returns once every send has settled.
func TestResend(t *testing.T) {
	b := NewBackground()
	defer b.Close()
	var acked, unacked atomic.Int32
	b.Resend([]time.Duration{0, 0, 0, 0}, func(context.Context) bool { return acked.Add(1) == 2 })
	b.Resend([]time.Duration{0, 0, 0}, func(context.Context) bool { unacked.Add(1); return false })
	b.Resend(nil, func(context.Context) bool { t.Error("sent with no schedule"); return true })
	b.Wait()
	if acked.Load() != 2 || unacked.Load() != 3 {
		t.Fatalf("sends: %d until acknowledged (want 2), %d unacknowledged (want 3, the schedule)", acked.Load(), unacked.Load())
	}
}

// Close ends what waits in the background: a resend an hour away is
// never sent, and Close returns.
func TestCloseEndsResends(t *testing.T) {
	b := NewBackground()
	var sent atomic.Bool
	b.Resend([]time.Duration{time.Hour}, func(context.Context) bool { sent.Store(true); return true })
	b.Close()
	if sent.Load() {
		t.Fatal("a resend an hour away was sent on Close")
	}
}
