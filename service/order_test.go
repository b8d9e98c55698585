package service_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func mustSKU(t *testing.T, store *dao.Store, price string, stock int) int64 {
	t.Helper()
	id, err := store.InsertSKU(ctx, "sku", decimal.RequireFromString(price), stock)
	if err != nil {
		t.Fatalf("insert sku: %v", err)
	}
	return id
}

func mustMember(t *testing.T, store *dao.Store, points int) int64 {
	t.Helper()
	id, err := store.InsertMember(ctx, "member", points)
	if err != nil {
		t.Fatalf("insert member: %v", err)
	}
	return id
}

func mustCoupon(t *testing.T, store *dao.Store, memberID int64, amount string) int64 {
	t.Helper()
	id, err := store.InsertCoupon(ctx, memberID, decimal.RequireFromString(amount))
	if err != nil {
		t.Fatalf("insert coupon: %v", err)
	}
	return id
}

func mustReadSKU(t *testing.T, store *dao.Store, id int64) model.SKU {
	t.Helper()
	sku, err := store.SKU(ctx, id)
	if err != nil {
		t.Fatalf("read sku %d: %v", id, err)
	}
	return sku
}

func mustPoints(t *testing.T, store *dao.Store, memberID int64) int {
	t.Helper()
	n, err := store.MemberPoints(ctx, memberID)
	if err != nil {
		t.Fatalf("read points of %d: %v", memberID, err)
	}
	return n
}

func mustReadCoupon(t *testing.T, store *dao.Store, id int64) model.Coupon {
	t.Helper()
	c, err := store.Coupon(ctx, id)
	if err != nil {
		t.Fatalf("read coupon %d: %v", id, err)
	}
	return c
}

// countRows counts a table's rows, optionally WHERE where.
func countRows(t *testing.T, store *dao.Store, table, where string, args ...any) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := store.SQL().QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func decodeView(t *testing.T, body []byte) service.OrderView {
	t.Helper()
	var v service.OrderView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode order %s: %v", body, err)
	}
	return v
}

// mustPlace places an order that must be created (not replayed).
func mustPlace(t *testing.T, orders *service.Orders, memberID int64, key string, req model.PlaceOrder) service.OrderView {
	t.Helper()
	p, err := orders.Place(ctx, memberID, key, req)
	if err != nil {
		t.Fatalf("place %s: %v", key, err)
	}
	if p.Status != http.StatusCreated || p.Replayed {
		t.Fatalf("place %s: status %d replayed %v, want a new 201", key, p.Status, p.Replayed)
	}
	return decodeView(t, p.Body)
}

// purchase is one order placed with its own SKU, member and coupon, so
// that its end state can be checked on its own.
type purchase struct {
	view                service.OrderView
	member, sku, coupon int64
	qty, stock, points  int
}

// Each purchase: 2 × 20.00 − coupon 5.00 − 300 points (3.00) = 32.00.
func newPurchase(t *testing.T, store *dao.Store, orders *service.Orders, key string) purchase {
	t.Helper()
	p := purchase{qty: 2, stock: 10, points: 1000}
	p.sku = mustSKU(t, store, "20.00", p.stock)
	p.member = mustMember(t, store, p.points)
	p.coupon = mustCoupon(t, store, p.member, "5.00")
	p.view = mustPlace(t, orders, p.member, key, model.PlaceOrder{
		Items: []model.ItemRequest{{SKUID: p.sku, Quantity: p.qty}}, CouponID: p.coupon, UseIntegration: 300,
	})
	if p.view.PayAmount != "32.00" || p.view.Integration != 300 || p.view.CouponAmount != "5.00" {
		t.Fatalf("placed %+v, want pay 32.00 with coupon 5.00 and 300 points", p.view)
	}
	return p
}

// notification is Alipay telling that the purchase was paid in full.
func (p purchase) notification() model.Observation {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	return model.Observation{
		Provider: model.ProviderAlipay, Ref: "n-" + p.view.OrderSN, OutTradeNo: p.view.OrderSN,
		TradeNo: "T-" + p.view.OrderSN, Amount: decimal.RequireFromString(p.view.PayAmount), PaidAt: &at,
	}
}

