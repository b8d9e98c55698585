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

// OpenTrades finds out what the network lost: it queries open trades
// whose notification has not come (applying a payment through exactly the
// same Payments.Observe as a notification), and closes at their provider
// the open trades of settled orders; each attempt is asked of the provider
// it is open at. Safe with several instances: queried attempts are claimed
// with FOR UPDATE SKIP LOCKED and a lease; closing is idempotent at the
// provider and recorded by compare-and-set, so two instances
// closing one trade cost a second call, nothing more. It runs as two jobs
// (QueryJob, CloseJob); an attempt either fails on is given its own
// back-off and the round goes on.
type OpenTrades struct {
	store     *dao.Store
	providers Providers
	payments  *Payments
	log       *slog.Logger
	// Interval is ALIPAY_JOBS_INTERVAL, the pause between rounds.
	Interval time.Duration
	// Batch is how many attempts one round handles.
	Batch int
	// Lease keeps a claimed attempt from other instances while it is
	// being queried.
	Lease time.Duration
	now   func() time.Time
}

// NewOpenTrades returns the query-and-close job.
func NewOpenTrades(store *dao.Store, providers Providers, payments *Payments, log *slog.Logger) *OpenTrades {
	return &OpenTrades{store: store, providers: providers, payments: payments, log: log, Interval: 30 * time.Second,
		Batch: 20, Lease: 10 * time.Minute, now: time.Now}
}

// QueryJob is the active query as a background job.
func (r *OpenTrades) QueryJob() Job {
	return Job{Name: "active-query", Interval: r.Interval, RunOnce: r.QueryDue}
}

// CloseJob is the trade close as a background job.
func (r *OpenTrades) CloseJob() Job {
	return Job{Name: "trade-close", Interval: r.Interval, RunOnce: r.CloseAbandoned}
}

// expiryGrace is how long past a trade's time_expire a closed attempt is
// still queried, for clocks and Alipay's own lag.
const expiryGrace = time.Hour

// queryBackoff is when an attempt is asked about again after n queries:
// often at first, then rarely; a trade Alipay still holds open lives for
// days at most.
func queryBackoff(n int) time.Duration {
	steps := []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}
	if n-1 < len(steps) {
		return steps[max(n-1, 0)]
	}
	return 6 * time.Hour
}

// QueryDue queries one batch of open attempts that are due and returns
// how many it found paid.
func (r *OpenTrades) QueryDue(ctx context.Context) (int, error) {
	claimed, err := r.store.ClaimAttemptsToQuery(ctx, r.now(), expiryGrace, r.Lease, r.Batch)
	if err != nil {
		return 0, err
	}
	paid := 0
	for _, a := range claimed {
		t, err := r.query(ctx, a)
		switch {
		case err == nil && t.Status.Paid():
			if _, outcome, err := r.payments.Observe(ctx, t.Observation(a)); err != nil {
				r.log.Error("query found a payment that could not be applied", "out_trade_no", a.OutTradeNo, "err", err)
				if err := r.store.ScheduleQuery(ctx, a.ID, r.now().Add(queryBackoff(a.Queries+1))); err != nil && ctx.Err() != nil {
					return paid, err
				}
				continue
			} else {
				r.log.Info("query found a payment", "out_trade_no", a.OutTradeNo, "trade_no", t.TradeNo, "outcome", outcome)
			}
			paid++
		case err == nil && t.Status == model.TradeClosed && a.State == model.AttemptOpen:
			if _, err := closeAttempt(ctx, r.store, a, "closed at "+a.Provider.Name(), r.now()); err != nil {
				if ctx.Err() != nil {
					return paid, err
				}
				// Claimed with a lease: it is asked again when the lease
				// ends, and the round goes on.
				r.log.Error("closed trade not recorded", "out_trade_no", a.OutTradeNo, "err", err)
				continue
			}
			a.State = model.AttemptClosed
			fallthrough // a closed trade can still be reported paid later by a lagging query: ask again until expiry
		default:
			// Not paid yet, never scanned (ErrTradeNotExist), closed, or no
			// trustworthy answer: ask again later.
			if err != nil && !errors.Is(err, model.ErrTradeNotExist) {
				r.log.Warn("trade query failed", "provider", a.Provider, "out_trade_no", a.OutTradeNo, "err", err)
			}
			if err := r.reschedule(ctx, a, err == nil || errors.Is(err, model.ErrTradeNotExist)); err != nil {
				if ctx.Err() != nil {
					return paid, err
				}
				r.log.Error("next query not scheduled; the lease stands", "out_trade_no", a.OutTradeNo, "err", err)
			}
		}
	}
	return paid, nil
}

// query asks a's provider where its trade stands.
func (r *OpenTrades) query(ctx context.Context, a model.PayAttempt) (model.Trade, error) {
	gw, err := r.providers.app(a.Provider, a.Account, a.App)
	if err != nil {
		return model.Trade{}, err
	}
	return gw.QueryTrade(ctx, a.OutTradeNo)
}

