package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/model"
)

// Refunds gives money back, exactly once per refund: every REFUND_PENDING
// payment in full, and operators' after-sale refunds of paid orders.
//
// A refund's out_request_no is derived from what it refunds, and Alipay
// refunds an out_request_no once however often it is asked; before asking
// again after an unknown outcome, the worker asks whether the refund went
// through (alipay.trade.fastpay.refund.query). Several workers may run:
// refunds are claimed with FOR UPDATE SKIP LOCKED and a lease.
type Refunds struct {
	store     *dao.Store
	providers Providers
	log       *slog.Logger
	// Interval is ALIPAY_JOBS_INTERVAL, the pause between rounds.
	Interval time.Duration
	// Batch is how many refunds one round handles.
	Batch int
	// Lease keeps a claimed refund from other workers while Alipay is asked.
	Lease time.Duration
	// AlertAfter attempts of unknown outcome, each further one is logged as
	// an error for an operator. The refund stays REFUNDING — never FAILED on
	// an unknown outcome, which might have been a refund: only a signed
	// refusal fails it.
	AlertAfter int
	// LeavePending keeps the worker from taking REFUND_PENDING payments:
	// they wait for an operator to queue each one (the console's queue of
	// payments owed back, as dev -manual-refunds runs it); refunds queued
	// are still sent and confirmed.
	LeavePending bool
	// OnFinished, if set, is told how each refund ended (REFUNDED, or
	// REFUND_FAILED: refused by Alipay), once, after it is recorded.
	// The provider is the one the money went back through.
	OnFinished func(model.Refund, model.RefundState)
	now        func() time.Time
}

// NewRefunds returns the refund use cases and worker.
func NewRefunds(store *dao.Store, providers Providers, log *slog.Logger) *Refunds {
	return &Refunds{store: store, providers: providers, log: log, Interval: 30 * time.Second, Batch: 20, Lease: 10 * time.Minute,
		AlertAfter: 12, now: time.Now}
}

// Job is the refund worker as a background job.
func (r *Refunds) Job() Job {
	return Job{Name: "refunds", Interval: r.Interval, RunOnce: r.RunOnce}
}

// RunOnce enqueues one batch of REFUND_PENDING payments (unless
// LeavePending), then asks Alipay for one batch of due refunds, and says
// how many ended REFUNDED.
func (r *Refunds) RunOnce(ctx context.Context) (int, error) {
	var errEnqueue error
	if !r.LeavePending {
		_, errEnqueue = r.Enqueue(ctx)
	}
	done, err := r.Execute(ctx)
	return done, errors.Join(errEnqueue, err)
}

// autoRequestNo is the out_request_no that refunds a REFUND_PENDING payment
// in full: one per ledger row, forever.
func autoRequestNo(p model.Payment) string {
	if id := "RP-" + p.TradeNo; len(id) <= 64 {
		return id
	}
	sum := sha256.Sum256([]byte(p.TradeNo))
	return "RP-H" + hex.EncodeToString(sum[:16])
}

// afterSaleRequestNo is the out_request_no of an operator's refund: one per
// (order, idempotency key).
func afterSaleRequestNo(orderID int64, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "AS-" + strconv.FormatInt(orderID, 10) + "-" + hex.EncodeToString(sum[:12])
}

