package dao

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

// OrderKey names the order UpdateOrder locks: OrderID or OrderSN.
type OrderKey struct {
	id int64
	sn string
}

// OrderID names an order by its id.
func OrderID(id int64) OrderKey { return OrderKey{id: id} }

// OrderSN names an order by its order_sn.
func OrderSN(sn string) OrderKey { return OrderKey{sn: sn} }

func (k OrderKey) String() string {
	if k.sn != "" || k.id == 0 {
		return fmt.Sprintf("%q", k.sn)
	}
	return fmt.Sprintf("id %d", k.id)
}

// UpdateOrder is the one way to change an order and what hangs off it. In
// one transaction it locks the order row (lock: ForUpdate, or
// ForUpdateSkipLocked for a job claiming work) and runs fn with the order
// as locked and an OrderTx that reaches only the rows that come after the
// order in the lock order. fn's error rolls everything back. A deadlock or
// lock-wait timeout runs the whole transaction again (fn included, so fn
// must set its results afresh each run), a bounded number of times within
// ctx's deadline, then is model.ErrRetryable. An absent order is
// model.ErrOrderNotFound and fn does not run.
//
// fn must use the ctx it is given: with it, the outer Store refuses to
// work (ErrInTx) instead of deadlocking against the transaction.
func (s *Store) UpdateOrder(ctx context.Context, key OrderKey, lock Lock, fn func(ctx context.Context, tx *OrderTx, o model.Order) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		o, err := tx.orderLocked(ctx, key, lock)
		if err != nil {
			return err
		}
		return fn(ctx, &OrderTx{s: tx, order: o}, o)
	})
}

// orderLocked reads an order and locks its row until the transaction
// ends (SQLite locks the whole database at BEGIN IMMEDIATE instead).
func (s *Store) orderLocked(ctx context.Context, key OrderKey, lock Lock) (model.Order, error) {
	var o model.Order
	q := s.db.WithContext(ctx).Table(orderTable).Select(orderColumns)
	if key.sn != "" || key.id == 0 {
		q = q.Where("order_sn = ?", key.sn)
	} else {
		q = q.Where("id = ?", key.id)
	}
	err := q.Clauses(lock.clause()).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || matchesNothing(err) {
		if lock == ForUpdateSkipLocked {
			return o, fmt.Errorf("%w: order %s (absent or held)", model.ErrOrderNotFound, key)
		}
		return o, fmt.Errorf("%w: %s", model.ErrOrderNotFound, key)
	}
	return o, mapErr(err)
}

// OrderTx is a transaction that holds one order's row lock. It reaches
// that order's payments, attempts and refunds, then its stock
// reservation's SKU rows, its coupon and its member — in that order
// (a step back is ErrLockOrder) — and the outbox. Nothing on it locks
// another order. It is valid only inside the UpdateOrder callback that
// received it.
type OrderTx struct {
	s     *Store
	order model.Order
	lockOrder
}

// MarkOrderPaid moves the order from awaiting payment to paid with payType
// (compare-and-set 0→1). Finding it in another state is
// model.ErrStateChanged.
func (tx *OrderTx) MarkOrderPaid(ctx context.Context, payType model.PayType, paidAt time.Time) error {
	return tx.s.markOrderPaid(ctx, tx.order.ID, payType, paidAt)
}

// CloseOrder moves the order from awaiting payment to closed
// (compare-and-set 0→4) and reports whether it did.
func (tx *OrderTx) CloseOrder(ctx context.Context) (bool, error) {
	return tx.s.closeOrder(ctx, tx.order.ID)
}

// Items lists the order's lines (no lock: lines never change).
func (tx *OrderTx) Items(ctx context.Context) ([]model.OrderItem, error) {
	return tx.s.OrderItems(ctx, tx.order.ID)
}

// Payments lists the order's payments, oldest first, without locking.
func (tx *OrderTx) Payments(ctx context.Context) ([]model.Payment, error) {
	return tx.s.PaymentsByOrder(ctx, tx.order.ID)
}

// InsertPayment records a payment of this order unless one with the same
// (provider, trade_no) exists, and reports whether it inserted (see
// Store.insertPayment).
func (tx *OrderTx) InsertPayment(ctx context.Context, p model.Payment) (bool, error) {
	if err := tx.own(p.OrderID); err != nil {
		return false, err
	}
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.insertPayment(ctx, p)
}

// PaymentForUpdate reads a payment and locks its row. The trade may be
// recorded under another order (a conflict): the row is read to report
// it, and no other order is locked.
func (tx *OrderTx) PaymentForUpdate(ctx context.Context, provider model.Provider, tradeNo string) (model.Payment, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return model.Payment{}, err
	}
	return tx.s.payment(ctx, tx.s.db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), provider, tradeNo)
}

