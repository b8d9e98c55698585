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

// ErrInTx says a Store method, or a second entry point, was called with
// the context of a transaction in progress. Inside a transaction only the
// transaction's own methods may be used: the outer Store would run on
// another connection (on SQLite, waiting forever for the one the
// transaction holds) or take locks out of order.
var ErrInTx = errors.New("dao: the Store was used inside a transaction: use the transaction's own methods")

// ErrLockOrder says a transaction asked for a row out of the lock order.
var ErrLockOrder = errors.New("dao: lock order violated")

// maxTxAttempts bounds how often a deadlocked or lock-timed-out
// transaction runs inside one call before the caller is told to retry
// (model.ErrRetryable).
const maxTxAttempts = 3

// txKey marks a context as inside a transaction opened by an entry point.
type txKey struct{}

func inTx(ctx context.Context) bool { return ctx.Value(txKey{}) != nil }

// refuseInTx is a GORM callback run before every statement: a statement
// whose context is inside a transaction must run on that transaction.
// Anything else is the outer Store used from inside the callback.
func refuseInTx(db *gorm.DB) {
	if db.Statement.Context == nil || !inTx(db.Statement.Context) {
		return
	}
	if _, onTx := db.Statement.ConnPool.(gorm.TxCommitter); onTx {
		return
	}
	_ = db.AddError(ErrInTx)
}

// guardTx registers refuseInTx before every kind of statement.
func guardTx(db *gorm.DB) error {
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Query().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Update().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Delete().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Row().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Raw().Before("*").Register("dao:refuse_in_tx", refuseInTx),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// transact runs fn in one transaction — again on model.ErrRetryable, up to
// tries times, never past ctx's deadline — handing it a context marked as
// inside the transaction and a Store bound to it. fn's error rolls
// everything back; so does a failed commit. It is the only place a
// transaction begins: the exported entry points below wrap it.
func (s *Store) transact(ctx context.Context, tries int, fn func(ctx context.Context, tx *Store) error) error {
	if inTx(ctx) {
		return fmt.Errorf("%w (a transaction inside a transaction)", ErrInTx)
	}
	ctx = context.WithValue(ctx, txKey{}, true)
	var err error
	for attempt := 1; attempt <= tries; attempt++ {
		s.traced("BEGIN")
		err = mapErr(s.db.WithContext(ctx).Transaction(func(db *gorm.DB) error {
			return fn(ctx, &Store{db: db, driver: s.driver, ready: s.ready})
		}))
		if err == nil {
			s.traced("COMMIT")
		} else {
			s.traced("ROLLBACK")
		}
		if !errors.Is(err, model.ErrRetryable) || ctx.Err() != nil || attempt == tries {
			return err
		}
		// A short, growing pause lets the transaction we collided with finish.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		}
	}
	return err
}

func (s *Store) traced(sql string) {
	if s.trace != nil {
		s.trace(sql)
	}
}

// Lock is how an entry point locks the row it starts from.
type Lock int

const (
	// ForUpdate waits for the row (SELECT … FOR UPDATE).
	ForUpdate Lock = iota
	// ForUpdateSkipLocked takes the row only if no other transaction holds
	// it (FOR UPDATE SKIP LOCKED: MySQL 8, MariaDB 10.6+); a held row is
	// model.ErrOrderNotFound, as if absent — someone else is working on it.
	// SQLite, with one writer, never has a row held.
	ForUpdateSkipLocked
)

func (l Lock) clause() clause.Locking {
	if l == ForUpdateSkipLocked {
		return clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked}
	}
	return clause.Locking{Strength: clause.LockingStrengthUpdate}
}

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

// rank is a row's place in the lock order: request key → order row →
// the order's own rows (payments, attempts, refunds) → SKU rows in
// ascending id → coupon → member. Outbox rows are new rows, written at
// any point.
type rank int

const (
	rankOrderRows rank = iota
	rankSKU
	rankCoupon
	rankMember
)

var rankNames = [...]string{"the order's own rows", "SKU rows", "a coupon", "a member"}

// lockOrder refuses a step back in the lock order within one transaction.
type lockOrder struct{ at rank }

