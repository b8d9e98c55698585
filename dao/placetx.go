package dao

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm/clause"

	"paynotify/model"
)

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