// SetPaymentState moves one of the order's payments between states
// (compare-and-set) and reports whether it did.
func (tx *OrderTx) SetPaymentState(ctx context.Context, provider model.Provider, tradeNo string, from, to model.PaymentState) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.setPaymentState(ctx, tx.order.ID, provider, tradeNo, from, to)
}

// InsertAttempt records a new payment attempt of the order and reports
// whether it did: false means (order_id, attempt_no) or out_trade_no
// exists — another request created it first.
func (tx *OrderTx) InsertAttempt(ctx context.Context, a model.PayAttempt) (bool, error) {
	if err := tx.own(a.OrderID); err != nil {
		return false, err
	}
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.insertAttempt(ctx, a)
}

// MarkAttemptPaid moves the order's attempt with this out_trade_no, if
// any, to PAID (from OPEN, or from CLOSED: a trade closed before the buyer
// opened it can still be paid).
func (tx *OrderTx) MarkAttemptPaid(ctx context.Context, outTradeNo string) error {
	if err := tx.step(rankOrderRows); err != nil {
		return err
	}
	return tx.s.markAttemptPaid(ctx, tx.order.ID, outTradeNo)
}

// SetAttemptState moves one of the order's attempts from one state to
// another (compare-and-set) and reports whether it did.
func (tx *OrderTx) SetAttemptState(ctx context.Context, id int64, from, to model.AttemptState) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.setAttemptState(ctx, tx.order.ID, id, from, to)
}

// Refund reads one of the order's refunds without locking.
func (tx *OrderTx) Refund(ctx context.Context, outRequestNo string) (model.Refund, error) {
	f, err := tx.s.Refund(ctx, outRequestNo)
	if err == nil && f.OrderID != tx.order.ID {
		return model.Refund{}, fmt.Errorf("%w: %q is not a refund of order %d", model.ErrRefundNotFound, outRequestNo, tx.order.ID)
	}
	return f, err
}

// Refunds lists the order's refunds, oldest first, without locking.
func (tx *OrderTx) Refunds(ctx context.Context) ([]model.Refund, error) {
	return tx.s.RefundsByOrder(ctx, tx.order.ID)
}

// InsertRefund records a refund of the order unless its out_request_no
// exists, and reports whether it did.
func (tx *OrderTx) InsertRefund(ctx context.Context, f model.Refund) (bool, error) {
	if err := tx.own(f.OrderID); err != nil {
		return false, err
	}
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.insertRefund(ctx, f)
}

// FinishRefund moves one of the order's refunds from REFUNDING to its end
// state (compare-and-set) and reports whether it did.
func (tx *OrderTx) FinishRefund(ctx context.Context, outRequestNo string, to model.RefundState, lastError string) (bool, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return false, err
	}
	return tx.s.finishRefund(ctx, tx.order.ID, outRequestNo, to, lastError)
}

// SellReservation turns the order's stock reservation into a sale (stock
// and lock_stock both drop by each quantity; SKU rows locked in ascending
// id). Call it only after the 0→1 compare-and-set, so it runs once.
func (tx *OrderTx) SellReservation(ctx context.Context) error {
	if err := tx.step(rankSKU); err != nil {
		return err
	}
	return tx.s.adjustReservation(ctx, tx.order, true)
}

// ReleaseReservation gives the order's stock reservation back (lock_stock
// drops by each quantity). Call it only after the 0→4 compare-and-set.
func (tx *OrderTx) ReleaseReservation(ctx context.Context) error {
	if err := tx.step(rankSKU); err != nil {
		return err
	}
	return tx.s.adjustReservation(ctx, tx.order, false)
}

// ReturnCoupon gives back the coupon the order used, if any
// (compare-and-set used→unused, only if this order used it).
func (tx *OrderTx) ReturnCoupon(ctx context.Context) error {
	if tx.order.CouponID == nil {
		return nil
	}
	if err := tx.step(rankCoupon); err != nil {
		return err
	}
	return tx.s.returnCoupon(ctx, *tx.order.CouponID, tx.order.ID)
}

// ReturnPoints gives the points the order spent, if any, back to its
// member.
func (tx *OrderTx) ReturnPoints(ctx context.Context) error {
	if tx.order.Integration <= 0 {
		return nil
	}
	if err := tx.step(rankMember); err != nil {
		return err
	}
	return tx.s.returnPoints(ctx, tx.order.MemberID, tx.order.Integration)
}

// InsertEvents writes events to the outbox: they commit, or vanish, with
// the change they announce.
func (tx *OrderTx) InsertEvents(ctx context.Context, events ...model.Event) error {
	return tx.s.insertEvents(ctx, events...)
}

// InsertAudit records the operator action this transaction does, with it
// (see Store.insertAudit).
func (tx *OrderTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}

// own refuses a row that names another order.
func (tx *OrderTx) own(orderID int64) error {
	if orderID != tx.order.ID {
		return fmt.Errorf("%w: a row of order %d in the transaction of order %d", ErrLockOrder, orderID, tx.order.ID)
	}
	return nil
}