func (l *lockOrder) step(r rank) error {
	if r < l.at {
		return fmt.Errorf("%w: %s after %s", ErrLockOrder, rankNames[r], rankNames[l.at])
	}
	l.at = r
	return nil
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

// PlaceOrder is the one way to place an order. In one transaction it
// records request r (member, idempotency key, request hash) — the key is
// the first lock — and, if the key is new, runs fn with a PlaceTx to do
// the placing: lock SKUs, then the coupon, spend the member's points,
// insert the order, complete the request. If the key is recorded already,
// the insert waits for the transaction that recorded it, fn does not run,
// and PlaceOrder returns the request as it stands. A key held past the
// lock-wait timeout (the first request still in flight) is
// model.ErrRequestInFlight. Deadlocks retry as in UpdateOrder.
func (s *Store) PlaceOrder(ctx context.Context, r model.OrderRequest, fn func(ctx context.Context, tx *PlaceTx) error) (*model.OrderRequest, error) {
	var prev *model.OrderRequest
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		prev = nil
		inserted, err := tx.insertRequest(ctx, r)
		if errors.Is(err, model.ErrRetryable) {
			// The key's lock outlived our wait: the first is in flight.
			return fmt.Errorf("%w: %v", model.ErrRequestInFlight, err)
		}
		if err != nil {
			return err
		}
		if !inserted {
			got, err := tx.request(ctx, tx.db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), r.MemberID, r.IdempotencyKey)
			if err != nil {
				return err
			}
			prev = &got
			return nil
		}
		return fn(ctx, &PlaceTx{s: tx, req: r, skus: map[int64]bool{}})
	})
	return prev, err
}

// PlaceTx is the transaction of a new order request: it holds the
// request key and reaches SKU rows (locked in ascending id, once), then a
// coupon, then the member, and inserts the new order, its lines and its
// events. It is valid only inside the PlaceOrder callback that received
// it.
type PlaceTx struct {
	s      *Store
	req    model.OrderRequest
	skus   map[int64]bool // locked by SKUsForUpdate
	coupon int64          // locked by CouponForUpdate
	lockOrder
}

// SKUsForUpdate reads SKUs by id and locks them in ascending id order —
// the one order every transaction locks stock rows in. Missing ids are
// simply absent from the result. It may be called once per transaction.
func (tx *PlaceTx) SKUsForUpdate(ctx context.Context, ids []int64) ([]model.SKU, error) {
	if len(tx.skus) > 0 || tx.at > rankSKU {
		return nil, fmt.Errorf("%w: SKUs are locked once, first", ErrLockOrder)
	}
	tx.at = rankSKU
	var skus []model.SKU
	err := tx.s.db.WithContext(ctx).Table(skuTable).Select("id", "price", "stock", "lock_stock").
		Where("id IN ?", ids).Order("id").
		Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Find(&skus).Error
	for _, sku := range skus {
		tx.skus[sku.ID] = true
	}
	return skus, mapErr(err)
}

// ReserveStock reserves qty units of a SKU this transaction locked
// (compare-and-set: only if that many are unreserved). It reports whether
// it did.
func (tx *PlaceTx) ReserveStock(ctx context.Context, skuID int64, qty int) (bool, error) {
	if !tx.skus[skuID] {
		return false, fmt.Errorf("%w: sku %d reserved without SKUsForUpdate", ErrLockOrder, skuID)
	}
	return tx.s.reserveStock(ctx, skuID, qty)
}

// CouponForUpdate reads a coupon and locks it.
func (tx *PlaceTx) CouponForUpdate(ctx context.Context, id int64) (model.Coupon, error) {
	if err := tx.step(rankCoupon); err != nil {
		return model.Coupon{}, err
	}
	c, err := tx.s.couponForUpdate(ctx, id)
	if err == nil {
		tx.coupon = id
	}
	return c, err
}

// UseCoupon marks the coupon this transaction locked as used by an order
// (compare-and-set unused→used, and only the requesting member's own). It
// reports whether it did.
func (tx *PlaceTx) UseCoupon(ctx context.Context, id, orderID int64) (bool, error) {
	if id == 0 || id != tx.coupon {
		return false, fmt.Errorf("%w: coupon %d used without CouponForUpdate", ErrLockOrder, id)
	}
	return tx.s.useCoupon(ctx, id, tx.req.MemberID, orderID)
}

// SpendPoints deducts points from the requesting member (compare-and-set:
// never below zero). It reports whether it did.
func (tx *PlaceTx) SpendPoints(ctx context.Context, points int) (bool, error) {
	if err := tx.step(rankMember); err != nil {
		return false, err
	}
	return tx.s.spendPoints(ctx, tx.req.MemberID, points)
}

