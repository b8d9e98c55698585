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
		payment := func(orderID int64, tradeNo string) model.Payment { return appliedPayment(orderID, "GROUP-A", tradeNo) }
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
				return tx.MarkOrdersPaid(ctx, model.PayTypeAlipay, map[int64]time.Time{other.ID: time.Now()})
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

// TradesLookup finds recorded trades, and the orders their out_trade_nos
// name, with one statement: an unknown out_trade_no resolves to nothing.
func TestTradesLookup(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		var stmts int
		if err := store.Trace(func(string) { stmts++ }); err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		for _, sn := range []string{"LOOK-A", "LOOK-B"} {
			o, err := store.CreateOrder(ctx, sn, 7, decimal.RequireFromString("1.00"))
			if err != nil {
				t.Fatal(err)
			}
			ids[sn] = o.ID
		}
		err := store.UpdateOrders(ctx, []int64{ids["LOOK-A"]}, func(ctx context.Context, tx *dao.OrdersTx, _ []model.Order) error {
			_, err := tx.InsertPayments(ctx, []model.Payment{appliedPayment(ids["LOOK-A"], "LOOK-A", "T-LOOK-A")})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}

		stmts = 0
		got, err := store.TradesLookup(ctx, model.ProviderAlipay,
			[]string{"T-LOOK-A", "T-LOOK-B", "T-LOOK-A2", "T-LOOK-X"}, []string{"LOOK-A", "LOOK-B", "LOOK-A", "LOOK-NONE"})
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := got.Payments["T-LOOK-A"]; !ok || len(got.Payments) != 1 || p.OrderID != ids["LOOK-A"] || p.OutTradeNo != "LOOK-A" || !p.Amount.Equal(decimal.RequireFromString("1.00")) {
			t.Errorf("payments %+v, want T-LOOK-A of order %d", got.Payments, ids["LOOK-A"])
		}
		if want := map[string]int64{"LOOK-A": ids["LOOK-A"], "LOOK-B": ids["LOOK-B"]}; len(got.Orders) != 2 || got.Orders["LOOK-A"] != want["LOOK-A"] || got.Orders["LOOK-B"] != want["LOOK-B"] {
			t.Errorf("orders %v, want %v", got.Orders, want)
		}
		if len(got.Attempts) != 0 {
			t.Errorf("attempts %v, want none", got.Attempts)
		}
		if stmts != 1 {
			t.Errorf("%d statements, want 1", stmts)
		}

		stmts = 0
		got, err = store.TradesLookup(ctx, model.ProviderAlipay, []string{"T-LOOK-A", "T-LOOK-A"}, []string{"LOOK-A", "LOOK-A"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Payments) != 1 || got.Orders["LOOK-A"] != ids["LOOK-A"] || len(got.Orders) != 1 || stmts != 1 {
			t.Errorf("recorded trades only: %d payments, orders %v, %d statements; want 1, LOOK-A's, 1", len(got.Payments), got.Orders, stmts)
		}
	})
}

// appliedPayment is an APPLIED Alipay payment of 1.00 for order orderID,
// paid now.
func appliedPayment(orderID int64, outTradeNo, tradeNo string) model.Payment {
	now := time.Now().UTC().Truncate(time.Second)
	return model.Payment{Provider: model.ProviderAlipay, TradeNo: tradeNo, OrderID: orderID, OutTradeNo: outTradeNo,
		Amount: decimal.RequireFromString("1.00"), State: model.PaymentApplied, PaidAt: &now}
}