// Enqueue turns REFUND_PENDING payments into refunds (payment
// REFUND_PENDING → REFUNDING), each in a transaction that locks its order
// first, then the payment. It returns how many it enqueued. A payment
// that cannot be enqueued waits out its own back-off.
func (r *Refunds) Enqueue(ctx context.Context) (int, error) {
	now := r.now()
	pays, err := r.store.PaymentsToRefund(ctx, now, r.Batch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pays {
		enqueued, err := r.enqueue(ctx, p, nil)
		if err == nil && enqueued {
			n++
		}
		if err != nil {
			if ctx.Err() != nil {
				return n, err
			}
			// One payment that cannot be enqueued must not hold up the rest.
			r.log.Error("refund not enqueued", "trade_no", p.TradeNo, "err", err)
			if !transient(err) {
				if _, err := r.store.PostponeRefundEnqueue(ctx, p.TradeNo, now, rowBackoff, err.Error()); err != nil {
					return n, err
				}
			}
		}
	}
	return n, nil
}

// enqueue turns one REFUND_PENDING payment into its refund, in a
// transaction that locks its order first, then the payment; recorded in
// admin_audit when an operator asks. It reports whether it did (false:
// another worker, or operator, took it).
func (r *Refunds) enqueue(ctx context.Context, p model.Payment, act *model.Act) (bool, error) {
	if p.OrderID == 0 {
		// An UNMATCHED payment an operator asked to refund: no order.
		return r.enqueueOrderless(ctx, p, act)
	}
	enqueued := false
	err := r.store.UpdateOrder(ctx, dao.OrderID(p.OrderID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
		enqueued = false
		refunds, err := tx.Refunds(ctx)
		if err != nil {
			return err
		}
		// A refund made elsewhere (found in Alipay's bill) may have taken
		// part of it already: give back what is left.
		left := leftOf(p, refunds)
		f := model.Refund{
			OutRequestNo: autoRequestNo(p), Kind: model.RefundAuto, Provider: p.Provider, Account: p.Account, App: p.App, TradeNo: p.TradeNo,
			OutTradeNo: p.OutTradeNo, OrderID: p.OrderID, Amount: left, Reason: string(p.Reason),
		}
		if act != nil {
			// First: a second post of the same form stops here.
			if err := tx.InsertAudit(ctx, model.Audit{Key: act.Key, Operator: act.Operator, Action: model.AuditPaymentRefund,
				OrderID: &p.OrderID, TargetKind: model.TargetPayment, TargetID: p.TradeNo,
				Before: string(model.PaymentRefundPending) + " " + string(p.Reason),
				After:  fmt.Sprintf("%s, refund %s of %s", model.PaymentRefunding, f.OutRequestNo, f.Amount.StringFixed(2)),
				Note:   act.Note}); err != nil {
				return err
			}
		}
		to := model.PaymentRefunding
		if !left.IsPositive() {
			to = model.PaymentRefunded // nothing left to give back
		}
		moved, err := tx.SetPaymentState(ctx, p.Provider, p.TradeNo, model.PaymentRefundPending, to)
		if err != nil {
			return err
		}
		if !moved {
			// Another worker, or operator, took it. An operator's action
			// did nothing: its audit row goes with the rollback.
			return errNotMoved
		}
		if to == model.PaymentRefunded {
			return nil
		}
		if _, err = tx.InsertRefund(ctx, f); err != nil {
			return err
		}
		enqueued = true
		return nil
	})
	if errors.Is(err, errNotMoved) {
		return false, nil
	}
	return enqueued, err
}

// errNotMoved rolls back a transaction whose compare-and-set found the
// row changed: nothing to do, nothing to record.
var errNotMoved = errors.New("compare-and-set found the row changed")

// Execute asks Alipay for one batch of due refunds and records what it
// learns. It returns how many ended REFUNDED.
func (r *Refunds) Execute(ctx context.Context) (int, error) {
	claimed, err := r.store.ClaimRefunds(ctx, r.now(), r.Lease, r.Batch)
	if err != nil {
		return 0, err
	}
	done := 0
	for _, f := range claimed {
		ok, err := r.execute(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				return done, err
			}
			// Claimed with a lease (and counted): it is tried again when
			// the lease ends, and the round goes on.
			r.log.Error("refund not recorded; retried when its lease ends", "out_request_no", f.OutRequestNo, "err", err)
			continue
		}
		if ok {
			done++
		}
	}
	return done, nil
}

