package dao_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// UpdateOrders holds the orders it locked and nothing else: another
// order's payment, a step back from stock to payments, SKUs locked twice
// and the outer Store all fail, and nothing is left behind.
func TestUpdateOrdersLockOrder(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		var held []int64
		for _, sn := range []string{"GROUP-A", "GROUP-B"} {
			o, err := store.CreateOrder(ctx, sn, 7, decimal.RequireFromString("1.00"))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, o.ID)
		}
		other, err := store.CreateOrder(ctx, "GROUP-OTHER", 7, decimal.RequireFromString("1.00"))
		if err != nil {
			t.Fatal(err)
		}
		payment := func(orderID int64, tradeNo string) model.Payment {
			now := time.Now().UTC().Truncate(time.Second)
			return model.Payment{Provider: model.ProviderAlipay, TradeNo: tradeNo, OrderID: orderID, OutTradeNo: "GROUP-A",
				Amount: decimal.RequireFromString("1.00"), State: model.PaymentApplied, PaidAt: &now}
		}
		cases := []struct {
			name string
			want error
			fn   func(ctx context.Context, tx *dao.OrdersTx) error
		}{
			{"AnotherOrdersPayment", dao.ErrLockOrder, func(ctx context.Context, tx *dao.OrdersTx) error {
				_, err := tx.InsertPayments(ctx, []model.Payment{payment(held[0], "T-G-1"), payment(other.ID, "T-G-2")})
				return err
			}},
			{"AnotherOrderPaid", dao.ErrLockOrder, func(ctx context.Context, tx *dao.OrdersTx) error {
				return tx.MarkOrdersPaid(ctx, map[int64]time.Time{other.ID: time.Now()})
			}},
			{"PaymentAfterStock", dao.ErrLockOrder, func(ctx context.Context, tx *dao.OrdersTx) error {
				if err := tx.SellReservations(ctx, held); err != nil {
					return err
				}
				_, err := tx.InsertPayments(ctx, []model.Payment{payment(held[0], "T-G-3")})
				return err
			}},
			{"StockTwice", dao.ErrLockOrder, func(ctx context.Context, tx *dao.OrdersTx) error {
				if err := tx.SellReservations(ctx, held[:1]); err != nil {
					return err
				}
				return tx.SellReservations(ctx, held[1:])
			}},
			{"OuterStore", dao.ErrInTx, func(ctx context.Context, tx *dao.OrdersTx) error {
				_, err := store.Order(ctx, "GROUP-A")
				return err
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				err := store.UpdateOrders(ctx, append(held, 1<<40), func(ctx context.Context, tx *dao.OrdersTx, orders []model.Order) error {
					if len(orders) != 2 || orders[0].ID != held[0] || orders[1].ID != held[1] {
						t.Errorf("locked %+v, want orders %v in id order", orders, held)
					}
					if _, err := tx.InsertPayments(ctx, []model.Payment{payment(held[1], "T-G-FIRST")}); err != nil {
						return err
					}
					return c.fn(ctx, tx)
				})
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
			})
		}
		for _, id := range append(held, other.ID) {
			if ps, err := store.PaymentsByOrder(ctx, id); err != nil || len(ps) != 0 {
				t.Fatalf("payments of order %d: %v, %v; want none", id, ps, err)
			}
		}
	})
}
