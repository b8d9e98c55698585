package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"paynotify/dao"
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
	var group []*job
	bytes, taken := 0, 0
	for _, j := range a.queue {
		if len(group) == a.limits.maxGroup || bytes+j.cost() > a.limits.maxBytes && len(group) > 0 {
			break
		}
		taken++
		if a.short(j.ctx, now) {
			a.p.fellBack(FallbackNearDeadline)
			j.done <- verdict{alone: true}
			continue
		}
		group = append(group, j)
		bytes += j.cost()
	}
	a.queue = slices.Delete(a.queue, 0, taken)
	if len(group) == 0 && len(a.queue) == 0 {
		a.busy = false
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
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

// member is a group member that may be applied in the group transaction.
type member struct {
	i       int // index in the group
	orderID int64
	attempt bool // out_trade_no names a payment attempt
}

// applyGroup applies a group of two or more notifications and returns a
// verdict for each, in order, and whether a group transaction committed.
// It never fails a member: whatever it cannot decide runs alone.
func (p *Payments) applyGroup(group []*job) ([]verdict, bool) {
	verdicts := make([]verdict, len(group))
	for i := range verdicts {
		verdicts[i].alone, verdicts[i].why = true, FallbackNotEligible
	}
	ctx, cancel := groupContext(group)
	defer cancel()

	trades, err := p.lookupGroup(ctx, group)
	if err != nil {
		for i := range verdicts {
			verdicts[i].why = fallbackFor(err)
		}
		return verdicts, false
	}
	members := groupMembers(group, trades, verdicts)
	if len(members) < 2 {
		for _, m := range members {
			verdicts[m.i].why = FallbackAlone
		}
		return verdicts, false
	}
	applied, pays, err := p.writeGroup(ctx, group, members)
	if err != nil {
		for _, m := range members {
			verdicts[m.i].why = fallbackFor(err)
		}
		return verdicts, false
	}
	if len(applied) == 0 {
		return verdicts, false
	}
	for k, m := range applied {
		verdicts[m.i] = verdict{pay: pays[k], outcome: model.OutcomeApplied}
	}
	return verdicts, true
}

// groupContext is the group's context: its deadline is its earliest
// member's, and no member's cancellation ends it.
func groupContext(group []*job) (context.Context, context.CancelFunc) {
	// The group's deadline is its earliest member's.
	dl, _ := group[0].ctx.Deadline()
	for _, j := range group[1:] {
		if d, ok := j.ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
			dl = d
		}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(group[0].ctx))
	if !dl.IsZero() {
		ctx, cancel = context.WithDeadline(context.WithoutCancel(group[0].ctx), dl)
	}
	return ctx, cancel
}

// groupMembers are the jobs of group that may be applied together: each pays
// an order we know, no two notices of one trade and no two trades of one
// order. The verdicts of the others are set here (a duplicate's answer,
// or why it runs alone).
func groupMembers(group []*job, trades map[model.Provider]dao.Trades, verdicts []verdict) []member {
	var (
		members []member
		trade   = map[ledgerKey]int{}
		order   = map[int64]int{}
	)
	for i, j := range group {
		trades := trades[j.n.Provider]
		if existing, ok := trades.Payments[j.n.TradeNo]; ok {
			pay, outcome, err := duplicate(existing, j.n)
			verdicts[i] = verdict{pay: pay, outcome: outcome, err: err}
			continue
		}
		m := member{i: i}
		if a, ok := trades.Attempts[j.n.OutTradeNo]; ok {
			m.orderID, m.attempt = a.OrderID, true
		} else if id, ok := trades.Orders[j.n.OutTradeNo]; ok {
			m.orderID = id
		} else {
			continue // no such order: observeOne says what that is
		}
		trade[ledgerKey{j.n.Provider, j.n.TradeNo}]++
		order[m.orderID]++
		members = append(members, m)
	}
	// Two notices of one trade, or two trades of one order: one by one,
	// where the order lock and the ledger key decide between them.
	members = slices.DeleteFunc(members, func(m member) bool {
		switch {
		case trade[ledgerKey{group[m.i].n.Provider, group[m.i].n.TradeNo}] > 1:
			verdicts[m.i].why = FallbackDuplicateInGroup
		case order[m.orderID] > 1:
			verdicts[m.i].why = FallbackTwoTradesOneOrder
		default:
			return false
		}
		return true
	})
	return members
}