// execute asks the provider that took the money to give f back.
func (r *Refunds) execute(ctx context.Context, f model.Refund) (bool, error) {
	gw, err := r.providers.app(f.Provider, f.Account, f.App)
	if err != nil {
		return false, r.unknown(ctx, f, err)
	}
	if f.Attempts > 1 {
		// The last ask may have refunded without our hearing: find out
		// by out_request_no before anything is sent again.
		refunded, err := gw.RefundDone(ctx, f.TradeNo, f.OutRequestNo, f.Amount)
		switch {
		case err == nil && refunded:
			return true, r.finish(ctx, f, model.RefundRefunded, "")
		case errors.Is(err, model.ErrRefundStuck):
			// Ended at the provider without the money going back
			// (WeChat Pay's ABNORMAL): never sent again; an operator
			// settles it.
			r.log.Error("refund ended at its provider without the money going back; an operator settles it", "provider", f.Provider,
				"out_request_no", f.OutRequestNo, "err", err)
			return false, r.finish(ctx, f, model.RefundFailed, err.Error())
		case err != nil:
			return false, r.unknown(ctx, f, err)
		}
	}
	err = gw.Refund(ctx, f.TradeNo, f.OutRequestNo, f.Amount, f.Reason)
	switch {
	case err == nil:
		return true, r.finish(ctx, f, model.RefundRefunded, "")
	case errors.Is(err, model.ErrGatewayUnknown):
		return false, r.unknown(ctx, f, err)
	}
	// A signed refusal (e.g. amount, trade state): asking again will not
	// change it. An operator has to look.
	r.log.Error("refund refused by its provider", "provider", f.Provider, "out_request_no", f.OutRequestNo, "err", err)
	return false, r.finish(ctx, f, model.RefundFailed, err.Error())
}

// unknown schedules another try after an answer we cannot trust: the next
// one queries first. It backs off to an hour, and past AlertAfter attempts
// every try is logged as an error for an operator.
func (r *Refunds) unknown(ctx context.Context, f model.Refund, cause error) error {
	level := slog.LevelWarn
	if f.Attempts >= r.AlertAfter {
		level = slog.LevelError
	}
	r.log.Log(ctx, level, "refund outcome unknown, will query then retry", "out_request_no", f.OutRequestNo, "attempts", f.Attempts, "err", cause)
	backoff := min(time.Second<<min(f.Attempts, 12), time.Hour)
	return r.store.RetryRefundAt(ctx, f.OutRequestNo, r.now().Add(backoff), cause.Error())
}

// finish records a refund's end, with its payment (for an automatic
// refund) and its event, in one transaction that locks the order first.
func (r *Refunds) finish(ctx context.Context, f model.Refund, to model.RefundState, reason string) error {
	if f.OrderID == 0 {
		return r.finishOrderless(ctx, f, to, reason)
	}
	finished := false
	err := r.store.UpdateOrder(ctx, dao.OrderID(f.OrderID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, order model.Order) error {
		finished = false
		moved, err := tx.FinishRefund(ctx, f.OutRequestNo, to, reason)
		if err != nil || !moved {
			return err // finished by another worker
		}
		if f.Kind == model.RefundAuto {
			pay, _ := refundEnd(to)
			if _, err := tx.SetPaymentState(ctx, f.Provider, f.TradeNo, model.PaymentRefunding, pay); err != nil {
				return err
			}
		}
		finished = true
		return r.announceEnd(ctx, tx, f, to, order.OrderSN)
	})
	return r.ended(err, finished, f, to)
}

// refundEnd is the payment state and the event a refund that ended in to
// leaves: REFUNDED and payment.refunded, or REFUND_FAILED and its failure.
func refundEnd(to model.RefundState) (model.PaymentState, model.EventType) {
	if to == model.RefundFailed {
		return model.PaymentRefundFailed, model.EventRefundFailed
	}
	return model.PaymentRefunded, model.EventRefunded
}

// eventWriter is a transaction that writes events: dao.OrderTx or
// dao.OrderlessTx.
type eventWriter interface {
	InsertEvents(ctx context.Context, events ...model.Event) error
}

// announceEnd writes, in tx, the event of f's end in state to.
func (r *Refunds) announceEnd(ctx context.Context, tx eventWriter, f model.Refund, to model.RefundState, orderSN string) error {
	_, typ := refundEnd(to)
	ev, err := refundEvent(typ, f, orderSN, r.now())
	if err != nil {
		return err
	}
	return tx.InsertEvents(ctx, ev)
}

// ended tells OnFinished of a refund this call finished (its transaction
// committed) and returns the transaction's error.
func (r *Refunds) ended(err error, finished bool, f model.Refund, to model.RefundState) error {
	if err == nil && finished && r.OnFinished != nil {
		r.OnFinished(f, to)
	}
	return err
}

