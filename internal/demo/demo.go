// Package demo is the demo data paynotify dev seeds: a catalogue, members
// with points and coupons, and the orders the replay forms in
// testdata/notify pay. It writes through dao, like every other change.
package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/model"
)

// sku, the members and their coupons are the catalogue `dev` seeds for the
// order API: ids 1, 2, 3 in that order on a fresh database.
type sku struct {
	name  string
	price string
	stock int
}

var skus = []sku{
	{name: "Espresso beans 1kg", price: "89.00", stock: 100},
	{name: "Pour-over kettle", price: "259.00", stock: 5},
	{name: "Paper filters x100", price: "12.50", stock: 1000},
}

var members = []struct {
	name   string
	points int
	coupon string // an unused coupon of this amount, if set
}{
	{name: "alice", points: 5000, coupon: "20.00"},
	{name: "bob", points: 0, coupon: "5.00"},
}

// order is an order `dev` seeds, matched by the forms in testdata/notify:
// quantity of one demo SKU, less points (100 = 1 yuan), makes amount.
type order struct {
	sn       string
	memberID int64
	amount   string
	sku      int64 // skus[sku-1]
	quantity int
	points   int
	closed   bool
}

var orders = []order{
	{sn: "DEMO-1001", memberID: 1, amount: "100.00", sku: 3, quantity: 8},                           // 8 × 12.50
	{sn: "DEMO-1002", memberID: 1, amount: "88.00", sku: 1, quantity: 1, points: 100},               // 89.00 − 1.00
	{sn: "DEMO-1003", memberID: 2, amount: "59.90", sku: 3, quantity: 5, points: 260, closed: true}, // 62.50 − 2.60
	{sn: "DEMO-1004", memberID: 2, amount: "0.01", sku: 3, quantity: 1, points: 1249},               // 12.50 − 12.49
	// Paid in dev's second app of each provider (12_pay_mobile_demo_1005,
	// wechatpay/13_pay_second_app_demo_1006).
	{sn: "DEMO-1005", memberID: 1, amount: "25.00", sku: 3, quantity: 2}, // 2 × 12.50
	{sn: "DEMO-1006", memberID: 2, amount: "12.50", sku: 3, quantity: 1},
}

// Seed inserts the demo data on a fresh database: SKUs, members with
// points and coupons, and the orders the replay forms pay.
func Seed(ctx context.Context, store *dao.Store) error {
	if _, err := store.SKU(ctx, 1); err == nil {
		return nil // kept from the last run (-keep)
	}
	for _, s := range skus {
		if _, err := store.InsertSKU(ctx, s.name, decimal.RequireFromString(s.price), s.stock); err != nil {
			return fmt.Errorf("seed sku: %w", err)
		}
	}
	for _, m := range members {
		id, err := store.InsertMember(ctx, m.name, m.points)
		if err != nil {
			return fmt.Errorf("seed member: %w", err)
		}
		if m.coupon != "" {
			if _, err := store.InsertCoupon(ctx, id, decimal.RequireFromString(m.coupon)); err != nil {
				return fmt.Errorf("seed coupon: %w", err)
			}
		}
	}
	for _, d := range orders {
		if _, err := store.Order(ctx, d.sn); err == nil {
			continue
		} else if !errors.Is(err, model.ErrOrderNotFound) {
			return err
		}
		// With its line: the console shows what was bought and its total.
		price := decimal.RequireFromString(skus[d.sku-1].price)
		total := price.Mul(decimal.NewFromInt(int64(d.quantity)))
		var id int64
		_, err := store.PlaceOrder(ctx, model.OrderRequest{MemberID: d.memberID, IdempotencyKey: "seed-" + d.sn, RequestHash: "seed"},
			func(ctx context.Context, tx *dao.PlaceTx) error {
				var err error
				id, err = tx.InsertOrder(ctx, model.Order{OrderSN: d.sn, MemberID: d.memberID, PayAmount: decimal.RequireFromString(d.amount),
					TotalAmount: total, Integration: d.points, IntegrationAmount: total.Sub(decimal.RequireFromString(d.amount))})
				if err != nil {
					return err
				}
				return tx.InsertItems(ctx, id, d.sn, []model.OrderItem{{SKUID: d.sku, Quantity: d.quantity, Price: price}})
			})
		if err != nil {
			return fmt.Errorf("seed %s: %w", d.sn, err)
		}
		if d.closed {
			err := store.UpdateOrder(ctx, dao.OrderID(id), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
				_, err := tx.CloseOrder(ctx)
				return err
			})
			if err != nil {
				return fmt.Errorf("seed %s: %w", d.sn, err)
			}
		}
	}
	return nil
}
