package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Payments applies observed payments to orders, each real payment exactly
// once.
type Payments struct {
	store *dao.Store
	// OnUnmatched, if set, is told of every payment recorded UNMATCHED (for
	// the metric and the WARN log an operator watches).
	OnUnmatched func(model.Payment)
	// OnGroup, if set, is told how many notifications each committed
	// group transaction applied; OnFallback, why a notification that met
	// group apply was not applied in one (see Fallback). Both run on the
	// notify path: keep them cheap. Set them before the first Observe.
	OnGroup    func(applied int)
	OnFallback func(Fallback)
	now        func() time.Time
	log        *slog.Logger
	group      *applier // nil: every notification is applied alone
	seen       *seen    // nil: every duplicate asks the database
}

// NewPayments returns the payment use cases over store, with group apply
// on unless an option turns it off.
func NewPayments(store *dao.Store, opts ...PaymentsOption) *Payments {
	p := &Payments{store: store, now: time.Now, log: slog.New(slog.DiscardHandler), seen: newSeen(defaultSeenSize)}
	p.group = newApplier(p, defaultGroupLimits)
	for _, o := range opts {
		o(p)
	}
	return p
}

// PaymentsOption configures NewPayments.
type PaymentsOption func(*Payments)

// GroupApply turns group apply on (the default) or off (NOTIFY_GROUP_APPLY):
// off, every notification runs its own transaction.
func GroupApply(on bool) PaymentsOption {
	return func(p *Payments) {
		p.group = nil
		if on {
			p.group = newApplier(p, defaultGroupLimits)
		}
	}
}

// PaymentsLog sets where Payments logs what it records but doubts (a
// payment whose account is not its attempt's); by default, nowhere.
func PaymentsLog(log *slog.Logger) PaymentsOption {
	return func(p *Payments) { p.log = log }
}

// defaultSeenSize is NewPayments' duplicate cache; a variable so that a
// test binary can run every test with the cache off (export_test.go).
var defaultSeenSize = DefaultDuplicateCacheSize

// DuplicateCache sets how many trades seen committed this instance
// remembers to answer their duplicates without the database
// (NOTIFY_DUPLICATE_CACHE; see seen); 0 turns the cache off.
func DuplicateCache(size int) PaymentsOption {
	return func(p *Payments) { p.seen = newSeen(size) }
}

// Observe applies an observed payment to its order, exactly once: the one
// way into the ledger, whichever provider took the money and however it
// was learnt (a notification, an active query, checkout's close, or the
// reconciliation's repair). The provider's adapter builds o after its own
// checks; Observe refuses one the ledger cannot take (model.Observation.Check). With
// group apply on, a notification that arrives while another transaction of
// this instance is in flight waits for it and joins the next group (see
// applier); a group applies only first notices of orders awaiting payment
// at the right amount, and hands everything else to observeOne. Either way
// the outcome is observeOne's:
//
//   - a trade already recorded for the same order and amount is a
//     duplicate, answered from a plain read without taking any lock — or,
//     if this instance saw it committed and the observation names the
//     same out_trade_no, amount, app and status, from memory (see seen);
//   - a trade recorded for another order or amount is model.ErrTradeConflict;
//   - otherwise, in one transaction, the order row is locked, the payment is
//     inserted in the state model.Decide gives, and an APPLIED payment moves
//     the order 0→1 and sells its stock reservation. Lock order: order,
//     then payment, then stock (see Orders). The outbox event (order.paid
//     or payment.refund_pending) is written in the same transaction;
//   - a trade whose out_trade_no names no order (directly or through its
//     attempt) is recorded UNMATCHED, with no order, and announced
//     (payment.unmatched): money we hold is never without a ledger row.
//     An operator refunds it (Refunds.RefundUnmatched).
//
// It returns the payment as recorded and what this call did.
func (p *Payments) Observe(ctx context.Context, n model.Observation) (model.Payment, model.Outcome, error) {
	if err := n.Check(); err != nil {
		return model.Payment{}, "", err
	}
	if pay, ok := p.seen.answer(n); ok {
		return pay, model.OutcomeDuplicate, nil
	}
	var (
		pay     model.Payment
		outcome model.Outcome
		err     error
	)
	if p.group != nil {
		pay, outcome, err = p.group.observe(ctx, n)
	} else {
		pay, outcome, err = p.observeOne(ctx, n)
	}
	if err == nil {
		// Every outcome without an error is a row committed, or read
		// committed, for this trade: the duplicate's answer from now on.
		p.seen.add(n, pay)
	}
	return pay, outcome, err
}

// observeOne applies one notification in its own transaction: the
// decision table's one home.
func (p *Payments) observeOne(ctx context.Context, n model.Observation) (model.Payment, model.Outcome, error) {
	// Fast path: a provider resends until it hears it was recorded, and an
	// Alipay trade reaches TRADE_FINISHED after TRADE_SUCCESS. Rows are never deleted,
	// so a committed row answers those without the order lock. The same
	// read finds the attempt out_trade_no names (attempt 1's is the
	// order_sn; later ones are not order numbers at all); without one,
	// out_trade_no is the order_sn itself.
	existing, attempt, err := p.store.TradeLookup(ctx, n.Provider, n.TradeNo, n.OutTradeNo)
	if err != nil {
		return model.Payment{}, "", err
	}
	if existing != nil {
		return duplicate(*existing, n)
	}
	hasAttempt := attempt != nil
	if hasAttempt {
		n = p.attributed(n, *attempt)
	}

	var (
		pay     model.Payment
		outcome model.Outcome
	)
	key := dao.OrderSN(n.OutTradeNo)
	if hasAttempt {
		key = dao.OrderID(attempt.OrderID)
	}
	err = p.store.UpdateOrder(ctx, key, dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, order model.Order) error {
		outcome = ""
		pay = p.newPayment(order, n)
		inserted, err := tx.InsertPayment(ctx, pay)
		if err != nil {
			return err
		}
		if !inserted {
			// Recorded after our fast-path read: by a copy of this
			// notification that held the order lock before us, or, for a
			// conflicting trade, under another order's lock.
			existing, err := tx.PaymentForUpdate(ctx, n.Provider, n.TradeNo)
			if err != nil {
				return err
			}
			pay, outcome, err = duplicate(existing, n)
			return err
		}
		if hasAttempt {
			// Money moved on this trade: it is done, whatever the order does.
			if err := tx.MarkAttemptPaid(ctx, n.OutTradeNo); err != nil {
				return err
			}
		}
		outcome, err = p.settle(ctx, tx, order, pay)
		return err
	})
	if errors.Is(err, model.ErrOrderNotFound) {
		return p.unmatched(ctx, n)
	}
	if err != nil {
		return model.Payment{}, "", err
	}
	return pay, outcome, nil
}

