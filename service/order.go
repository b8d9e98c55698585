package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/model"
)

// Orders places and cancels orders with exactly-once side effects: a
// retried request never creates a second order or spends twice, and a
// cancel never overwrites a payment.
//
// Lock order (with Payments): request key, then order row, then payment
// row, then SKU rows in ascending id, then coupon, then member. Placing
// locks no existing order, so it fits the same order.
type Orders struct {
	store *dao.Store
	now   func() time.Time
}

// NewOrders returns the order use cases over store.
func NewOrders(store *dao.Store) *Orders {
	return &Orders{store: store, now: time.Now}
}

// Placed is the answer to a "place order" request: first time or replayed.
type Placed struct {
	Status   int
	Body     json.RawMessage
	Replayed bool
}

// Place handles POST /api/v1/orders for a member and an idempotency key.
// The first request does everything in one transaction — record the key
// (the key is the lock), reserve stock, use the coupon, spend points,
// insert the order and its lines, save the answer — so any failure leaves
// nothing behind and a retry starts clean. A retry of a request that
// succeeded gets the saved answer and does nothing else.
func (o *Orders) Place(ctx context.Context, memberID int64, key string, req model.PlaceOrder) (Placed, error) {
	if err := model.CheckIdempotencyKey(key); err != nil {
		return Placed{}, err
	}
	req, err := req.Normalize()
	if err != nil {
		return Placed{}, err
	}
	hash := req.Hash()

	// A retry after success is answered from one plain read.
	r, err := o.store.Request(ctx, memberID, key)
	if err == nil {
		return replay(r, hash)
	}
	if !errors.Is(err, model.ErrRequestNotFound) {
		return Placed{}, err
	}

	if _, err := o.store.MemberPoints(ctx, memberID); err != nil {
		return Placed{}, err
	}
	var placed Placed
	prev, err := o.store.PlaceOrder(ctx, model.OrderRequest{MemberID: memberID, IdempotencyKey: key, RequestHash: hash},
		func(ctx context.Context, tx *dao.PlaceTx) error {
			var err error
			placed, err = o.place(ctx, tx, memberID, req)
			return err
		})
	if err != nil {
		return Placed{}, err
	}
	if prev != nil {
		// The key was recorded first by another request (PlaceOrder waited
		// for it to commit): answer as it did.
		return replay(*prev, hash)
	}
	return placed, nil
}

// place does the work of a first request, inside its transaction.
func (o *Orders) place(ctx context.Context, tx *dao.PlaceTx, memberID int64, req model.PlaceOrder) (Placed, error) {
	items, err := lockItems(ctx, tx, req.Items)
	if err != nil {
		return Placed{}, err
	}
	coupon, couponID, err := lockCoupon(ctx, tx, memberID, req.CouponID)
	if err != nil {
		return Placed{}, err
	}
	price := model.PriceOrder(items, coupon, req.UseIntegration)

	order := model.Order{
		OrderSN: newOrderSN(o.now()), MemberID: memberID, PayAmount: price.Pay, Status: model.OrderAwaitingPayment,
		TotalAmount: price.Total, CouponID: couponID, CouponAmount: price.CouponAmount,
		Integration: price.Integration, IntegrationAmount: price.IntegrationAmount,
		StockReservation: model.FormatReservation(items),
		CreateTime:       o.now().UTC().Truncate(time.Millisecond),
	}
	if order.ID, err = tx.InsertOrder(ctx, order); err != nil {
		return Placed{}, err
	}
	if err := spend(ctx, tx, order.ID, items, couponID, price.Integration); err != nil {
		return Placed{}, err
	}
	if err := tx.InsertItems(ctx, order.ID, order.OrderSN, items); err != nil {
		return Placed{}, err
	}
	ev, err := orderEvent(model.EventOrderCreated, order, "", o.now())
	if err != nil {
		return Placed{}, err
	}
	if err := tx.InsertEvents(ctx, ev); err != nil {
		return Placed{}, err
	}

	body, err := json.Marshal(newOrderView(order, items, nil))
	if err != nil {
		return Placed{}, err
	}
	if err := tx.CompleteRequest(ctx, order.ID, http.StatusCreated, body); err != nil {
		return Placed{}, err
	}
	return Placed{Status: http.StatusCreated, Body: body}, nil
}

