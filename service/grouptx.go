package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// The group transaction: what applier hands a group of notifications to.

// member is a group member that may be applied in the group transaction.
type member struct {
	i       int // index in the group
	orderID int64
	attempt bool              // out_trade_no names a payment attempt
	n       model.Observation // the job's, in its attempt's account and app (see attributed)
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
	members := p.groupMembers(group, trades, verdicts)
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
	base := context.WithoutCancel(group[0].ctx)
	if dl.IsZero() {
		return context.WithCancel(base)
	}
	return context.WithDeadline(base, dl)
}

// groupMembers are the jobs of group that may be applied together: each pays
// an order we know, no two notices of one trade and no two trades of one
// order. The verdicts of the others are set here (a duplicate's answer,
// or why it runs alone).
func (p *Payments) groupMembers(group []*job, trades map[model.Provider]dao.Trades, verdicts []verdict) []member {
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
		m := member{i: i, n: j.n}
		if a, ok := trades.Attempts[j.n.OutTradeNo]; ok {
			m.orderID, m.attempt, m.n = a.OrderID, true, p.attributed(j.n, a)
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
		n := m.n
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
	// The group's providers, in the order its jobs name them: any
	// registered provider's, not a list of known ones.
	var providers []model.Provider
	for _, j := range group {
		if !slices.Contains(providers, j.n.Provider) {
			providers = append(providers, j.n.Provider)
		}
	}
	for _, provider := range providers {
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
