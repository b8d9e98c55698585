package service

import (
	"testing"
	"time"

	"paynotify/model"
)

// A lane claims one a slot until it knows how fast its endpoint answers,
// then what its slots send in a quarter of a lease, at most the claim's
// bound; a hanging endpoint gets one a slot.
func TestLaneClaimsAhead(t *testing.T) {
	const slots, maxClaim, lease = 4, 256, 40 * time.Second
	for _, c := range []struct {
		name string
		took time.Duration
		want int
	}{
		{"Unknown", 0, 4},
		{"Fast", 2 * time.Millisecond, 256},
		{"Middling", time.Second, 40},
		{"Hanging", 15 * time.Second, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &lane{took: c.took}
			if got := l.want(slots, maxClaim, lease); got != c.want {
				t.Errorf("want = %d, want %d", got, c.want)
			}
		})
	}
	// A queue that still feeds its slots claims nothing more; one run low
	// is topped up to its target.
	l := &lane{took: 2 * time.Millisecond, queue: make([]queued, 100)}
	if got := l.want(slots, maxClaim, lease); got != 0 {
		t.Errorf("a queue of 100: want = %d, want 0", got)
	}
	l.queue = l.queue[:10]
	if got := l.want(slots, maxClaim, lease); got != 246 {
		t.Errorf("a queue of 10: want = %d, want 246", got)
	}
}

// A delivery claimed longer than the window ago is let go unsent: its
// lease may end before its request would.
func TestLanePopLetsGoStaleClaims(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	l := &lane{queue: []queued{
		{dl: model.WebhookDelivery{ID: 1}, claimed: now.Add(-30 * time.Second)},
		{dl: model.WebhookDelivery{ID: 2}, claimed: now.Add(-20 * time.Second)},
		{dl: model.WebhookDelivery{ID: 3}, claimed: now.Add(-time.Second)},
	}}
	q, ok := l.pop(now, 20*time.Second)
	if !ok || q.dl.ID != 3 {
		t.Fatalf("pop = %d, %v; want 3 (1 and 2 let go)", q.dl.ID, ok)
	}
	if _, ok := l.pop(now, 20*time.Second); ok || len(l.queue) != 0 {
		t.Errorf("pop of an empty queue = %v, %d left", ok, len(l.queue))
	}
}
