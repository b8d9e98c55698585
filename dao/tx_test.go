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

// Inside a transaction the outer Store refuses at once. Without the
// guard, SQLite (one connection, held by the transaction) would wait for
// the deadline and MySQL would read outside the transaction.
func TestStoreRefusedInsideTransaction(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		o, err := store.CreateOrder(ctx, "IN-TX-1", 7, decimal.RequireFromString("1.00"))
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string]func(ctx context.Context) error{
			"Order": func(ctx context.Context) error { _, err := store.Order(ctx, o.OrderSN); return err },
			"TradeLookup": func(ctx context.Context) error {
				_, _, err := store.TradeLookup(ctx, model.ProviderAlipay, "T", o.OrderSN)
				return err
			},
			"SetAttemptState": func(ctx context.Context) error {
				_, err := store.SetAttemptState(ctx, 1, model.AttemptOpen, model.AttemptClosed)
				return err
			},
			"UpdateOrder": func(ctx context.Context) error {
				return store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(context.Context, *dao.OrderTx, model.Order) error {
					return nil
				})
			},
			"ClaimRefunds": func(ctx context.Context) error {
				_, err := store.ClaimRefunds(ctx, time.Now(), time.Minute, 10)
				return err
			},
		}
		for name, call := range calls {
			t.Run(name, func(t *testing.T) {
				var inside error
				err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
					inside = call(ctx)
					return nil
				})
				if err != nil {
					t.Fatalf("UpdateOrder: %v", err)
				}
				if !errors.Is(inside, dao.ErrInTx) {
					t.Fatalf("outer %s inside a transaction: %v, want ErrInTx", name, inside)
				}
				if ctx.Err() != nil {
					t.Fatalf("the refusal waited for the deadline: %v", ctx.Err())
				}
				// The same call outside the transaction works.
				if err := call(ctx); err != nil && !errors.Is(err, model.ErrAttemptNotFound) {
					t.Fatalf("outer %s after the transaction: %v", name, err)
				}
			})
		}
	})
}

// A transaction that steps back in the lock order, or touches another
// order's rows, fails and leaves nothing behind.
func TestLockOrderEnforced(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		a, err := store.CreateOrder(ctx, "LOCK-A", 7, decimal.RequireFromString("1.00"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := store.CreateOrder(ctx, "LOCK-B", 7, decimal.RequireFromString("1.00"))
		if err != nil {
			t.Fatal(err)
		}
		payment := func(orderID int64, tradeNo string) model.Payment { return appliedPayment(orderID, "LOCK-A", tradeNo) }
		cases := []struct {
			name string
			fn   func(ctx context.Context, tx *dao.OrderTx) error
		}{
			{"PaymentAfterStock", func(ctx context.Context, tx *dao.OrderTx) error {
				if err := tx.ReleaseReservation(ctx); err != nil {
					return err
				}
				_, err := tx.InsertPayment(ctx, payment(a.ID, "T-LOCK-1"))
				return err
			}},
			{"AnotherOrdersPayment", func(ctx context.Context, tx *dao.OrderTx) error {
				_, err := tx.InsertPayment(ctx, payment(b.ID, "T-LOCK-2"))
				return err
			}},
			{"AnotherOrdersRefund", func(ctx context.Context, tx *dao.OrderTx) error {
				_, err := tx.InsertRefund(ctx, model.Refund{OutRequestNo: "R-LOCK", OrderID: b.ID, Amount: decimal.RequireFromString("1.00")})
				return err
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				err := store.UpdateOrder(ctx, dao.OrderID(a.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
					return c.fn(ctx, tx)
				})
				if !errors.Is(err, dao.ErrLockOrder) {
					t.Fatalf("err = %v, want ErrLockOrder", err)
				}
			})
		}
		for _, id := range []int64{a.ID, b.ID} {
			if ps, err := store.PaymentsByOrder(ctx, id); err != nil || len(ps) != 0 {
				t.Fatalf("payments of order %d: %v, %v; want none", id, ps, err)
			}
		}

		sku, err := store.InsertSKU(ctx, "lock", decimal.RequireFromString("1.00"), 5)
		if err != nil {
			t.Fatal(err)
		}
		member, err := store.InsertMember(ctx, "lock", 100)
		if err != nil {
			t.Fatal(err)
		}
		coupon, err := store.InsertCoupon(ctx, member, decimal.RequireFromString("1.00"))
		if err != nil {
			t.Fatal(err)
		}
		placing := []struct {
			name string
			fn   func(ctx context.Context, tx *dao.PlaceTx) error
		}{
			{"StockWithoutLock", func(ctx context.Context, tx *dao.PlaceTx) error {
				_, err := tx.ReserveStock(ctx, sku, 1)
				return err
			}},
			{"StockAfterCoupon", func(ctx context.Context, tx *dao.PlaceTx) error {
				if _, err := tx.CouponForUpdate(ctx, coupon); err != nil {
					return err
				}
				_, err := tx.SKUsForUpdate(ctx, []int64{sku})
				return err
			}},
			{"CouponAfterMember", func(ctx context.Context, tx *dao.PlaceTx) error {
				if _, err := tx.SpendPoints(ctx, 10); err != nil {
					return err
				}
				_, err := tx.CouponForUpdate(ctx, coupon)
				return err
			}},
			{"CouponWithoutLock", func(ctx context.Context, tx *dao.PlaceTx) error {
				_, err := tx.UseCoupon(ctx, coupon, a.ID)
				return err
			}},
		}
		for i, c := range placing {
			t.Run(c.name, func(t *testing.T) {
				r := model.OrderRequest{MemberID: member, IdempotencyKey: "lock-" + c.name, RequestHash: "h"}
				_, err := store.PlaceOrder(ctx, r, c.fn)
				if !errors.Is(err, dao.ErrLockOrder) {
					t.Fatalf("case %d: err = %v, want ErrLockOrder", i, err)
				}
				if _, err := store.Request(ctx, member, r.IdempotencyKey); !errors.Is(err, model.ErrRequestNotFound) {
					t.Fatalf("the request was kept: %v", err)
				}
			})
		}
		if points, err := store.MemberPoints(ctx, member); err != nil || points != 100 {
			t.Fatalf("points = %d, %v; want 100 untouched", points, err)
		}
	})
}

// ForUpdateSkipLocked passes over an order another transaction holds, as
// if it were absent, without waiting. MySQL/MariaDB only: SQLite has one
// writer, so no other transaction can hold a row while we ask.
func TestUpdateOrderSkipLocked(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	ctx := t.Context()
	o, err := store.CreateOrder(ctx, "SKIP-1", 7, decimal.RequireFromString("1.00"))
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(context.Context, *dao.OrderTx, model.Order) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ran := false
	err = store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdateSkipLocked, func(context.Context, *dao.OrderTx, model.Order) error {
		ran = true
		return nil
	})
	close(release)
	if !errors.Is(err, model.ErrOrderNotFound) || ran {
		t.Fatalf("held order with SKIP LOCKED: %v (callback ran: %v), want ErrOrderNotFound", err, ran)
	}
	if err := <-done; err != nil {
		t.Fatalf("holder: %v", err)
	}
	if err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdateSkipLocked, func(context.Context, *dao.OrderTx, model.Order) error {
		ran = true
		return nil
	}); err != nil || !ran {
		t.Fatalf("released order with SKIP LOCKED: %v (callback ran: %v), want it taken", err, ran)
	}
}