// Request records an operator's refund of a paid order (after-sale, full
// or partial) under an idempotency key: the same key again returns the
// same refund; never more than was paid minus what was refunded. It is
// the admin API's: the refund is written to admin_audit in its
// transaction as model.OperatorAdminAPI's, with the reason as the note.
func (r *Refunds) Request(ctx context.Context, sn, key string, amount decimal.Decimal, reason string) (model.Refund, error) {
	return r.request(ctx, sn, key, amount, reason, nil)
}

// request is Request, recorded in admin_audit when an operator acts.
func (r *Refunds) request(ctx context.Context, sn, key string, amount decimal.Decimal, reason string, act *model.Act) (model.Refund, error) {
	if err := model.CheckIdempotencyKey(key); err != nil {
		return model.Refund{}, err
	}
	if !amount.IsPositive() || amount.Exponent() < -2 {
		return model.Refund{}, fmt.Errorf("%w: amount must be positive with at most 2 decimals", model.ErrInvalidRequest)
	}
	if utf8.RuneCountInString(reason) > model.MaxRefundReason {
		return model.Refund{}, fmt.Errorf("%w: reason: at most %d characters", model.ErrInvalidRequest, model.MaxRefundReason)
	}
	var out model.Refund
	err := r.store.UpdateOrder(ctx, dao.OrderSN(sn), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, order model.Order) error {
		no := afterSaleRequestNo(order.ID, key)
		if prev, err := tx.Refund(ctx, no); err == nil {
			if act != nil {
				return model.ErrAlreadyDone
			}
			if !prev.Amount.Equal(amount) {
				return model.ErrIdempotencyKeyReused
			}
			out = prev
			return nil
		} else if !errors.Is(err, model.ErrRefundNotFound) {
			return err
		}
		pays, err := tx.Payments(ctx)
		if err != nil {
			return err
		}
		refunds, err := tx.Refunds(ctx)
		if err != nil {
			return err
		}
		paid, left := refundable(order, pays, refunds)
		if paid == nil {
			return fmt.Errorf("%w: %q", model.ErrNothingToRefund, sn)
		}
		if amount.GreaterThan(left) {
			return fmt.Errorf("%w: %s asked, %s left of %s paid", model.ErrRefundTooLarge, amount.StringFixed(2), left.StringFixed(2), paid.Amount.StringFixed(2))
		}
		out = model.Refund{
			OutRequestNo: no, Kind: model.RefundAfterSale, Provider: paid.Provider, Account: paid.Account, App: paid.App, TradeNo: paid.TradeNo,
			OutTradeNo: paid.OutTradeNo, OrderID: order.ID, Amount: amount, Reason: reason,
			State: model.RefundRefunding, IdempotencyKey: key,
		}
		if _, err = tx.InsertRefund(ctx, out); err != nil {
			return err
		}
		// Through the admin API when no operator acts: recorded all the same.
		by := model.Act{Operator: model.OperatorAdminAPI, Key: apiKey(model.AuditOrderRefund, no), Note: reason}
		if act != nil {
			by = *act
		}
		return tx.InsertAudit(ctx, model.Audit{Key: by.Key, Operator: by.Operator, Action: model.AuditOrderRefund,
			OrderID: &order.ID, TargetKind: model.TargetRefund, TargetID: no,
			Before: fmt.Sprintf("%s left to refund of %s", left.StringFixed(2), paid.TradeNo),
			After:  fmt.Sprintf("%s %s", model.RefundRefunding, amount.StringFixed(2)), Note: by.Note})
	})
	return out, err
}

// Notified handles a refund notification (a TRADE_SUCCESS with refund_fee,
// or a TRADE_CLOSED after a full refund): it is never a payment. It only
// brings forward the worker's confirmation — by query — of the refund it
// names, if any.
func (r *Refunds) Notified(ctx context.Context, outRequestNo string) error {
	if outRequestNo == "" {
		return nil
	}
	// Only a refund still REFUNDING is touched; an unknown out_biz_no
	// (not ours, or finished) changes nothing.
	return r.store.RetryRefundAt(ctx, outRequestNo, r.now(), "refund notification received")
}