// checkPaidOrClosed asserts that the purchase ended wholly paid or wholly
// closed, never a mix, and says which.
func checkPaidOrClosed(t *testing.T, store *dao.Store, p purchase) model.OrderStatus {
	t.Helper()
	o := mustGetOrder(t, store, p.view.OrderSN)
	ps := mustPayments(t, store, o.ID)
	sku := mustReadSKU(t, store, p.sku)
	points := mustPoints(t, store, p.member)
	coupon := mustReadCoupon(t, store, p.coupon)
	state := fmt.Sprintf("status %d, payments %+v, stock %d/%d locked, points %d, coupon use_status %d",
		o.Status, ps, sku.Stock, sku.LockStock, points, coupon.UseStatus)
	if len(ps) != 1 {
		t.Errorf("%s: want exactly one payment; %s", o.OrderSN, state)
		return o.Status
	}
	switch o.Status {
	case model.OrderPaid:
		if ps[0].State != model.PaymentApplied || sku.Stock != p.stock-p.qty || sku.LockStock != 0 ||
			coupon.UseStatus != model.CouponUsed || points != p.points-p.view.Integration {
			t.Errorf("%s: paid but not wholly: %s", o.OrderSN, state)
		}
	case model.OrderClosed:
		if ps[0].State != model.PaymentRefundPending || ps[0].Reason != model.RefundOrderClosed ||
			sku.Stock != p.stock || sku.LockStock != 0 || coupon.UseStatus != model.CouponUnused || points != p.points {
			t.Errorf("%s: closed but not wholly: %s", o.OrderSN, state)
		}
	default:
		t.Errorf("%s: neither paid nor closed: %s", o.OrderSN, state)
	}
	return o.Status
}

// 200 copies of one request at once (a client retrying, a proxy
// duplicating): one order, everything spent once, and every answer is the
// one saved answer or "still in flight".
func TestPlaceIdenticalRequestsInParallel(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		sku := mustSKU(t, store, "10.00", 50)
		member := mustMember(t, store, 1000)
		coupon := mustCoupon(t, store, member, "5.00")
		req := model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 3}}, CouponID: coupon, UseIntegration: 200}

		const n = 200
		placed := make([]service.Placed, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				placed[i], errs[i] = orders.Place(ctx, member, "same-key", req)
			})
		}
		close(start)
		wg.Wait()

		var first []byte
		fresh, replayed, inFlight := 0, 0, 0
		for i := range n {
			switch {
			case errors.Is(errs[i], model.ErrRequestInFlight):
				inFlight++
				continue
			case errs[i] != nil:
				t.Fatalf("request %d: %v", i, errs[i])
			}
			if placed[i].Status != http.StatusCreated {
				t.Fatalf("request %d: status %d, want 201", i, placed[i].Status)
			}
			if placed[i].Replayed {
				replayed++
			} else {
				fresh++
			}
			if first == nil {
				first = placed[i].Body
			}
			if string(placed[i].Body) != string(first) {
				t.Fatalf("request %d answered\n%s\nanother answered\n%s", i, placed[i].Body, first)
			}
		}
		t.Logf("%d created, %d replayed, %d in flight", fresh, replayed, inFlight)
		if fresh != 1 {
			t.Fatalf("%d requests created an order, want exactly 1", fresh)
		}
		view := decodeView(t, first)
		if view.PayAmount != "23.00" || view.Integration != 200 || view.CouponAmount != "5.00" {
			t.Fatalf("order %+v, want 30.00 − 5.00 coupon − 200 points = 23.00", view)
		}

		// Decided now: a late retry is a replay of the same answer.
		again, err := orders.Place(ctx, member, "same-key", req)
		if err != nil || !again.Replayed || string(again.Body) != string(first) {
			t.Fatalf("late retry: %+v, %v; want the saved answer replayed", again, err)
		}

		if got := countRows(t, store, "oms_order", ""); got != 1 {
			t.Fatalf("%d orders, want 1", got)
		}
		if got := countRows(t, store, "oms_order_item", ""); got != 1 {
			t.Fatalf("%d order lines, want 1", got)
		}
		if s := mustReadSKU(t, store, sku); s.Stock != 50 || s.LockStock != 3 {
			t.Fatalf("stock %d, lock_stock %d; want 50, 3", s.Stock, s.LockStock)
		}
		if got := mustPoints(t, store, member); got != 800 {
			t.Fatalf("points %d, want 800", got)
		}
		if c := mustReadCoupon(t, store, coupon); c.UseStatus != model.CouponUsed {
			t.Fatalf("coupon use_status %d, want used", c.UseStatus)
		}
	})
}

