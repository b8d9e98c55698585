package service_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/lock"
	"paynotify/lock/redistest"
	"paynotify/model"
	"paynotify/service"
)

// The development merchant of testdata/dev, which the fake Alipay serves.
const (
	rigAppID    = "2021000000000001"
	rigSellerID = "2088000000000001"
)

// rigMember owns the orders mustOrder creates.
const rigMember = 7

// rig is the service talking to a fake Alipay as it talks to Alipay: the
// real smartwalle client pointed at the fake's gateway is the service's
// Gateway and the notify handler's Verifier, and the fake's notifications
// reach the real handler.New over HTTP.
type rig struct {
	store     *dao.Store
	fake      *fakealipay.Server
	gw        *alipay.Client
	payments  *service.Payments
	orders    *service.Orders
	refunds   *service.Refunds
	recon     *service.OpenTrades
	notifyURL string
}

// newRig wires the service over store to a fresh fake Alipay.
func newRig(t *testing.T, store *dao.Store) *rig {
	t.Helper()
	// The notify endpoint's address first: the fake needs it, and the
	// handler behind it needs the client, which needs the fake.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{store: store, notifyURL: "http://" + ln.Addr().String() + "/alipay/notify"}
	r.fake, err = fakealipay.New(fakealipay.Config{
		AppID: rigAppID, SellerID: rigSellerID,
		PrivateKey:   devkey.Read(t, "alipay_private_key.pem"),
		AppPublicKey: devkey.Read(t, "app_public_key.pem"),
		NotifyURL:    r.notifyURL,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	gateway := httptest.NewServer(r.fake.Handler())
	r.gw, err = alipay.New(alipay.Config{
		AppID: rigAppID, SellerID: rigSellerID,
		AppPrivateKey:   devkey.Read(t, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"),
		SandboxGateway:  r.fake.GatewayURL(gateway.URL),
	})
	if err != nil {
		ln.Close()
		gateway.Close()
		t.Fatal(err)
	}
	r.payments = service.NewPayments(store)
	r.orders = service.NewOrders(store)
	r.refunds = service.NewRefunds(store, r.providers(), quietLog)
	r.recon = service.NewOpenTrades(store, r.providers(), r.payments, quietLog)
	notify := httptest.NewUnstartedServer(handler.New(handler.Deps{
		Log: quietLog, Verifier: r.gw, Payments: r.payments, Refunds: r.refunds,
		DB: store, Registry: prometheus.NewRegistry(),
	}))
	notify.Listener.Close()
	notify.Listener = ln
	notify.Start()
	// Last in, first out: the fake's background notifications stop first,
	// then the gateway, then the notify endpoint (the store, opened
	// earlier, closes after all of them).
	t.Cleanup(notify.Close)
	t.Cleanup(gateway.Close)
	t.Cleanup(r.fake.Close)
	return r
}

// checkout is a Checkout over the rig's store and gateway, guarded by
// locker (nil: no Redis).
func (r *rig) checkout(locker service.Locker) *service.Checkout {
	return service.NewCheckout(r.store, r.providers(), r.payments, locker, quietLog)
}

// providers is the rig's Alipay client as the service's only provider,
// as main wires it.
func (r *rig) providers() service.Providers {
	return service.Providers{model.ProviderAlipay: alipay.NewProvider(r.gw, r.notifyURL, "https://shop.example/paid")}
}

// redisLocker is a lock on the shared test Redis, closed when the test
// ends.
func redisLocker(t *testing.T) *lock.Redis {
	t.Helper()
	l := lock.New(redistest.Addr(t), quietLog)
	t.Cleanup(func() { l.Close() })
	return l
}

// newSN is an order number no other test uses: the Redis pay lock is
// named after it, and Redis is shared by every package's tests.
func newSN(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// mustStart starts paying an order of rigMember's or fails the test.
func mustStart(t *testing.T, c *service.Checkout, sn string, method model.PayMethod) service.PayView {
	t.Helper()
	v, err := c.Start(ctx, rigMember, sn, model.ProviderAlipay, method)
	if err != nil {
		t.Fatalf("start %s by %s: %v", sn, method, err)
	}
	return v
}

// openPayURL is the buyer's browser opening a page or WAP pay URL: Alipay
// creates the trade then.
func openPayURL(t *testing.T, u string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("open pay URL: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open pay URL: %d", resp.StatusCode)
	}
}

// mustAttempt reads the attempt with out_trade_no.
func mustAttempt(t *testing.T, store *dao.Store, outTradeNo string) model.PayAttempt {
	t.Helper()
	a, err := store.AttemptByOutTradeNo(ctx, outTradeNo)
	if err != nil {
		t.Fatalf("attempt %s: %v", outTradeNo, err)
	}
	return a
}

// mustTrade reads a trade from the fake Alipay.
func mustTrade(t *testing.T, fake *fakealipay.Server, outTradeNo string) fakealipay.Trade {
	t.Helper()
	tr, ok := fake.Trade(outTradeNo)
	if !ok {
		t.Fatalf("the fake Alipay has no trade %s", outTradeNo)
	}
	return tr
}

// eventCount counts an order's outbox events of one type.
func eventCount(t *testing.T, store *dao.Store, orderID int64, typ model.EventType) int {
	t.Helper()
	return countRows(t, store, "outbox", "aggregate_id = ? AND event_type = ?", orderID, string(typ))
}

// pollUntil polls cond until it holds, failing the test after a deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after 10s", what)
		}
		select {
		case <-time.After(2 * time.Millisecond): // poll interval
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		}
	}
}