// expiryLag is how long after a trade's time_expire the last query of a
// closed attempt is made, for clocks and Alipay's own lag.
const expiryLag = time.Minute

// reschedule sets an unpaid attempt's next query. A CLOSED attempt (which
// may have been closed before the buyer even opened its trade) is asked
// once more at its expiry, however long the back-off has grown; once a
// trustworthy answer after that says "not paid", Alipay can no longer take
// payment for it and it is retired (EXPIRED).
func (r *OpenTrades) reschedule(ctx context.Context, a model.PayAttempt, answered bool) error {
	next := r.now().Add(queryBackoff(a.Queries + 1))
	if a.State == model.AttemptClosed && !a.ExpireAt.IsZero() {
		final := a.ExpireAt.Add(expiryLag)
		if answered && !r.now().Before(final) {
			_, err := r.store.SetAttemptState(ctx, a.ID, model.AttemptClosed, model.AttemptExpired)
			return err
		}
		if next.After(final) {
			next = final
		}
	}
	return r.store.ScheduleQuery(ctx, a.ID, next)
}

// CloseAbandoned closes at Alipay the open trades of orders that no
// longer await payment (closed, or paid through another attempt). A trade
// Alipay says is already paid is queried and applied — it ends
// REFUND_PENDING — and refunded by the refund worker. A closed attempt is
// still queried until its trade expires (see QueryDue). An attempt whose
// close fails (Alipay refuses it, or does not answer) waits out its own
// back-off, so a batch of them never holds up newer ones.
func (r *OpenTrades) CloseAbandoned(ctx context.Context) (int, error) {
	now := r.now()
	attempts, err := r.store.OpenAttemptsOfSettledOrders(ctx, now, r.Batch)
	if err != nil {
		return 0, err
	}
	closed := 0
	for _, a := range attempts {
		ok, err := r.closeAbandoned(ctx, a)
		if ok {
			closed++
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return closed, err
		}
		r.log.Warn("trade close failed, will retry", "out_trade_no", a.OutTradeNo, "err", err)
		if _, err := r.store.PostponeTradeClose(ctx, a.ID, now, rowBackoff, err.Error()); err != nil {
			return closed, err
		}
	}
	return closed, nil
}

// closeAbandoned closes one attempt's trade and reports whether it
// recorded the close. An error means the attempt is still open.
func (r *OpenTrades) closeAbandoned(ctx context.Context, a model.PayAttempt) (bool, error) {
	gw, err := r.providers.app(a.Provider, a.Account, a.App)
	if err != nil {
		return false, err
	}
	err = gw.CloseTrade(ctx, a.OutTradeNo)
	switch {
	case err == nil, errors.Is(err, model.ErrTradeNotExist): // never scanned: nothing to close
		return closeAttempt(ctx, r.store, a, "order settled", r.now())
	case errors.Is(err, model.ErrTradeStatus):
		t, err := gw.QueryTrade(ctx, a.OutTradeNo)
		if err != nil {
			return false, fmt.Errorf("close refused, query failed: %w", err)
		}
		switch {
		case t.Status.Paid():
			if _, _, err := r.payments.Observe(ctx, t.Observation(a)); err != nil {
				return false, fmt.Errorf("paid trade of a closed order not applied yet: %w", err)
			}
			// Applied (REFUND_PENDING, refunded by the refund job); the
			// attempt is PAID now, no longer listed.
			return false, nil
		case t.Status == model.TradeClosed:
			return closeAttempt(ctx, r.store, a, "closed at "+a.Provider.Name(), r.now())
		}
		return false, model.TagProvider(a.Provider, fmt.Errorf("%w: %s close refused while the trade is %s", model.ErrGatewayUnknown, a.Provider, t.Status))
	}
	return false, err
}

// closeAttempt records that an attempt's trade is closed (compare-and-set
// OPEN → CLOSED) and announces it (trade.closed) in one transaction under
// its order's lock, and reports whether this call did it.
func closeAttempt(ctx context.Context, store *dao.Store, a model.PayAttempt, reason string, now time.Time) (bool, error) {
	var closed bool
	err := store.UpdateOrder(ctx, dao.OrderID(a.OrderID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
		var err error
		closed, err = tx.SetAttemptState(ctx, a.ID, model.AttemptOpen, model.AttemptClosed)
		if err != nil || !closed {
			return err
		}
		ev, err := newEvent(model.EventTradeClosed, a.OrderID, model.TradeEventData{
			OrderID: a.OrderID, Provider: string(a.Provider), Account: a.Account, App: a.App, AttemptNo: a.AttemptNo, OutTradeNo: a.OutTradeNo, Method: string(a.Method), Reason: reason,
		}, now)
		if err != nil {
			return err
		}
		return tx.InsertEvents(ctx, ev)
	})
	return closed, err
}