// 1,000 members' requests at once for the last 100 units: exactly 100
// orders, the rest out of stock, never oversold. A request told to retry
// is retried with its key until it is decided, as a client would.
func TestPlaceRaceForLastStock(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		const stock, requests = 100, 1000
		sku := mustSKU(t, store, "1.00", stock)
		members := make([]int64, 20)
		for i := range members {
			members[i] = mustMember(t, store, 0)
		}
		req := model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 1}}}

		type answer struct {
			sn      string
			err     error
			retries int
		}
		answers := make([]answer, requests)
		deadline := time.Now().Add(45 * time.Second)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range requests {
			wg.Go(func() {
				<-start
				key := fmt.Sprintf("buy-%d", i)
				for {
					p, err := orders.Place(ctx, members[i%len(members)], key, req)
					if (errors.Is(err, model.ErrRetryable) || errors.Is(err, model.ErrRequestInFlight)) && time.Now().Before(deadline) {
						answers[i].retries++
						continue
					}
					answers[i].err = err
					if err == nil {
						var v service.OrderView
						if jerr := json.Unmarshal(p.Body, &v); jerr != nil {
							answers[i].err = jerr
						}
						answers[i].sn = v.OrderSN
					}
					return
				}
			})
		}
		close(start)
		wg.Wait()

		sold, outOfStock, retries := 0, 0, 0
		sns := map[string]bool{}
		for i, a := range answers {
			retries += a.retries
			switch {
			case a.err == nil:
				sold++
				sns[a.sn] = true
			case errors.Is(a.err, model.ErrOutOfStock):
				outOfStock++
			default:
				t.Errorf("request %d: %v (after %d retries)", i, a.err, a.retries)
			}
		}
		t.Logf("%d sold, %d out of stock, %d retries", sold, outOfStock, retries)
		if sold != stock || outOfStock != requests-stock || len(sns) != stock {
			t.Fatalf("%d sold (%d distinct orders), %d out of stock; want %d and %d", sold, len(sns), outOfStock, stock, requests-stock)
		}
		if s := mustReadSKU(t, store, sku); s.Stock != stock || s.LockStock != stock {
			t.Fatalf("stock %d, lock_stock %d; want %d, %d", s.Stock, s.LockStock, stock, stock)
		}
		if got := countRows(t, store, "oms_order", ""); got != stock {
			t.Fatalf("%d orders, want %d", got, stock)
		}
		// A refused request leaves no trace: its key is free to retry.
		if got := countRows(t, store, "oms_order_request", ""); got != stock {
			t.Fatalf("%d recorded requests, want %d", got, stock)
		}
	})
}

// A member's cancel racing Alipay's notification of the same order, many
// orders over: each ends wholly paid or wholly closed with the money owed
// back, never a mix, and nothing is given back or spent twice — whichever
// comes first, and both do.
func TestCancelRacesNotify(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		payments := service.NewPayments(store)
		raceBothWays(t, "paid first", "cancelled first", func(t *testing.T, r int) (paidN, closedN int) {
			const n = 100
			ps := make([]purchase, n)
			for i := range ps {
				ps[i] = newPurchase(t, store, orders, fmt.Sprintf("cancel-race-%d-%d", r, i))
			}
			cancelErrs := make([]error, n)
			notifyErrs := make([]error, n)
			startAll(2*n, func(i int) {
				if p := ps[i/2]; i%2 == 0 {
					_, cancelErrs[i/2] = orders.Cancel(ctx, p.member, p.view.OrderSN)
				} else {
					_, _, notifyErrs[i/2] = payments.Observe(ctx, p.notification())
				}
			})
			for i, p := range ps {
				if notifyErrs[i] != nil {
					t.Errorf("%s: notify: %v", p.view.OrderSN, notifyErrs[i])
				}
				switch status := checkPaidOrClosed(t, store, p); status {
				case model.OrderPaid:
					paidN++
					if !errors.Is(cancelErrs[i], model.ErrOrderNotCancellable) {
						t.Errorf("%s: paid, but cancel answered %v; want ErrOrderNotCancellable", p.view.OrderSN, cancelErrs[i])
					}
				case model.OrderClosed:
					closedN++
					if cancelErrs[i] != nil {
						t.Errorf("%s: closed, but cancel answered %v", p.view.OrderSN, cancelErrs[i])
					}
				}
			}
			return paidN, closedN
		})
	})
}

