package service_test

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// expireAll: RunOnce's cutoff is now − timeout, so a negative
// timeout puts every order ever placed past it, with no waiting.
const expireAll = -time.Hour

// newCloser is a closer of orders unpaid longer than timeout, batch at a
// time.
func newCloser(store *dao.Store, log *slog.Logger, timeout time.Duration, batch int) *service.Closer {
	c := service.NewCloser(store, log)
	c.PayTimeout, c.Batch = timeout, batch
	return c
}

// The closer racing Alipay's notifications for the orders it closes: two
// closers go oldest first while four notifiers pay the orders in random
// order, so they meet on some. Each order ends wholly paid or wholly
// closed — some each way — and the closers count exactly the orders they
// closed.
func TestCloserRacesNotify(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		payments := service.NewPayments(store)
		raceBothWays(t, "paid first", "closed first", func(t *testing.T, r int) (paidN, closedN int) {
			const n = 100
			ps := make([]purchase, n)
			for i := range ps {
				ps[i] = newPurchase(t, store, orders, fmt.Sprintf("closer-race-%d-%d", r, i))
			}

			notifyErrs := make([]error, n)
			counts := make([]int, 2)
			closerErrs := make([]error, 2)
			closers := make([]*service.Closer, len(counts))
			for i := range closers {
				closers[i] = newCloser(store, quietLog, expireAll, 10)
			}
			queue := make(chan int, n)
			for _, i := range rand.Perm(n) {
				queue <- i
			}
			close(queue)
			// Goroutines 0 and 1 close; 2 to 5 notify.
			startAll(len(closers)+4, func(g int) {
				if g < len(closers) {
					counts[g], closerErrs[g] = closeUntilNoneLeft(closers[g], store)
					return
				}
				for i := range queue {
					_, _, notifyErrs[i] = payments.Observe(ctx, ps[i].notification())
				}
			})
			for i, err := range closerErrs {
				if err != nil {
					t.Fatalf("closer %d: %v", i, err)
				}
			}
			for i, p := range ps {
				if notifyErrs[i] != nil {
					t.Errorf("%s: notify: %v", p.view.OrderSN, notifyErrs[i])
				}
				switch checkPaidOrClosed(t, store, p) {
				case model.OrderPaid:
					paidN++
				case model.OrderClosed:
					closedN++
				}
			}
			if counts[0]+counts[1] != closedN {
				t.Fatalf("closers counted %d + %d, but %d orders are closed", counts[0], counts[1], closedN)
			}
			return paidN, closedN
		})
	})
}

// closeUntilNoneLeft runs rounds of the closer, as RunJobs does, until no
// order awaits payment, and says how many it closed. A round may close
// nothing while others hold the orders it listed, or fail with
// model.ErrRetryable, as a job's rounds may; it then looks again, up to a
// deadline.
func closeUntilNoneLeft(closer *service.Closer, store *dao.Store) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	far := time.Now().Add(time.Hour)
	closed := 0
	for {
		k, err := closer.RunOnce(ctx)
		closed += k
		if err != nil && !errors.Is(err, model.ErrRetryable) {
			return closed, err
		}
		if k > 0 {
			continue
		}
		left, err := store.ExpiredOrders(ctx, far, time.Now(), 1)
		if err != nil || len(left) == 0 {
			return closed, err
		}
		if time.Now().After(deadline) {
			return closed, errors.New("orders still awaiting payment at the deadline")
		}
	}
}

