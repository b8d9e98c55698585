// Package fake is what the payment providers' fakes (fakealipay,
// fakewechatpay) share beside their wire protocols: the queue of faults a
// test arms for a provider's calls, and the runner of the notifications a
// fake sends in the background, resends on a schedule included.
package fake

import "sync"

// Faults are the misbehaviours queued for a fake's calls, each for the
// next so many calls of one call name, and a count of every call. F is
// the fake's own description of a fault; the zero F is no fault. The
// zero Faults is ready to use; it is safe for concurrent use.
type Faults[F any] struct {
	mu     sync.Mutex
	calls  map[string]int
	queued map[string][]*queued[F]
}

// queued is one fault and how many more calls it is for.
type queued[F any] struct {
	f    F
	left int
}

// Add queues f for the next times calls of call, after those already
// queued for it; times of 0 or less queues nothing.
func (q *Faults[F]) Add(call string, f F, times int) {
	if times <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued == nil {
		q.queued = map[string][]*queued[F]{}
	}
	q.queued[call] = append(q.queued[call], &queued[F]{f: f, left: times})
}

// Arrive counts a call of call and returns the fault it is to suffer:
// the zero F when none is queued.
func (q *Faults[F]) Arrive(call string) F {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.calls == nil {
		q.calls = map[string]int{}
	}
	q.calls[call]++
	head := q.queued[call]
	if len(head) == 0 {
		var none F
		return none
	}
	f := head[0].f
	if head[0].left--; head[0].left == 0 {
		q.queued[call] = head[1:]
	}
	return f
}

// Calls counts the calls of call so far, faulty ones included.
func (q *Faults[F]) Calls(call string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls[call]
}