// Cancelling twice answers the same and gives back once; a paid order is
// not cancellable and stays as it is; nobody cancels another's order.
func TestCancel(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		payments := service.NewPayments(store)

		t.Run("TwiceGivesBackOnce", func(t *testing.T) {
			p := newPurchase(t, store, orders, "cancel-twice")
			first, err := orders.Cancel(ctx, p.member, p.view.OrderSN)
			if err != nil {
				t.Fatalf("cancel: %v", err)
			}
			second, err := orders.Cancel(ctx, p.member, p.view.OrderSN)
			if err != nil {
				t.Fatalf("cancel again: %v", err)
			}
			a, _ := json.Marshal(first)
			b, _ := json.Marshal(second)
			if string(a) != string(b) || first.Status != int(model.OrderClosed) {
				t.Fatalf("cancels answered\n%s\n%s\nwant the same closed order", a, b)
			}
			if s := mustReadSKU(t, store, p.sku); s.Stock != p.stock || s.LockStock != 0 {
				t.Fatalf("stock %d, lock_stock %d; want %d, 0", s.Stock, s.LockStock, p.stock)
			}
			if got := mustPoints(t, store, p.member); got != p.points {
				t.Fatalf("points %d, want %d", got, p.points)
			}
			if c := mustReadCoupon(t, store, p.coupon); c.UseStatus != model.CouponUnused {
				t.Fatalf("coupon use_status %d, want unused", c.UseStatus)
			}
		})
		t.Run("PaidIsNotCancellable", func(t *testing.T) {
			p := newPurchase(t, store, orders, "cancel-paid")
			if _, outcome, err := payments.Observe(ctx, p.notification()); err != nil || outcome != model.OutcomeApplied {
				t.Fatalf("pay: %s, %v", outcome, err)
			}
			if _, err := orders.Cancel(ctx, p.member, p.view.OrderSN); !errors.Is(err, model.ErrOrderNotCancellable) {
				t.Fatalf("cancel paid order: %v, want ErrOrderNotCancellable", err)
			}
			if got := checkPaidOrClosed(t, store, p); got != model.OrderPaid {
				t.Fatalf("status %d after refused cancel, want paid", got)
			}
		})
		t.Run("OthersOrderIsNotFound", func(t *testing.T) {
			p := newPurchase(t, store, orders, "cancel-other")
			other := mustMember(t, store, 0)
			if _, err := orders.Cancel(ctx, other, p.view.OrderSN); !errors.Is(err, model.ErrOrderNotFound) {
				t.Fatalf("cancel another's order: %v, want ErrOrderNotFound", err)
			}
			if _, err := orders.Get(ctx, other, p.view.OrderSN); !errors.Is(err, model.ErrOrderNotFound) {
				t.Fatalf("get another's order: %v, want ErrOrderNotFound", err)
			}
			if o := mustGetOrder(t, store, p.view.OrderSN); o.Status != model.OrderAwaitingPayment {
				t.Fatalf("status %d, want still awaiting payment", o.Status)
			}
			if s := mustReadSKU(t, store, p.sku); s.LockStock != p.qty {
				t.Fatalf("lock_stock %d, want %d", s.LockStock, p.qty)
			}
		})
	})
}