// lockItems locks the ordered SKUs (in ascending id: the stock lock
// order) and prices the items, refusing a SKU unknown or short of stock.
func lockItems(ctx context.Context, tx *dao.PlaceTx, ordered []model.ItemRequest) ([]model.OrderItem, error) {
	ids := make([]int64, len(ordered))
	for i, it := range ordered {
		ids[i] = it.SKUID
	}
	skus, err := tx.SKUsForUpdate(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]model.SKU, len(skus))
	for _, s := range skus {
		byID[s.ID] = s
	}
	items := make([]model.OrderItem, len(ordered))
	for i, it := range ordered {
		sku, ok := byID[it.SKUID]
		if !ok {
			return nil, fmt.Errorf("%w: sku %d", model.ErrSKUNotFound, it.SKUID)
		}
		if sku.Available() < it.Quantity {
			return nil, fmt.Errorf("%w: sku %d has %d available, %d ordered", model.ErrOutOfStock, it.SKUID, max(sku.Available(), 0), it.Quantity)
		}
		items[i] = model.OrderItem{SKUID: it.SKUID, Quantity: it.Quantity, Price: sku.Price}
	}
	return items, nil
}

// lockCoupon locks the member's coupon id (none: 0) and says what it
// takes off, refusing one that is another member's or used.
func lockCoupon(ctx context.Context, tx *dao.PlaceTx, memberID, id int64) (decimal.Decimal, *int64, error) {
	if id == 0 {
		return decimal.Zero, nil, nil
	}
	c, err := tx.CouponForUpdate(ctx, id)
	if err != nil {
		return decimal.Zero, nil, err
	}
	if c.MemberID != memberID || c.UseStatus != model.CouponUnused {
		return decimal.Zero, nil, fmt.Errorf("%w: coupon %d", model.ErrCouponUnusable, id)
	}
	return c.Amount, &c.ID, nil
}

// spend takes what the order uses, each by compare-and-set even though the
// rows are locked and checked — the statement, not our arithmetic, is what
// cannot oversell: the items' stock, the coupon (if any) and the points.
func spend(ctx context.Context, tx *dao.PlaceTx, orderID int64, items []model.OrderItem, couponID *int64, points int) error {
	for _, it := range items {
		ok, err := tx.ReserveStock(ctx, it.SKUID, it.Quantity)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: sku %d", model.ErrOutOfStock, it.SKUID)
		}
	}
	if couponID != nil {
		ok, err := tx.UseCoupon(ctx, *couponID, orderID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: coupon %d", model.ErrCouponUnusable, *couponID)
		}
	}
	if points > 0 {
		ok, err := tx.SpendPoints(ctx, points)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %d needed", model.ErrInsufficientPoints, points)
		}
	}
	return nil
}

// replay answers a request whose key is already recorded.
func replay(r model.OrderRequest, hash string) (Placed, error) {
	if r.RequestHash != hash {
		return Placed{}, model.ErrIdempotencyKeyReused
	}
	if r.State != model.RequestSuccess {
		return Placed{}, model.ErrRequestInFlight
	}
	return Placed{Status: r.ResponseStatus, Body: r.Response, Replayed: true}, nil
}

// newOrderSN makes an order number: UTC time to the second and 8 random
// hex digits (the unique index is the final word).
func newOrderSN(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102150405") + hex.EncodeToString(b[:])
}

