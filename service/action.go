package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Operators' actions from the console. Each is idempotent (the form's
// one-time key is recorded with it, first, under a unique key: the same
// form posted twice is model.ErrAlreadyDone the second time), goes through
// the transaction entry points like every other change (the order locked
// first), and writes its admin_audit row in that transaction — which a
// refused change rolls back with it.

// apiKey is the admin_audit key of a change made through the JSON admin
// API, which has no form key: derived from what the change is (an action
// on a row that happens once, e.g. the refund a key created), so the same
// change recorded twice would be refused by the table's unique key.
func apiKey(action model.AuditAction, parts ...string) string {
	sum := sha256.Sum256([]byte(string(action) + "\x00" + strings.Join(parts, "\x00")))
	return "api-" + hex.EncodeToString(sum[:20])
}

func checkAct(act model.Act, noteRequired bool) error {
	if act.Operator == "" || !model.ValidActKey(act.Key) {
		return fmt.Errorf("%w: an action needs an operator and a one-time key", model.ErrInvalidRequest)
	}
	if err := model.CheckNote(act.Note); err != nil {
		return err
	}
	if noteRequired && strings.TrimSpace(act.Note) == "" {
		return fmt.Errorf("%w: say why in the note", model.ErrInvalidRequest)
	}
	return nil
}

// Retry sends a failed refund to Alipay again: REFUND_FAILED → REFUNDING
// (and its payment REFUND_FAILED → REFUNDING, for an automatic refund),
// attempts from zero, due at once. The out_request_no is the same, so
// Alipay refunds it at most once whatever happened before.
func (r *Refunds) Retry(ctx context.Context, act model.Act, outRequestNo string) (model.Refund, error) {
	if err := checkAct(act, false); err != nil {
		return model.Refund{}, err
	}
	return r.act(ctx, act, outRequestNo, model.AuditRefundRetry, string(model.RefundRefunding),
		func(ctx context.Context, tx refundTx, f model.Refund) error {
			if tx, ok := tx.(*dao.OrderTx); ok {
				if err := withinPaid(ctx, tx, f); err != nil {
					return err
				}
			}
			moved, err := tx.RetryRefund(ctx, f.OutRequestNo, act.Operator, r.now())
			if err != nil || !moved {
				return notActionable(err, "refund %s is %s, not an unresolved failure", f.OutRequestNo, f.State)
			}
			if f.Kind != model.RefundAuto {
				return nil
			}
			switch tx := tx.(type) {
			case *dao.OrderTx:
				_, err = tx.SetPaymentState(ctx, f.Provider, f.TradeNo, model.PaymentRefundFailed, model.PaymentRefunding)
			case *dao.OrderlessTx:
				_, err = tx.SetPaymentState(ctx, model.PaymentRefundFailed, model.PaymentRefunding)
			}
			return err
		})
}

// Resolve takes a failed refund off the queue with a note saying how it
// was settled (paid back another way, or left on purpose). The refund
// stays REFUND_FAILED: Alipay did not refund it.
func (r *Refunds) Resolve(ctx context.Context, act model.Act, outRequestNo string) (model.Refund, error) {
	if err := checkAct(act, true); err != nil {
		return model.Refund{}, err
	}
	return r.act(ctx, act, outRequestNo, model.AuditRefundResolve, string(model.RefundFailed)+" (resolved)",
		func(ctx context.Context, tx refundTx, f model.Refund) error {
			moved, err := tx.ResolveRefund(ctx, f.OutRequestNo, act.Operator, act.Note, r.now())
			if err != nil || !moved {
				return notActionable(err, "refund %s is %s, not an unresolved failure", f.OutRequestNo, f.State)
			}
			return nil
		})
}