// Every refused placement leaves every row as it was.
func TestPlaceRefusals(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		sku := mustSKU(t, store, "10.00", 5)
		member := mustMember(t, store, 1000)
		poor := mustMember(t, store, 50)
		other := mustMember(t, store, 1000)
		own := mustCoupon(t, store, member, "2.00")
		othersCoupon := mustCoupon(t, store, other, "2.00")
		used := mustCoupon(t, store, member, "2.00")
		line := []model.ItemRequest{{SKUID: sku, Quantity: 1}}
		mustPlace(t, orders, member, "taken", model.PlaceOrder{Items: line, CouponID: used})

		for _, tc := range []struct {
			name    string
			member  int64
			key     string
			req     model.PlaceOrder
			wantErr error
		}{
			{"EmptyKey", member, "", model.PlaceOrder{Items: line}, model.ErrInvalidRequest},
			{"KeyWithSpace", member, "a key", model.PlaceOrder{Items: line}, model.ErrInvalidRequest},
			{"NoLines", member, "k1", model.PlaceOrder{}, model.ErrInvalidRequest},
			{"KeyReusedForOtherRequest", member, "taken", model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 2}}}, model.ErrIdempotencyKeyReused},
			{"OutOfStock", member, "k2", model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 5}}}, model.ErrOutOfStock},
			{"UnknownSKU", member, "k3", model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku + 1000, Quantity: 1}}}, model.ErrSKUNotFound},
			{"OneUnknownSKUOfTwo", member, "k4", model.PlaceOrder{Items: []model.ItemRequest{line[0], {SKUID: sku + 1000, Quantity: 1}}}, model.ErrSKUNotFound},
			{"OthersCoupon", member, "k5", model.PlaceOrder{Items: line, CouponID: othersCoupon}, model.ErrCouponUnusable},
			{"UsedCoupon", member, "k6", model.PlaceOrder{Items: line, CouponID: used}, model.ErrCouponUnusable},
			{"UnknownCoupon", member, "k7", model.PlaceOrder{Items: line, CouponID: own + 1000}, model.ErrCouponUnusable},
			// 10.00 needs up to 999 points; 500 are asked, 50 are there.
			{"NotEnoughPoints", poor, "k8", model.PlaceOrder{Items: line, UseIntegration: 500}, model.ErrInsufficientPoints},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := catalogue(t, store)
				_, err := orders.Place(ctx, tc.member, tc.key, tc.req)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if after := catalogue(t, store); after != before {
					t.Fatalf("refused request changed rows:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	})
}

// catalogue renders what placing spends or creates: stock, points,
// coupons, and how many orders, lines and requests there are.
func catalogue(t *testing.T, store *dao.Store) string {
	t.Helper()
	var b []byte
	for _, q := range []string{
		"SELECT id, stock, lock_stock FROM pms_sku_stock ORDER BY id",
		"SELECT id, integration, 0 FROM ums_member ORDER BY id",
		"SELECT id, use_status, COALESCE(order_id, 0) FROM sms_coupon_history ORDER BY id",
		"SELECT COUNT(*), 0, 0 FROM oms_order",
		"SELECT COUNT(*), 0, 0 FROM oms_order_item",
		"SELECT COUNT(*), 0, 0 FROM oms_order_request",
	} {
		rows, err := store.SQL().QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var x, y, z int64
			if err := rows.Scan(&x, &y, &z); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			b = fmt.Appendf(b, "%d:%d:%d ", x, y, z)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rows.Close()
		b = append(b, '|')
	}
	return string(b)
}

// The request-status lookup: SUCCESS with the saved answer, UNKNOWN for a
// key never committed.
func TestRequestStatus(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		sku := mustSKU(t, store, "10.00", 5)
		member := mustMember(t, store, 0)
		p, err := orders.Place(ctx, member, "known", model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name     string
			member   int64
			key      string
			want     model.RequestState
			wantBody []byte
		}{
			{"Success", member, "known", model.RequestSuccess, p.Body},
			{"Unknown", member, "never-sent", model.RequestUnknown, nil},
			{"OtherMembersKey", member + 1, "known", model.RequestUnknown, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				state, body, err := orders.RequestStatus(ctx, tc.member, tc.key)
				if err != nil || state != tc.want || string(body) != string(tc.wantBody) {
					t.Fatalf("RequestStatus = %s %s %v, want %s %s", state, body, err, tc.want, tc.wantBody)
				}
			})
		}
		if _, _, err := orders.RequestStatus(ctx, member, "bad key"); !errors.Is(err, model.ErrInvalidRequest) {
			t.Fatalf("malformed key: %v, want ErrInvalidRequest", err)
		}
	})
}