// settle records what pay, just inserted under the order's lock, does to
// the order: applied (the order paid, its reservation sold, order.paid
// announced) or owed back (payment.refund_pending announced).
func (p *Payments) settle(ctx context.Context, tx *dao.OrderTx, order model.Order, pay model.Payment) (model.Outcome, error) {
	if pay.State != model.PaymentApplied {
		ev, err := paymentEvent(model.EventRefundPending, pay, order.OrderSN, p.now())
		if err != nil {
			return model.OutcomeRefundPending, err
		}
		return model.OutcomeRefundPending, tx.InsertEvents(ctx, ev)
	}
	if err := tx.MarkOrderPaid(ctx, pay.Provider.PayType(), *pay.PaidAt); err != nil {
		return model.OutcomeApplied, err
	}
	// Only the 0→1 compare-and-set gets here: the reservation is sold
	// and the payment announced exactly once.
	if err := tx.SellReservation(ctx); err != nil {
		return model.OutcomeApplied, err
	}
	ev, err := paymentEvent(model.EventOrderPaid, pay, order.OrderSN, p.now())
	if err != nil {
		return model.OutcomeApplied, err
	}
	return model.OutcomeApplied, tx.InsertEvents(ctx, ev)
}

// unmatched records a paid trade whose out_trade_no resolves to no order:
// UNMATCHED, with its event, or — recorded meanwhile — a duplicate.
func (p *Payments) unmatched(ctx context.Context, n model.Observation) (model.Payment, model.Outcome, error) {
	pay := p.newPayment(model.Order{}, n)
	pay.State, pay.Reason = model.PaymentUnmatched, model.RefundNone
	inserted, existing, err := p.store.RecordUnmatched(ctx, pay, func(pay model.Payment) ([]model.Event, error) {
		ev, err := paymentEvent(model.EventPaymentUnmatched, pay, "", p.now())
		return []model.Event{ev}, err
	})
	if err != nil {
		return model.Payment{}, "", err
	}
	if !inserted {
		return duplicate(existing, n)
	}
	if p.OnUnmatched != nil {
		p.OnUnmatched(pay)
	}
	return pay, model.OutcomeUnmatched, nil
}

// newPayment is the ledger row for a trade not seen before, already in the
// state the decision table gives for order.
func (p *Payments) newPayment(order model.Order, n model.Observation) model.Payment {
	state, reason := model.Decide(order, n.Amount)
	paidAt := p.now().UTC()
	if n.PaidAt != nil {
		paidAt = *n.PaidAt
	}
	return model.Payment{
		Provider:   n.Provider,
		Account:    n.Account,
		App:        n.App,
		TradeNo:    n.TradeNo,
		OrderID:    order.ID,
		OutTradeNo: n.OutTradeNo,
		Amount:     n.Amount,
		State:      state,
		Reason:     reason,
		NotifyID:   n.Ref,
		PaidAt:     &paidAt,
	}
}

// attributed is n in the account and app of a, the attempt its
// out_trade_no names, when n names no app (an Alipay bill line names the
// account at most; a WeChat Pay line its app, when one of ours), and the
// payment's refunds, queries and closes go through the
// app it records, which for a trade opened in an attempt is the
// attempt's, not the account's first app. If n names another account than
// a's, n's is kept (it is what the provider told us) and the disagreement
// logged.
func (p *Payments) attributed(n model.Observation, a model.PayAttempt) model.Observation {
	if n.App != "" || a.Provider != n.Provider {
		return n
	}
	switch {
	case n.Account == "":
		n.Account, n.App = a.Account, a.App
	case n.Account == a.Account:
		n.App = a.App
	case a.Account != "":
		p.log.Warn("a payment names another account than its attempt: recorded in the payment's account, its first app",
			"provider", n.Provider, "trade_no", n.TradeNo, "out_trade_no", n.OutTradeNo,
			"account", n.Account, "attempt_account", a.Account, "attempt_app", a.App)
	}
	return n
}

// duplicate answers an observation whose trade is already recorded.
func duplicate(existing model.Payment, n model.Observation) (model.Payment, model.Outcome, error) {
	if !existing.SameTrade(n.OutTradeNo, n.Amount) {
		return existing, "", fmt.Errorf("%w: %s trade %q is recorded for %q amount %s, notified for %q amount %s",
			model.ErrTradeConflict, n.Provider, n.TradeNo, existing.OutTradeNo, existing.Amount.StringFixed(2),
			n.OutTradeNo, n.Amount.StringFixed(2))
	}
	return existing, model.OutcomeDuplicate, nil
}