// withinPaid refuses to send failed refund f again when its trade's
// other refunds, not failed, leave less than f of what was paid (a
// replacement refund made since): model.ErrRefundTooLarge. A payment
// without an order has one refund, so only an order's are checked.
func withinPaid(ctx context.Context, tx *dao.OrderTx, f model.Refund) error {
	pays, err := tx.Payments(ctx)
	if err != nil {
		return err
	}
	refunds, err := tx.Refunds(ctx)
	if err != nil {
		return err
	}
	for _, p := range pays {
		if p.Provider != f.Provider || p.TradeNo != f.TradeNo {
			continue
		}
		if left := leftOf(p, refunds); f.Amount.GreaterThan(left) {
			return fmt.Errorf("%w: refund %s of %s again, with %s left of %s paid", model.ErrRefundTooLarge,
				f.OutRequestNo, f.Amount.StringFixed(2), left.StringFixed(2), p.Amount.StringFixed(2))
		}
	}
	return nil
}

// refundTx is what an operator's change to a refund needs of the
// transaction that holds it: its order's (dao.OrderTx) or, for a refund
// of a payment without an order (UNMATCHED), its payment's
// (dao.OrderlessTx).
type refundTx interface {
	Refund(ctx context.Context, outRequestNo string) (model.Refund, error)
	InsertAudit(ctx context.Context, a model.Audit) error
	RetryRefund(ctx context.Context, outRequestNo, operator string, now time.Time) (bool, error)
	ResolveRefund(ctx context.Context, outRequestNo, operator, note string, now time.Time) (bool, error)
}

// act runs an operator's change to one refund in a transaction that locks
// its order first — its payment, when it has none — and records it there
// (first: a second post of the same form is model.ErrAlreadyDone before
// anything else happens).
func (r *Refunds) act(ctx context.Context, act model.Act, outRequestNo string, action model.AuditAction, after string,
	change func(ctx context.Context, tx refundTx, f model.Refund) error) (model.Refund, error) {
	if !model.ValidID(outRequestNo) {
		return model.Refund{}, model.ErrRefundNotFound
	}
	first, err := r.store.Refund(ctx, outRequestNo)
	if err != nil {
		return model.Refund{}, err
	}
	var out model.Refund
	in := func(ctx context.Context, tx refundTx) error {
		f, err := tx.Refund(ctx, outRequestNo) // as it stands under the lock
		if err != nil {
			return err
		}
		before := string(f.State)
		if f.LastError != "" {
			before += ": " + f.LastError
		}
		a := model.Audit{Key: act.Key, Operator: act.Operator, Action: action, TargetKind: model.TargetRefund,
			TargetID: f.OutRequestNo, Before: before, After: after, Note: act.Note}
		if f.OrderID != 0 {
			a.OrderID = &f.OrderID
		}
		if err := tx.InsertAudit(ctx, a); err != nil {
			return err
		}
		if err := change(ctx, tx, f); err != nil {
			return err
		}
		out, err = tx.Refund(ctx, outRequestNo)
		return err
	}
	if first.OrderID == 0 {
		err = r.store.UpdateOrderless(ctx, first.Provider, first.TradeNo, func(ctx context.Context, tx *dao.OrderlessTx, _ model.Payment) error {
			return in(ctx, tx)
		})
	} else {
		err = r.store.UpdateOrder(ctx, dao.OrderID(first.OrderID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			return in(ctx, tx)
		})
	}
	return out, err
}

// RequestAs is Request by a console operator: the form's one-time key is
// the idempotency key, the note is the reason, and the refund is recorded
// in admin_audit in its transaction. The same caps apply: never more than
// was paid minus what was refunded.
func (r *Refunds) RequestAs(ctx context.Context, act model.Act, sn string, amount string) (model.Refund, error) {
	if err := checkAct(act, false); err != nil {
		return model.Refund{}, err
	}
	amt, err := model.ParseAmount(amount)
	if err != nil {
		return model.Refund{}, fmt.Errorf("%w: amount %q: a positive number with at most 2 decimals", model.ErrInvalidRequest, amount)
	}
	return r.request(ctx, sn, act.Key, amt, act.Note, &act)
}

