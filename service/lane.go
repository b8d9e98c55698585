package service

import (
	"time"

	"paynotify/model"
)

// lane is one endpoint's side of a deliverer: the deliveries claimed for
// it and not yet started, its requests in flight, and how long its
// answers take. A Deliverer's mutex guards it.
type lane struct {
	url     string
	secrets []string
	queue   []queued
	// inflight is how many of its requests are running.
	inflight int
	// took is a moving average of its attempts' durations (0: none yet).
	took time.Duration
	// gen counts the times the queue was dropped (Deliverer.Forget): a
	// claim made before a drop is not queued after it.
	gen int
}

// queued is a claimed delivery waiting for a slot.
type queued struct {
	dl      model.WebhookDelivery
	claimed time.Time
}

// maxPerSlot bounds how far a claim runs ahead of one slot.
const maxPerSlot = 64

// target is how many deliveries l's queue is filled to: what its slots
// are likely to send in a quarter of a lease (one a slot while that is
// unknown, or for an endpoint as slow as the lease allows), at most
// maxClaim.
func (l *lane) target(slots, maxClaim int, lease time.Duration) int {
	perSlot := 1
	if l.took > 0 {
		perSlot = int(min(max(lease/4/l.took, 1), maxPerSlot))
	}
	return max(min(slots*perSlot, maxClaim), 1)
}

// low says l's queue is running low: it feeds fewer than every slot, or
// less than a quarter of its target, so a claim should top it up before
// the slots run dry.
func (l *lane) low(slots, maxClaim int, lease time.Duration) bool {
	return len(l.queue) < max(slots, l.target(slots, maxClaim, lease)/4)
}

// want says how many deliveries to claim for l: none while its queue is
// not low, else what fills it to its target.
func (l *lane) want(slots, maxClaim int, lease time.Duration) int {
	if !l.low(slots, maxClaim, lease) {
		return 0
	}
	return max(l.target(slots, maxClaim, lease)-len(l.queue), 0)
}

// drop lets go of what l has queued (its leases run out, or the round
// that disables its endpoint fails them); a claim made before the drop
// is not queued after it.
func (l *lane) drop() {
	l.queue = nil
	l.gen++
}

// pop takes the next queued delivery that can still be sent within its
// claim: one claimed longer than window ago is let go unsent (its lease
// runs out, and it is due again for any instance).
func (l *lane) pop(now time.Time, window time.Duration) (queued, bool) {
	for len(l.queue) > 0 {
		q := l.queue[0]
		l.queue[0] = queued{}
		l.queue = l.queue[1:]
		if now.Sub(q.claimed) < window {
			return q, true
		}
	}
	return queued{}, false
}

// observe folds one attempt's duration into l's average.
func (l *lane) observe(took time.Duration) {
	if l.took == 0 {
		l.took = max(took, time.Microsecond)
		return
	}
	l.took = (4*l.took + took) / 5
}