// The closer closes only what has expired, and gives back what the order
// took; an order paid or cancelled meanwhile is left alone.
func TestCloseExpired(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		payments := service.NewPayments(store)
		unpaid := newPurchase(t, store, orders, "expired-unpaid")
		paid := newPurchase(t, store, orders, "expired-paid")
		cancelled := newPurchase(t, store, orders, "expired-cancelled")
		if _, _, err := payments.Observe(ctx, paid.notification()); err != nil {
			t.Fatal(err)
		}
		if _, err := orders.Cancel(ctx, cancelled.member, cancelled.view.OrderSN); err != nil {
			t.Fatal(err)
		}

		// Nothing placed a moment ago is older than an hour.
		if k, err := newCloser(store, quietLog, time.Hour, 100).RunOnce(ctx); k != 0 || err != nil {
			t.Fatalf("closer with a one-hour timeout closed %d (%v), want 0", k, err)
		}
		if o := mustGetOrder(t, store, unpaid.view.OrderSN); o.Status != model.OrderAwaitingPayment {
			t.Fatalf("unexpired order status %d, want awaiting payment", o.Status)
		}

		closer := newCloser(store, quietLog, expireAll, 100)
		if k, err := closer.RunOnce(ctx); k != 1 || err != nil {
			t.Fatalf("RunOnce = %d, %v; want 1 (only the unpaid order)", k, err)
		}
		if k, err := closer.RunOnce(ctx); k != 0 || err != nil {
			t.Fatalf("second round = %d, %v; want 0", k, err)
		}
		// A late payment for the closed order is owed back, and the
		// closer's give-back is not undone.
		if _, _, err := payments.Observe(ctx, unpaid.notification()); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			p    purchase
			want model.OrderStatus
		}{
			{"UnpaidIsClosed", unpaid, model.OrderClosed},
			{"PaidIsLeftPaid", paid, model.OrderPaid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if got := checkPaidOrClosed(t, store, tc.p); got != tc.want {
					t.Fatalf("status %d, want %d", got, tc.want)
				}
			})
		}
		t.Run("CancelledIsLeftAlone", func(t *testing.T) {
			o := mustGetOrder(t, store, cancelled.view.OrderSN)
			sku := mustReadSKU(t, store, cancelled.sku)
			if o.Status != model.OrderClosed || sku.Stock != cancelled.stock || sku.LockStock != 0 ||
				mustPoints(t, store, cancelled.member) != cancelled.points {
				t.Fatalf("status %d, stock %d/%d, want closed and given back once", o.Status, sku.Stock, sku.LockStock)
			}
		})
	})
}

// openTwice opens two connection pools to one fresh, migrated database,
// as two instances of the service would.
func openTwice(t *testing.T, driver string) (*dao.Store, *dao.Store) {
	t.Helper()
	var dsn string
	switch driver {
	case dao.DriverSQLite:
		dsn = filepath.Join(t.TempDir(), "shared.db")
	case dao.DriverMySQL:
		dsn = daotest.MySQLDatabase(t)
	}
	open := func() *dao.Store {
		s, err := dao.Open(ctx, driver, dsn, dao.Options{MaxOpenConns: 16})
		if err != nil {
			t.Fatalf("open %s: %v", driver, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := open()
	if err := a.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return a, open()
}

// Two closers in two processes (two pools over one database) working
// through the same 300 expired orders at once: every order is closed
// exactly once — the counts add up to 300 and every point, coupon and
// unit of stock is back exactly once.
func TestClosersInTwoProcesses(t *testing.T) {
	for _, driver := range daotest.Drivers {
		t.Run(driver, func(t *testing.T) {
			a, b := openTwice(t, driver)
			orders := service.NewOrders(a)
			const n, perMember, points = 300, 30, 100
			sku := mustSKU(t, a, "10.00", n)
			members := make([]int64, n/perMember)
			coupons := make([]int64, n)
			for m := range members {
				members[m] = mustMember(t, a, perMember*points)
			}
			for i := range n {
				member := members[i/perMember]
				coupons[i] = mustCoupon(t, a, member, "1.00")
				v := mustPlace(t, orders, member, fmt.Sprintf("two-closers-%d", i), model.PlaceOrder{
					Items: []model.ItemRequest{{SKUID: sku, Quantity: 1}}, CouponID: coupons[i], UseIntegration: points,
				})
				if v.PayAmount != "8.00" {
					t.Fatalf("order %d pays %s, want 10.00 − 1.00 − 1.00 = 8.00", i, v.PayAmount)
				}
			}
			if s := mustReadSKU(t, a, sku); s.LockStock != n {
				t.Fatalf("lock_stock %d after placing, want %d", s.LockStock, n)
			}

			counts := make([]int, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, store := range []*dao.Store{a, b} {
				closer := newCloser(store, quietLog, expireAll, 64)
				wg.Go(func() {
					<-start
					counts[i], errs[i] = closeUntilNoneLeft(closer, store)
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("closer %d: %v", i, err)
				}
			}
			t.Logf("closer counts %v", counts)
			if counts[0]+counts[1] != n {
				t.Fatalf("closers counted %d + %d, want %d in all", counts[0], counts[1], n)
			}
			if got := countRows(t, a, "oms_order", "status = ?", model.OrderClosed); got != n {
				t.Fatalf("%d orders closed, want %d", got, n)
			}
			if s := mustReadSKU(t, a, sku); s.Stock != n || s.LockStock != 0 {
				t.Fatalf("stock %d, lock_stock %d; want %d, 0", s.Stock, s.LockStock, n)
			}
			for _, m := range members {
				if got := mustPoints(t, a, m); got != perMember*points {
					t.Errorf("member %d has %d points, want %d back exactly", m, got, perMember*points)
				}
			}
			if got := countRows(t, a, "sms_coupon_history", "use_status <> ? OR order_id IS NOT NULL", model.CouponUnused); got != 0 {
				t.Fatalf("%d coupons not returned", got)
			}
		})
	}
}