// startAll runs fn(i) for i in [0, n) in n goroutines released at once,
// and waits for them all.
func startAll(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// checkOneAnswer fails the test unless every start succeeded with the same
// view, of attempt 1, with a URL or QR code for method; it returns that
// view.
func checkOneAnswer(t *testing.T, views []service.PayView, errs []error, method model.PayMethod) service.PayView {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	first := views[0]
	for i, v := range views {
		if !reflect.DeepEqual(v, first) {
			t.Fatalf("start %d answered %+v, start 0 %+v: want every answer identical", i, v, first)
		}
	}
	link := first.PayURL
	if method == model.PayQR {
		link = first.QRCode
	}
	if first.AttemptNo != 1 || link == "" || first.Method != string(method) {
		t.Fatalf("answer %+v, want attempt 1 with a %s link", first, method)
	}
	return first
}

// Pay starts for one order all at once: one attempt, one answer, and for
// a QR code one precreate at Alipay. Three ways: callers of one instance
// (its singleflight joins them); callers each with an instance of its own
// (as separate processes: the Redis lock guards them); and those again
// with Redis down, where the database alone decides, and is seen to — more
// than one instance gets as far as writing.
func TestStartConcurrentRequests(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		down := redistest.Start(t)
		deadLocker := lock.New(down.Addr(), quietLog)
		t.Cleanup(func() { deadLocker.Close() })
		down.Stop()
		cases := []struct {
			name   string
			locker service.Locker
			shared bool // one Checkout for every caller
			down   bool
		}{
			{name: "OneInstance", locker: redisLocker(t), shared: true},
			{name: "InstancesRedisUp", locker: redisLocker(t)},
			{name: "InstancesRedisDown", locker: deadLocker, down: true},
		}
		for _, tc := range cases {
			for _, method := range []model.PayMethod{model.PayPage, model.PayQR} {
				t.Run(tc.name+"/"+string(method), func(t *testing.T) {
					n := 100
					if !tc.shared {
						n = 30 // callers of their own wait in turn on Redis
					}
					// unguarded[i]: how often caller i's instance went on
					// without Redis.
					unguarded := make([]atomic.Int32, n)
					instances := make([]*service.Checkout, n)
					for i := range instances {
						if tc.shared && i > 0 {
							instances[i] = instances[0]
							continue
						}
						instances[i] = r.checkout(tc.locker)
						instances[i].OnUnguarded = func() { unguarded[i].Add(1) }
					}
					// round starts one order's payment from every caller at
					// once, and says how many instances went unguarded.
					round := func(t *testing.T) int {
						t.Helper()
						o := mustOrder(t, store, newSN("CC"), "100.00")
						precreates := r.fake.Calls(fakealipay.MethodPrecreate)
						for i := range unguarded {
							unguarded[i].Store(0)
						}

						views := make([]service.PayView, n)
						errs := make([]error, n)
						startAll(n, func(i int) {
							views[i], errs[i] = instances[i].Start(ctx, rigMember, o.OrderSN, model.ProviderAlipay, method)
						})

						v := checkOneAnswer(t, views, errs, method)
						if got := countRows(t, store, "oms_pay_attempt", "order_id = ?", o.ID); got != 1 {
							t.Fatalf("%d attempts, want 1", got)
						}
						if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptOpen || a.Method != method {
							t.Fatalf("attempt %+v, want OPEN by %s", a, method)
						}
						got := r.fake.Calls(fakealipay.MethodPrecreate) - precreates
						switch {
						case method != model.PayQR && got != 0:
							t.Fatalf("%d precreate calls at Alipay for %s, want none", got, method)
						case method == model.PayQR && !tc.down && got != 1:
							t.Fatalf("%d precreate calls at Alipay, want 1", got)
						case method == model.PayQR && tc.down && got < 1:
							// Unguarded instances may each ask; Alipay answers
							// one code per out_trade_no, and the first stored
							// is every answer (checked above).
							t.Fatalf("%d precreate calls at Alipay, want at least 1", got)
						}
						unguardedInstances := 0
						for i := range unguarded {
							if unguarded[i].Load() > 0 {
								unguardedInstances++
							}
						}
						if tc.down != (unguardedInstances > 0) {
							t.Fatalf("%d instances went unguarded with Redis down=%v", unguardedInstances, tc.down)
						}
						// A start after the storm answers the same.
						if again := mustStart(t, instances[0], o.OrderSN, method); !reflect.DeepEqual(again, v) {
							t.Fatalf("a later start answered %+v, want %+v", again, v)
						}
						return unguardedInstances
					}
					// With Redis down, run until two instances went past the
					// guard for one order, so that the database decided.
					for rounds := 1; round(t) < 2 && tc.down && !t.Failed(); rounds++ {
						if rounds == maxRaceRounds {
							t.Fatalf("in %d rounds, never two instances went unguarded for one order: the database never had to decide", rounds)
						}
					}
				})
			}
		}
	})
}

