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

// Order is an order `dev` seeds, matched by the forms in testdata/notify.
type Order struct {
	SN       string
	MemberID int64
	Amount   string
	Closed   bool
}

// Orders are the orders Seed places.
var Orders = []Order{
	{SN: "DEMO-1001", MemberID: 1, Amount: "100.00"},
	{SN: "DEMO-1002", MemberID: 1, Amount: "88.00"},
	{SN: "DEMO-1003", MemberID: 2, Amount: "59.90", Closed: true},
	{SN: "DEMO-1004", MemberID: 2, Amount: "0.01"},
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
	for _, d := range Orders {
		if _, err := store.Order(ctx, d.SN); err == nil {
			continue
		} else if !errors.Is(err, model.ErrOrderNotFound) {
			return err
		}
		o, err := store.CreateOrder(ctx, d.SN, d.MemberID, decimal.RequireFromString(d.Amount))
		if err != nil {
			return fmt.Errorf("seed %s: %w", d.SN, err)
		}
		if d.Closed {
			err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
				_, err := tx.CloseOrder(ctx)
				return err
			})
			if err != nil {
				return fmt.Errorf("seed %s: %w", d.SN, err)
			}
		}
	}
	return nil
}