// notActionable is err, or model.ErrNotActionable with a message when a
// compare-and-set found the row in another state.
func notActionable(err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: "+format, append([]any{model.ErrNotActionable}, args...)...)
}

// RefundPayment refunds a payment owed back (REFUND_PENDING) now, in full,
// rather than on the worker's next round: the same step the worker takes
// (payment → REFUNDING, its refund recorded under the out_request_no the
// worker would use), so the two never refund it twice.
func (r *Refunds) RefundPayment(ctx context.Context, act model.Act, provider model.Provider, tradeNo string) (model.Refund, error) {
	if err := checkAct(act, false); err != nil {
		return model.Refund{}, err
	}
	if !model.ValidID(tradeNo) {
		return model.Refund{}, model.ErrPaymentNotFound
	}
	p, err := r.store.Payment(ctx, provider, tradeNo)
	if err != nil {
		return model.Refund{}, err
	}
	enqueued, err := r.enqueue(ctx, p, &act)
	if err != nil {
		return model.Refund{}, err
	}
	if !enqueued {
		return model.Refund{}, fmt.Errorf("%w: payment %s is not owed back (its refund may be under way already)", model.ErrNotActionable, tradeNo)
	}
	return r.store.Refund(ctx, autoRequestNo(p))
}

// ResolveItemAs records that an operator looked at a reconciliation item
// and why it needs nothing more (the note), once, with its admin_audit row
// in the same transaction. The item must be of r's provider (its order is
// found by r's provider's trade_no): another provider's is
// model.ErrNotActionable, and nothing is recorded.
func (r *BillReconciler) ResolveItemAs(ctx context.Context, act model.Act, id int64) (model.ReconItem, error) {
	if err := checkAct(act, true); err != nil {
		return model.ReconItem{}, err
	}
	row, err := r.store.ReconItem(ctx, id)
	if err != nil {
		return model.ReconItem{}, err
	}
	if row.Provider != r.Provider {
		return model.ReconItem{}, fmt.Errorf("%w: item %d is of %s's reconciliation, not %s's", model.ErrNotActionable, id, row.Provider.Name(), r.Provider.Name())
	}
	return r.resolveItem(ctx, row, act, act.Operator, "resolved", false)
}

// resolveItem resolves row's item as by (who resolved_by names) with
// by's note, writing the admin_audit row by acts under in the item's
// transaction, first. An item resolved already is model.ErrNotActionable,
// or — firstStands — the item as the first resolution left it, with
// nothing recorded.
func (r *BillReconciler) resolveItem(ctx context.Context, row model.ReconRow, act model.Act, by, after string, firstStands bool) (model.ReconItem, error) {
	// The order the item is about, if any, so its timeline shows the action.
	var orderID *int64
	if row.TradeNo != "" {
		if p, err := r.store.Payment(ctx, r.Provider, row.TradeNo); err == nil && p.OrderID != 0 {
			orderID = &p.OrderID
		}
	}
	id := row.ID
	err := r.store.UpdateReconItem(ctx, id, func(ctx context.Context, tx *dao.ReconItemTx, it model.ReconItem) error {
		if it.ResolvedAt != nil && firstStands {
			return nil
		}
		if err := tx.InsertAudit(ctx, model.Audit{Key: act.Key, Operator: act.Operator, Action: model.AuditReconResolve, OrderID: orderID,
			TargetKind: model.TargetReconItem, TargetID: strconv.FormatInt(id, 10),
			Before: fmt.Sprintf("%s of %s, open", it.Outcome, row.BillDate), After: after, Note: act.Note}); err != nil {
			return err
		}
		moved, err := tx.Resolve(ctx, by, act.Note, r.now())
		if err != nil || !moved {
			return notActionable(err, "item %d is resolved already", id)
		}
		return nil
	})
	if err != nil {
		return model.ReconItem{}, err
	}
	row, err = r.store.ReconItem(ctx, id)
	return row.ReconItem, err
}