// Two instances (two Checkouts, two pools on one database) starting the
// same order at once: one attempt, and every answer the same.
func TestStartInTwoInstances(t *testing.T) {
	for _, driver := range daotest.Drivers {
		t.Run(driver, func(t *testing.T) {
			a, b := openTwice(t, driver)
			r := newRig(t, a)
			down := redistest.Start(t)
			addrs := []struct {
				name string
				addr string
			}{
				{name: "SharedRedis", addr: redistest.Addr(t)},
				{name: "RedisDown", addr: down.Addr()},
			}
			down.Stop()
			for _, ad := range addrs {
				for _, method := range []model.PayMethod{model.PayPage, model.PayQR} {
					t.Run(ad.name+"/"+string(method), func(t *testing.T) {
						// Each instance has its own singleflight, its own
						// connection to Redis, its own pool.
						var instances [2]*service.Checkout
						for i, store := range []*dao.Store{a, b} {
							l := lock.New(ad.addr, quietLog)
							t.Cleanup(func() { l.Close() })
							instances[i] = service.NewCheckout(store, r.providers(), service.NewPayments(store), l, quietLog)
						}
						o := mustOrder(t, a, newSN("CT"), "42.00")
						precreates := r.fake.Calls(fakealipay.MethodPrecreate)

						const n = 60
						views := make([]service.PayView, n)
						errs := make([]error, n)
						startAll(n, func(i int) {
							views[i], errs[i] = instances[i%2].Start(ctx, rigMember, o.OrderSN, model.ProviderAlipay, method)
						})

						checkOneAnswer(t, views, errs, method)
						if got := countRows(t, a, "oms_pay_attempt", "order_id = ?", o.ID); got != 1 {
							t.Fatalf("%d attempts, want 1", got)
						}
						// With the shared Redis lock one instance asks Alipay for
						// the QR code and the other finds it stored. With Redis
						// down each instance may ask once (its singleflight
						// joins its own callers): Alipay answers one code per
						// out_trade_no, so a second precreate is harmless.
						wantMin, wantMax := 0, 0
						switch {
						case method == model.PayQR && ad.name == "RedisDown":
							wantMin, wantMax = 1, 2
						case method == model.PayQR:
							wantMin, wantMax = 1, 1
						}
						if got := r.fake.Calls(fakealipay.MethodPrecreate) - precreates; got < wantMin || got > wantMax {
							t.Fatalf("%d precreate calls at Alipay, want %d to %d", got, wantMin, wantMax)
						}
					})
				}
			}
		})
	}
}