// Get returns a member's own order with its lines and payments; another
// member's order is model.ErrOrderNotFound.
func (o *Orders) Get(ctx context.Context, memberID int64, sn string) (OrderView, error) {
	order, err := o.store.Order(ctx, sn)
	if err != nil {
		return OrderView{}, err
	}
	if order.MemberID != memberID {
		return OrderView{}, fmt.Errorf("%w: %q", model.ErrOrderNotFound, sn)
	}
	items, err := o.store.OrderItems(ctx, order.ID)
	if err != nil {
		return OrderView{}, err
	}
	pays, err := o.store.PaymentsByOrder(ctx, order.ID)
	if err != nil {
		return OrderView{}, err
	}
	return newOrderView(order, items, pays), nil
}

// RequestStatus says where a member's request with key stands: SUCCESS
// (with the saved answer), PROCESSING (another transaction holds the key
// right now), or UNKNOWN (nothing committed is visible: retry with the
// same key).
func (o *Orders) RequestStatus(ctx context.Context, memberID int64, key string) (model.RequestState, json.RawMessage, error) {
	if !model.ValidIdempotencyKey(key) {
		return "", nil, fmt.Errorf("%w: idempotency key must be 1 to 64 visible ASCII characters", model.ErrInvalidRequest)
	}
	r, err := o.store.Request(ctx, memberID, key)
	if err == nil {
		return r.State, r.Response, nil
	}
	if !errors.Is(err, model.ErrRequestNotFound) {
		return "", nil, err
	}
	_, err = o.store.RequestForUpdateNoWait(ctx, memberID, key)
	switch {
	case errors.Is(err, model.ErrRetryable):
		return model.RequestProcessing, nil, nil
	case err == nil:
		// Committed between our two reads.
		r, err := o.store.Request(ctx, memberID, key)
		return r.State, r.Response, err
	case errors.Is(err, model.ErrRequestNotFound):
		return model.RequestUnknown, nil, nil
	}
	return "", nil, err
}

// Cancel closes a member's unpaid order and gives back what placing it
// took — stock reservation, coupon, points — once. Cancelling a closed
// order again answers the same and changes nothing; a paid order is
// model.ErrOrderNotCancellable.
func (o *Orders) Cancel(ctx context.Context, memberID int64, sn string) (OrderView, error) {
	var view OrderView
	err := o.store.UpdateOrder(ctx, dao.OrderSN(sn), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, order model.Order) error {
		if order.MemberID != memberID {
			return fmt.Errorf("%w: %q", model.ErrOrderNotFound, sn)
		}
		switch order.Status {
		case model.OrderClosed:
		case model.OrderAwaitingPayment:
			if err := closeLocked(ctx, tx, order, closeCancelled, o.now()); err != nil {
				return err
			}
			order.Status = model.OrderClosed
		default:
			return fmt.Errorf("%w: %q is %s", model.ErrOrderNotCancellable, sn, order.Status)
		}
		items, err := tx.Items(ctx)
		if err != nil {
			return err
		}
		pays, err := tx.Payments(ctx)
		if err != nil {
			return err
		}
		view = newOrderView(order, items, pays)
		return nil
	})
	return view, err
}

// closeLocked moves an order the caller holds locked from awaiting payment
// to closed, announces it (order.closed), and gives back its reservation,
// coupon and points. Only the compare-and-set 0→4 lets it run, so it runs
// once per order.
func closeLocked(ctx context.Context, tx *dao.OrderTx, order model.Order, reason string, now time.Time) error {
	closed, err := tx.CloseOrder(ctx)
	if err != nil {
		return err
	}
	if !closed {
		return fmt.Errorf("%w: order %d is not awaiting payment", model.ErrStateChanged, order.ID)
	}
	order.Status = model.OrderClosed
	ev, err := orderEvent(model.EventOrderClosed, order, reason, now)
	if err != nil {
		return err
	}
	if err := tx.InsertEvents(ctx, ev); err != nil {
		return err
	}
	if err := tx.ReleaseReservation(ctx); err != nil {
		return err
	}
	if err := tx.ReturnCoupon(ctx); err != nil {
		return err
	}
	return tx.ReturnPoints(ctx)
}