// InsertOrder inserts the new order, awaiting payment, and returns its id.
func (tx *PlaceTx) InsertOrder(ctx context.Context, o model.Order) (int64, error) {
	return tx.s.insertOrder(ctx, o)
}

// InsertItems inserts the new order's lines, in the order given.
func (tx *PlaceTx) InsertItems(ctx context.Context, orderID int64, sn string, items []model.OrderItem) error {
	return tx.s.insertItems(ctx, orderID, sn, items)
}

// InsertEvents writes events to the outbox.
func (tx *PlaceTx) InsertEvents(ctx context.Context, events ...model.Event) error {
	return tx.s.insertEvents(ctx, events...)
}

// CompleteRequest saves the answer of the request (PROCESSING → SUCCESS).
func (tx *PlaceTx) CompleteRequest(ctx context.Context, orderID int64, status int, response []byte) error {
	r := tx.req
	r.OrderID, r.ResponseStatus, r.Response = &orderID, status, response
	return tx.s.completeRequest(ctx, r)
}

// UpdateOutbox runs fn in one transaction over the outbox alone (the
// relay's claims and marks): it locks no order. Deadlocks retry as in
// UpdateOrder.
func (s *Store) UpdateOutbox(ctx context.Context, fn func(ctx context.Context, tx *OutboxTx) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		return fn(ctx, &OutboxTx{s: tx})
	})
}

// OutboxTx is a transaction over outbox rows only.
type OutboxTx struct{ s *Store }

// ClaimEvents: see Store.claimEvents.
func (tx *OutboxTx) ClaimEvents(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]model.OutboxRow, error) {
	return tx.s.claimEvents(ctx, now, lease, limit)
}

// InsertEvents writes events to the outbox.
func (tx *OutboxTx) InsertEvents(ctx context.Context, events ...model.Event) error {
	return tx.s.insertEvents(ctx, events...)
}

// MarkSent records that events were published and acknowledged.
func (tx *OutboxTx) MarkSent(ctx context.Context, seqs []int64, now time.Time) error {
	return tx.s.markSent(ctx, seqs, now)
}

// MarkFailed records a failed publication: one more attempt, the next one
// not before next, and FAILED once attempts reach failAfter.
func (tx *OutboxTx) MarkFailed(ctx context.Context, seq int64, attempts int, next time.Time, failAfter int, reason string) error {
	return tx.s.markFailed(ctx, seq, attempts, next, failAfter, reason)
}

// InsertAudit records the operator action this transaction does, with it.
func (tx *OutboxTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}

// UpdateSession runs fn in one transaction over console sessions and the
// audit trail: it locks no order. Deadlocks retry as in UpdateOrder.
func (s *Store) UpdateSession(ctx context.Context, fn func(ctx context.Context, tx *SessionTx) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		return fn(ctx, &SessionTx{s: tx})
	})
}

// SessionTx is a transaction over console sessions and admin_audit only.
type SessionTx struct{ s *Store }

// InsertSession records a signed-in operator's session (by the hash of its
// token) and drops sessions that have expired.
func (tx *SessionTx) InsertSession(ctx context.Context, ses model.Session) error {
	return tx.s.insertSession(ctx, ses)
}

// DeleteSession ends a session.
func (tx *SessionTx) DeleteSession(ctx context.Context, tokenHash string) error {
	return tx.s.deleteSession(ctx, tokenHash)
}

// InsertAudit records the operator action this transaction does, with it.
func (tx *SessionTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}

// UpdateJournal runs fn in one transaction over the consumer's
// de-duplication log and the journal: it locks no order. Deadlocks retry
// as in UpdateOrder.
func (s *Store) UpdateJournal(ctx context.Context, fn func(ctx context.Context, tx *JournalTx) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		return fn(ctx, &JournalTx{s: tx})
	})
}

// JournalTx is a transaction over idempotent_log and journal_entry only.
type JournalTx struct{ s *Store }

// RecordOnce inserts a business key into idempotent_log and reports
// whether it was new: a second delivery finds the key and does nothing.
func (tx *JournalTx) RecordOnce(ctx context.Context, businessKey string) (bool, error) {
	return tx.s.recordOnce(ctx, businessKey)
}

// InsertJournal writes journal lines.
func (tx *JournalTx) InsertJournal(ctx context.Context, lines []model.JournalLine) error {
	return tx.s.insertJournal(ctx, lines)
}