// writeGroup applies members in one transaction that locks their orders
// (in id order): what it applied, with the payments it recorded.
func (p *Payments) writeGroup(ctx context.Context, group []*job, members []member) ([]member, []model.Payment, error) {
	ids := make([]int64, len(members))
	for k, m := range members {
		ids[k] = m.orderID
	}
	var w groupWrite
	err := p.store.UpdateOrders(ctx, ids, func(ctx context.Context, tx *dao.OrdersTx, orders []model.Order) error {
		var err error
		if w, err = p.decideGroup(group, members, orders); err != nil || len(w.applied) == 0 {
			return err
		}
		inserted, err := tx.InsertPayments(ctx, w.pays)
		if err != nil {
			return err
		}
		if inserted != len(w.pays) {
			return fmt.Errorf("%w: %d of %d trades recorded meanwhile", errRegroup, len(w.pays)-inserted, len(w.pays))
		}
		if len(w.attempts) > 0 {
			if err := tx.MarkAttemptsPaid(ctx, w.attempts); err != nil {
				return err
			}
		}
		for payType, paidAt := range w.paidAt {
			if err := tx.MarkOrdersPaid(ctx, payType, paidAt); err != nil {
				return err
			}
		}
		if err := tx.SellReservations(ctx, w.sold); err != nil {
			return err
		}
		return tx.InsertEvents(ctx, w.events...)
	})
	return w.applied, w.pays, err
}

// groupWrite is what one group transaction writes: the members it
// applies with their payments, the orders' paid times by pay type, the
// attempts paid, the orders whose reservations are sold, and the events.
type groupWrite struct {
	applied  []member
	pays     []model.Payment
	paidAt   map[model.PayType]map[int64]time.Time
	attempts []string
	sold     []int64
	events   []model.Event
}

// decideGroup decides, over the locked orders, which members are applied
// together: those whose payment is APPLIED (REFUND_PENDING is
// observeOne's to decide).
func (p *Payments) decideGroup(group []*job, members []member, orders []model.Order) (groupWrite, error) {
	byID := make(map[int64]model.Order, len(orders))
	for _, o := range orders {
		byID[o.ID] = o
	}
	w := groupWrite{paidAt: map[model.PayType]map[int64]time.Time{}}
	for _, m := range members {
		o, ok := byID[m.orderID]
		if !ok {
			continue
		}
		n := group[m.i].n
		pay := p.newPayment(o, n)
		if pay.State != model.PaymentApplied {
			continue // REFUND_PENDING is observeOne's to decide
		}
		ev, err := paymentEvent(model.EventOrderPaid, pay, o.OrderSN, p.now())
		if err != nil {
			return groupWrite{}, err
		}
		w.applied, w.pays = append(w.applied, m), append(w.pays, pay)
		if w.paidAt[pay.Provider.PayType()] == nil {
			w.paidAt[pay.Provider.PayType()] = map[int64]time.Time{}
		}
		w.paidAt[pay.Provider.PayType()][o.ID] = *pay.PaidAt
		w.sold = append(w.sold, o.ID)
		w.events = append(w.events, ev)
		if m.attempt {
			w.attempts = append(w.attempts, n.OutTradeNo)
		}
	}
	return w, nil
}

// ledgerKey is a payment's key in the ledger.
type ledgerKey struct {
	provider model.Provider
	tradeNo  string
}

// lookupGroup reads what the ledger holds of a group's trades, one read per
// provider in the group (a trade number is a provider's own).
func (p *Payments) lookupGroup(ctx context.Context, group []*job) (map[model.Provider]dao.Trades, error) {
	out := map[model.Provider]dao.Trades{}
	for _, provider := range model.Providers {
		var tradeNos, outTradeNos []string
		for _, j := range group {
			if j.n.Provider == provider {
				tradeNos, outTradeNos = append(tradeNos, j.n.TradeNo), append(outTradeNos, j.n.OutTradeNo)
			}
		}
		if len(tradeNos) == 0 {
			continue
		}
		trades, err := p.store.TradesLookup(ctx, provider, tradeNos, outTradeNos)
		if err != nil {
			return nil, err
		}
		out[provider] = trades
	}
	return out, nil
}

// errRegroup rolls a group back so that its members run alone.
var errRegroup = errors.New("group apply: run the members one by one")