// Switching method closes the open trade at Alipay first; the new
// attempt's out_trade_no is "<order_sn>-2", and its payment resolves to
// the order through the attempt.
func TestStartSwitchMethod(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(redisLocker(t))

		t.Run("OpenedTradeIsClosed", func(t *testing.T) {
			o := mustOrder(t, store, newSN("SW"), "100.00")
			page := mustStart(t, c, o.OrderSN, model.PayPage)
			openPayURL(t, page.PayURL)
			if tr := mustTrade(t, r.fake, o.OrderSN); tr.Status != alipay.TradeWaitBuyerPay {
				t.Fatalf("trade 1 is %s after opening the page, want WAIT_BUYER_PAY", tr.Status)
			}

			qr := mustStart(t, c, o.OrderSN, model.PayQR)
			if qr.AttemptNo != 2 || qr.OutTradeNo != o.OrderSN+"-2" || qr.QRCode == "" {
				t.Fatalf("after switching: %+v, want attempt 2 %s-2 with a QR code", qr, o.OrderSN)
			}
			if tr := mustTrade(t, r.fake, o.OrderSN); tr.Status != alipay.TradeClosed {
				t.Fatalf("trade 1 is %s at Alipay, want TRADE_CLOSED", tr.Status)
			}
			if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptClosed {
				t.Fatalf("attempt 1 is %s, want CLOSED", a.State)
			}
			if n := eventCount(t, store, o.ID, model.EventTradeClosed); n != 1 {
				t.Fatalf("%d trade.closed events, want 1 (attempt 1)", n)
			}
			if again := mustStart(t, c, o.OrderSN, model.PayQR); !reflect.DeepEqual(again, qr) {
				t.Fatalf("starting qr again answered %+v, want %+v", again, qr)
			}

			if err := r.fake.Pay(ctx, qr.OutTradeNo); err != nil {
				t.Fatal(err)
			}
			notes := r.fake.Notifications()
			if last := notes[len(notes)-1]; last.Outcome != fakealipay.Acknowledged || last.Form.Get("out_trade_no") != qr.OutTradeNo {
				t.Fatalf("notification for %s: %s %q", last.Form.Get("out_trade_no"), last.Outcome, last.Answer)
			}
			if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderPaid {
				t.Fatalf("order status %s, want PAID", got.Status)
			}
			ps := mustPayments(t, store, o.ID)
			if len(ps) != 1 || ps[0].State != model.PaymentApplied || ps[0].OutTradeNo != qr.OutTradeNo {
				t.Fatalf("payments %+v, want one APPLIED for %s", ps, qr.OutTradeNo)
			}
			if a := mustAttempt(t, store, qr.OutTradeNo); a.State != model.AttemptPaid {
				t.Fatalf("attempt 2 is %s, want PAID", a.State)
			}
			if n := eventCount(t, store, o.ID, model.EventOrderPaid); n != 1 {
				t.Fatalf("%d order.paid events, want 1", n)
			}
			if _, err := c.Start(ctx, rigMember, o.OrderSN, model.ProviderAlipay, model.PayPage); !errors.Is(err, model.ErrOrderNotPayable) {
				t.Fatalf("start after paying = %v, want ErrOrderNotPayable", err)
			}
		})

		t.Run("NeverOpenedTrade", func(t *testing.T) {
			o := mustOrder(t, store, newSN("SN"), "10.00")
			mustStart(t, c, o.OrderSN, model.PayPage)
			// Alipay answers TRADE_NOT_EXIST: nothing to close.
			qr := mustStart(t, c, o.OrderSN, model.PayQR)
			if qr.AttemptNo != 2 || qr.QRCode == "" {
				t.Fatalf("after switching: %+v, want attempt 2 with a QR code", qr)
			}
			if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptClosed {
				t.Fatalf("attempt 1 is %s, want CLOSED", a.State)
			}
		})

		t.Run("PaidBeforeTheSwitch", func(t *testing.T) {
			o := mustOrder(t, store, newSN("SP"), "10.00")
			page := mustStart(t, c, o.OrderSN, model.PayPage)
			openPayURL(t, page.PayURL)
			r.fake.LoseNotifications(true)
			err := r.fake.Pay(ctx, o.OrderSN)
			r.fake.LoseNotifications(false)
			if err != nil {
				t.Fatal(err)
			}
			// The close is refused (paid); the query finds the payment.
			if _, err := c.Start(ctx, rigMember, o.OrderSN, model.ProviderAlipay, model.PayQR); !errors.Is(err, model.ErrOrderNotPayable) {
				t.Fatalf("switch after paying = %v, want ErrOrderNotPayable", err)
			}
			if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderPaid {
				t.Fatalf("order status %s, want PAID", got.Status)
			}
			if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptPaid {
				t.Fatalf("attempt 1 is %s, want PAID", a.State)
			}
			if got := countRows(t, store, "oms_pay_attempt", "order_id = ?", o.ID); got != 1 {
				t.Fatalf("%d attempts, want 1: no new trade for a paid order", got)
			}
		})
	})
}

