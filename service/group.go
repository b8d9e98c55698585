package service

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"paynotify/model"
)

// Group apply is the database's group commit one level up. An idle
// applier runs a notification at once, alone, on today's path
// (observeOne). Notifications that arrive while a transaction of this
// instance is in flight queue; when it ends, the first of them leads the
// next group: it reads all their trades with one statement (duplicates are
// answered from it), then applies the first notices of orders awaiting
// payment at the right amount in one transaction (UpdateOrders: one lock
// statement, one insert per table, one update per table), commits once,
// and answers each. Anything else — an unknown order, a payment that goes
// REFUND_PENDING, two notices of one trade or one order in the group, a
// trade recorded meanwhile, a deadlock, a lock-wait timeout, any error —
// sends the members concerned to observeOne, each on its own deadline, so
// the decision table stays in one place and one notification never fails
// another.

// groupLimits bounds the queue and each group.
type groupLimits struct {
	maxGroup int // members of one group
	maxBytes int // their rows' bytes, roughly (see cost)
	maxQueue int // waiting notifications; past it, model.ErrBusy
	// minBudget: a notification with less time than this left runs alone
	// rather than tie its deadline to a group's.
	minBudget time.Duration
}

var defaultGroupLimits = groupLimits{maxGroup: 64, maxBytes: 256 << 10, maxQueue: 1024, minBudget: 250 * time.Millisecond}

// applier queues notifications behind the transaction in flight and
// hands the queue to the next leader.
type applier struct {
	p      *Payments
	limits groupLimits

	mu    sync.Mutex
	busy  bool   // a leader is running a group (or a lone notification)
	queue []*job // waiting, oldest first

	groups atomic.Int64 // group transactions committed, for tests
}

func newApplier(p *Payments, l groupLimits) *applier { return &applier{p: p, limits: l} }

// job is one notification waiting for its answer.
type job struct {
	ctx  context.Context
	n    model.Observation
	lead chan []*job  // the group this job is to run, as its leader
	done chan verdict // or its answer
}

// verdict answers one member of a group.
type verdict struct {
	pay     model.Payment
	outcome model.Outcome
	err     error
	alone   bool     // not decided in the group: run observeOne
	why     Fallback // why, if alone
}

// cost is roughly the bytes a notification adds to the group's statements
// (its payment row and its outbox event).
func (j *job) cost() int {
	return 768 + 2*(len(j.n.TradeNo)+len(j.n.OutTradeNo)) + len(j.n.Ref)
}

func (a *applier) observe(ctx context.Context, n model.Observation) (model.Payment, model.Outcome, error) {
	if a.short(ctx, time.Now()) {
		a.p.fellBack(FallbackNearDeadline)
		return a.p.observeOne(ctx, n)
	}
	j := &job{ctx: ctx, n: n, lead: make(chan []*job, 1), done: make(chan verdict, 1)}
	a.mu.Lock()
	if !a.busy {
		a.busy = true
		a.mu.Unlock()
		return a.run(j, []*job{j})
	}
	if len(a.queue) >= a.limits.maxQueue {
		a.mu.Unlock()
		a.p.fellBack(FallbackBusy)
		return model.Payment{}, "", fmt.Errorf("%w: %d notifications queued", model.ErrBusy, a.limits.maxQueue)
	}
	a.queue = append(a.queue, j)
	a.mu.Unlock()

	select {
	case group := <-j.lead:
		return a.run(j, group)
	case v := <-j.done:
		return a.answer(j, v)
	case <-ctx.Done():
	}
	a.mu.Lock()
	if i := slices.Index(a.queue, j); i >= 0 {
		a.queue = slices.Delete(a.queue, i, i+1)
		a.mu.Unlock()
		a.p.fellBack(FallbackExpired)
		return model.Payment{}, "", fmt.Errorf("%w: waiting for the notify queue: %w", model.ErrUnavailable, ctx.Err())
	}
	a.mu.Unlock()
	// Already taken into a group, whose deadline is no later than ours.
	select {
	case group := <-j.lead:
		return a.run(j, group)
	case v := <-j.done:
		return a.answer(j, v)
	}
}

// short reports whether ctx has too little time left to join a group.
func (a *applier) short(ctx context.Context, now time.Time) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && dl.Sub(now) < a.limits.minBudget
}

// run leads group (self is one of its members): it applies the group,
// hands the queue to the next leader, then answers the others and itself.
func (a *applier) run(self *job, group []*job) (model.Payment, model.Outcome, error) {
	verdicts := a.apply(self, group)
	a.handOff()
	var own verdict
	for i, j := range group {
		if j == self {
			own = verdicts[i]
			continue
		}
		j.done <- verdicts[i]
	}
	return a.answer(self, own)
}

// apply decides group, led by self: alone on today's path if it is the
// only member, else as a group.
func (a *applier) apply(self *job, group []*job) (verdicts []verdict) {
	defer func() {
		if r := recover(); r != nil {
			// A bug must not leave the applier busy for good: pass the
			// queue on, let the group's others run alone, then panic on.
			a.handOff()
			for _, j := range group {
				if j != self {
					a.p.fellBack(FallbackError)
					j.done <- verdict{alone: true}
				}
			}
			panic(r)
		}
	}()
	if len(group) == 1 {
		// Alone: today's path, while the queue builds behind it.
		pay, outcome, err := a.p.observeOne(self.ctx, self.n)
		return []verdict{{pay: pay, outcome: outcome, err: err}}
	}
	verdicts, committed := a.p.applyGroup(group)
	applied := 0
	for _, v := range verdicts {
		switch {
		case v.alone:
			a.p.fellBack(v.why)
		case v.outcome == model.OutcomeApplied:
			applied++
		}
	}
	if committed {
		a.groups.Add(1)
		if a.p.OnGroup != nil {
			a.p.OnGroup(applied)
		}
	}
	return verdicts
}

// handOff gives the queue's next group to its first member, or marks the
// applier idle. Members too close to their deadline run alone instead.
func (a *applier) handOff() {
	now := time.Now()
	a.mu.Lock()
	var group, alone []*job
	bytes := 0
	for _, j := range a.queue {
		if len(group) == a.limits.maxGroup || bytes+j.cost() > a.limits.maxBytes && len(group) > 0 {
			break
		}
		if a.short(j.ctx, now) {
			alone = append(alone, j)
			continue
		}
		group = append(group, j)
		bytes += j.cost()
	}
	a.queue = slices.Delete(a.queue, 0, len(group)+len(alone))
	idle := len(group) == 0 && len(a.queue) == 0
	a.busy = !idle
	a.mu.Unlock()
	// Told outside the lock: neither the answer nor the metric waits on it.
	for _, j := range alone {
		a.p.fellBack(FallbackNearDeadline)
		j.done <- verdict{alone: true}
	}
	if idle {
		return
	}
	if len(group) == 0 {
		// Everything taken ran alone; more waits behind it.
		a.handOff()
		return
	}
	group[0].lead <- group
}

// answer turns a verdict into Observe's result.
func (a *applier) answer(j *job, v verdict) (model.Payment, model.Outcome, error) {
	if v.alone {
		return a.p.observeOne(j.ctx, j.n)
	}
	return v.pay, v.outcome, v.err
}