// A signed failure of precreate is a failure: Start fails, no QR code is
// stored, and the next Start asks again and succeeds.
func TestStartGatewayFailure(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(redisLocker(t))
		cases := []struct {
			name  string
			fault func()
			want  error
		}{
			{name: "SystemError", want: model.ErrGatewayUnknown,
				fault: func() { r.fake.FailNext(fakealipay.MethodPrecreate, "40004", "ACQ.SYSTEM_ERROR", 1) }},
			{name: "InvalidParameter", want: model.ErrGatewayRefused,
				fault: func() { r.fake.FailNext(fakealipay.MethodPrecreate, "40004", "ACQ.INVALID_PARAMETER", 1) }},
			{name: "Dropped", want: model.ErrGatewayUnknown,
				fault: func() { r.fake.DropNext(fakealipay.MethodPrecreate, 1) }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := mustOrder(t, store, newSN("GF"), "10.00")
				tc.fault()
				v, err := c.Start(ctx, rigMember, o.OrderSN, model.ProviderAlipay, model.PayQR)
				if !errors.Is(err, tc.want) {
					t.Fatalf("Start = %+v, %v; want %v", v, err, tc.want)
				}
				if a := mustAttempt(t, store, o.OrderSN); a.PayURL != "" {
					t.Fatalf("attempt stored %q after a failure, want no code", a.PayURL)
				}
				if _, ok := r.fake.Trade(o.OrderSN); ok {
					t.Fatal("the failed precreate opened a trade")
				}
				v = mustStart(t, c, o.OrderSN, model.PayQR)
				if v.AttemptNo != 1 || v.QRCode == "" {
					t.Fatalf("start after the failure: %+v, want attempt 1 with a QR code", v)
				}
				if a := mustAttempt(t, store, o.OrderSN); a.PayURL != v.QRCode {
					t.Fatalf("stored %q, answered %q", a.PayURL, v.QRCode)
				}
				if got := countRows(t, store, "oms_pay_attempt", "order_id = ?", o.ID); got != 1 {
					t.Fatalf("%d attempts, want 1", got)
				}
			})
		}
	})
}

// Another member asking to pay the order while its owner's start is in
// flight (held at Alipay's precreate) does not share the owner's answer:
// it is told the order does not exist, and the owner gets the QR code.
func TestStartIsPerMember(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)
		o := mustOrder(t, store, newSN("PM"), "10.00")
		precreates := r.fake.Calls(fakealipay.MethodPrecreate)
		r.fake.TimeoutNext(fakealipay.MethodPrecreate, time.Second, 1)
		type result struct {
			v   service.PayView
			err error
		}
		owner := make(chan result, 1)
		go func() {
			v, err := c.Start(ctx, rigMember, o.OrderSN, model.ProviderAlipay, model.PayQR)
			owner <- result{v, err}
		}()
		pollUntil(t, "the owner's precreate at Alipay", func() bool {
			return r.fake.Calls(fakealipay.MethodPrecreate) > precreates
		})
		if v, err := c.Start(ctx, rigMember+1, o.OrderSN, model.ProviderAlipay, model.PayQR); !errors.Is(err, model.ErrOrderNotFound) {
			t.Fatalf("another member's start answered %+v, %v; want ErrOrderNotFound", v, err)
		}
		if res := <-owner; res.err != nil || res.v.QRCode == "" {
			t.Fatalf("the owner's start: %+v, %v; want a QR code", res.v, res.err)
		}
	})
}
