package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"golang.org/x/sync/singleflight"

	"paynotify/dao"
	"paynotify/model"
)

// Locker holds a distributed lock (Redis) across instances. Hold returns
// lock.ErrUnavailable-wrapped errors when Redis does not answer.
type Locker interface {
	Hold(ctx context.Context, key string, ttl time.Duration) (release func(), lost <-chan struct{}, err error)
}

// firstQueryAfter is how long an attempt waits for its notification
// before the query job asks Alipay.
const firstQueryAfter = 3 * time.Minute

// payLockTTL bounds how long a dead holder blocks the pay lock; a live
// holder renews it.
const payLockTTL = 10 * time.Second

// startTimeout bounds one payment start, Alipay's answers included.
const startTimeout = 15 * time.Second

// Checkout starts payments: one trade (attempt) at one provider at a time
// per order, and never two attempts for one, with three guards — singleflight
// in the process, a Redis lock across processes, and the database's
// UNIQUE (order_id, attempt_no) as the final arbiter.
type Checkout struct {
	store     *dao.Store
	providers Providers
	payments  *Payments
	locker    Locker // nil: no Redis configured
	log       *slog.Logger
	flight    singleflight.Group
	now       func() time.Time
	// PayTimeout is ORDER_PAY_TIMEOUT: every trade expires (time_expire) a
	// minute before the closer would close its order.
	PayTimeout time.Duration
	// OnUnguarded, if set, is told each time a start runs without the Redis
	// guard (not configured, or Redis down).
	OnUnguarded func()
}

// NewCheckout returns the payment-start use case. locker may be nil.
func NewCheckout(store *dao.Store, providers Providers, payments *Payments, locker Locker, log *slog.Logger) *Checkout {
	return &Checkout{store: store, providers: providers, payments: payments, locker: locker, log: log,
		now: time.Now, PayTimeout: 30 * time.Minute}
}

// PayView is what the buyer needs to pay: a URL to open, or a QR code.
type PayView struct {
	OrderSN  string `json:"order_sn"`
	Provider string `json:"provider"`
	// Account and App are the provider account and app the trade is open
	// in ("" when the provider is configured without ids: its only app).
	Account    string `json:"account"`
	App        string `json:"app"`
	AttemptNo  int    `json:"attempt_no"`
	OutTradeNo string `json:"out_trade_no"`
	Method     string `json:"method"`
	Amount     string `json:"amount"`
	PayURL     string `json:"pay_url,omitempty"`
	QRCode     string `json:"qr_code,omitempty"`
	// CodeURL (WeChat Pay native) is the QR code's content; H5URL (h5)
	// where the phone's browser goes; PrepayID and Params (jsapi, app)
	// what the buyer's client passes to WeChat.
	CodeURL  string            `json:"code_url,omitempty"`
	H5URL    string            `json:"h5_url,omitempty"`
	PrepayID string            `json:"prepay_id,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
}

func payView(sn string, a model.PayAttempt) PayView {
	v := PayView{OrderSN: sn, Provider: string(a.Provider), Account: a.Account, App: a.App, AttemptNo: a.AttemptNo, OutTradeNo: a.OutTradeNo, Method: string(a.Method), Amount: a.Amount.StringFixed(2)}
	switch a.Method {
	case model.PayQR:
		v.QRCode = a.PayURL
	case model.PayNative:
		v.CodeURL = a.PayURL
	case model.PayH5:
		v.H5URL = a.PayURL
	case model.PayJSAPI, model.PayApp:
		var cp model.ClientPay
		if json.Unmarshal([]byte(a.PayURL), &cp) == nil {
			v.PrepayID, v.Params = cp.PrepayID, cp.Params
		}
	default:
		v.PayURL = a.PayURL
	}
	return v
}

// Start returns how a member pays an order through provider with method:
// the open attempt's URL or QR code if it has one for this provider and
// method, else a new attempt (closing the previous trade at its provider
// first). Concurrent identical requests share one result.
func (c *Checkout) Start(ctx context.Context, memberID int64, sn string, provider model.Provider, method model.PayMethod) (PayView, error) {
	return c.StartFor(ctx, memberID, sn, provider, method, model.Payer{})
}

// StartFor is Start for a buyer's client that says who it is (WeChat Pay's
// jsapi needs the payer's openid, its h5 the payer's IP).
func (c *Checkout) StartFor(ctx context.Context, memberID int64, sn string, provider model.Provider, method model.PayMethod, payer model.Payer) (PayView, error) {
	return c.StartIn(ctx, memberID, sn, provider, method, "", payer)
}

// StartIn is StartFor in the provider's app appRef (its name or id): empty,
// the first app of the provider's first account that takes method. An app
// that does not exist or cannot take method is model.ErrInvalidRequest.
// Another app's open trade for the order is closed first, as another
// provider's is.
func (c *Checkout) StartIn(ctx context.Context, memberID int64, sn string, provider model.Provider, method model.PayMethod, appRef string, payer model.Payer) (PayView, error) {
	app, err := c.providers.choose(provider, appRef, method)
	if err != nil {
		return PayView{}, err
	}
	key := strconv.FormatInt(memberID, 10) + "\x00" + sn + "\x00" + string(provider) + "\x00" + app.Account + "\x00" + app.ID + "\x00" + string(method)
	// The shared start outlives a caller who gives up (its own bound is
	// startTimeout), so the caller's retry finds its result; the caller
	// itself waits no longer than its deadline.
	ch := c.flight.DoChan(key, func() (any, error) {
		return c.start(context.WithoutCancel(ctx), memberID, sn, payment{provider, app, method, payer})
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return PayView{}, r.Err
		}
		return r.Val.(PayView), nil
	case <-ctx.Done():
		return PayView{}, fmt.Errorf("payment start still running: %w", ctx.Err())
	}
}

// payment is how the buyer asked to pay: through which provider and app,
// by which method.
type payment struct {
	provider model.Provider
	app      App
	method   model.PayMethod
	payer    model.Payer
}

// same reports whether attempt a is a trade of pay's provider, account,
// app and method: the one to reuse.
func (pay payment) same(a model.PayAttempt) bool {
	return a.Provider == pay.provider && a.Account == pay.app.Account && a.App == pay.app.ID && a.Method == pay.method
}

func (c *Checkout) start(ctx context.Context, memberID int64, sn string, pay payment) (PayView, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	order, err := c.store.Order(ctx, sn)
	if err != nil {
		return PayView{}, err
	}
	if order.MemberID != memberID {
		return PayView{}, fmt.Errorf("%w: %q", model.ErrOrderNotFound, sn)
	}
	for range 3 { // a round lost to a concurrent switch of method starts over
		latest, err := c.store.LatestAttempt(ctx, order.ID)
		found := err == nil
		if err != nil && !errors.Is(err, model.ErrAttemptNotFound) {
			return PayView{}, err
		}
		if order.Status != model.OrderAwaitingPayment || (found && latest.State == model.AttemptPaid) {
			return PayView{}, fmt.Errorf("%w: %q", model.ErrOrderNotPayable, sn)
		}
		next := 1
		if found {
			same := pay.same(latest)
			switch {
			case latest.State == model.AttemptOpen && same:
				return c.ensureURL(ctx, order, latest, pay.payer)
			case latest.State == model.AttemptOpen:
				if err := c.closeForSwitch(ctx, order, latest); err != nil {
					return PayView{}, err
				}
			}
			next = latest.AttemptNo + 1
		}
		a, created, err := c.createAttempt(ctx, order, next, pay)
		if err != nil {
			return PayView{}, err
		}
		if created || pay.same(a) {
			return c.ensureURL(ctx, order, a, pay.payer)
		}
		// Another request made attempt `next` for another provider, app
		// or method: go round.
		if order, err = c.store.Order(ctx, sn); err != nil {
			return PayView{}, err
		}
	}
	return PayView{}, fmt.Errorf("%w: the payment method keeps changing", model.ErrRequestInFlight)
}

// createAttempt makes attempt no of an order under the Redis guard, in a
// transaction that locks the order and re-checks that it still awaits
// payment (another instance may have closed or paid it since we read it);
// the unique key decides if two get here. It returns the attempt as
// stored.
func (c *Checkout) createAttempt(ctx context.Context, order model.Order, no int, pay payment) (model.PayAttempt, bool, error) {
	release := c.guard(ctx, order.OrderSN, no)
	defer release()
	expireAt := c.expireAt(order)
	if !expireAt.After(c.now().Add(time.Minute)) {
		return model.PayAttempt{}, false, fmt.Errorf("%w: %q is about to be closed", model.ErrOrderNotPayable, order.OrderSN)
	}
	a := model.PayAttempt{
		OrderID: order.ID, AttemptNo: no, Provider: pay.provider, Account: pay.app.Account, App: pay.app.ID, OutTradeNo: outTradeNo(order.OrderSN, no), Method: pay.method,
		Amount: order.PayAmount, NextQueryAt: c.now().Add(firstQueryAfter), ExpireAt: expireAt,
	}
	// What is only signed here (Alipay's page and WAP URLs): store the one
	// answer every caller will get, in the insert itself.
	if pay.app.Adapter.SignsLocally(pay.method) {
		var err error
		if a.PayURL, err = pay.app.Adapter.StartPayment(ctx, payStart(order, a, pay.payer)); err != nil {
			return model.PayAttempt{}, false, err
		}
	}
	var created bool
	err := c.store.UpdateOrder(ctx, dao.OrderID(order.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, locked model.Order) error {
		var err error
		if locked.Status != model.OrderAwaitingPayment {
			return fmt.Errorf("%w: %q", model.ErrOrderNotPayable, order.OrderSN)
		}
		created, err = tx.InsertAttempt(ctx, a)
		return err
	})
	if err != nil {
		return model.PayAttempt{}, false, err
	}
	stored, err := c.store.LatestAttempt(ctx, order.ID)
	return stored, created, err
}

// expireAt is when an order's trades stop taking payment: a minute before
// the closer closes the order.
func (c *Checkout) expireAt(o model.Order) time.Time {
	return o.CreateTime.Add(c.PayTimeout - time.Minute)
}

// guard takes the Redis lock pay:lock:{order_sn}:{attempt_no}, or goes on
// without it (saying so) when there is no Redis: the database decides.
func (c *Checkout) guard(ctx context.Context, sn string, no int) func() {
	if c.locker == nil {
		c.unguarded("no REDIS_ADDR configured")
		return func() {}
	}
	release, _, err := c.locker.Hold(ctx, "pay:lock:"+sn+":"+strconv.Itoa(no), payLockTTL)
	if err != nil {
		c.unguarded(err.Error())
		return func() {}
	}
	return release
}

func (c *Checkout) unguarded(why string) {
	c.log.Warn("starting a payment without the Redis guard; the database unique key decides", "why", why)
	if c.OnUnguarded != nil {
		c.OnUnguarded()
	}
}

// ensureURL returns an attempt's view, opening its trade at the provider
// first if the attempt has no answer yet (Alipay's QR code). The provider
// answers the same for the same out_trade_no, and only the first stored
// answer is kept.
func (c *Checkout) ensureURL(ctx context.Context, order model.Order, a model.PayAttempt, payer model.Payer) (PayView, error) {
	if a.PayURL != "" {
		return payView(order.OrderSN, a), nil
	}
	gw, err := c.providers.app(a.Provider, a.Account, a.App)
	if err != nil {
		return PayView{}, err
	}
	if gw.SignsLocally(a.Method) {
		return payView(order.OrderSN, a), nil
	}
	release := c.guard(ctx, order.OrderSN, a.AttemptNo)
	defer release()
	// Under the lock: another instance may have stored the answer already,
	// or closed the attempt (switching method) meanwhile.
	a, err = c.store.AttemptByOutTradeNo(ctx, a.OutTradeNo)
	if err != nil {
		return PayView{}, err
	}
	if a.State != model.AttemptOpen {
		return PayView{}, fmt.Errorf("%w: attempt %d of %q is %s", model.ErrRequestInFlight, a.AttemptNo, order.OrderSN, a.State)
	}
	if a.PayURL == "" {
		answer, err := gw.StartPayment(ctx, payStart(order, a, payer))
		if err != nil {
			return PayView{}, err
		}
		if err := c.store.SetAttemptURL(ctx, a.ID, answer); err != nil {
			return PayView{}, err
		}
		if a, err = c.store.AttemptByOutTradeNo(ctx, a.OutTradeNo); err != nil {
			return PayView{}, err
		}
	}
	return payView(order.OrderSN, a), nil
}

// payStart is what the provider needs to start attempt a of order for
// payer.
func payStart(order model.Order, a model.PayAttempt, payer model.Payer) model.PayStart {
	return model.PayStart{OutTradeNo: a.OutTradeNo, Subject: subject(order), Amount: a.Amount, Method: a.Method, ExpireAt: a.ExpireAt, Payer: payer}
}

// closeForSwitch closes the open trade of another provider, app or method
// before a new attempt, in the app it is open in. If the provider
// says it is already paid, the payment is applied and the order is no
// longer payable.
func (c *Checkout) closeForSwitch(ctx context.Context, order model.Order, a model.PayAttempt) error {
	gw, err := c.providers.app(a.Provider, a.Account, a.App)
	if err != nil {
		return err
	}
	// The same guard as opening its trade: never close a trade while
	// another request is creating it at the provider.
	release := c.guard(ctx, order.OrderSN, a.AttemptNo)
	defer release()
	err = gw.CloseTrade(ctx, a.OutTradeNo)
	switch {
	case err == nil, errors.Is(err, model.ErrTradeNotExist):
		_, err := closeAttempt(ctx, c.store, a, "payment method switched", c.now())
		return err
	case errors.Is(err, model.ErrTradeStatus):
		// Already closed, or already paid: ask which.
		t, err := gw.QueryTrade(ctx, a.OutTradeNo)
		switch {
		case err != nil:
			return err
		case t.Status.Paid():
			if _, _, err := c.payments.Observe(ctx, t.Observation(a)); err != nil {
				return err
			}
			return fmt.Errorf("%w: %q was paid meanwhile", model.ErrOrderNotPayable, order.OrderSN)
		case t.Status == model.TradeClosed:
			_, err := closeAttempt(ctx, c.store, a, "payment method switched", c.now())
			return err
		}
		return model.TagProvider(a.Provider, fmt.Errorf("%w: %s close of %q refused while the trade is %s", model.ErrGatewayUnknown, a.Provider, a.OutTradeNo, t.Status))
	}
	return err
}

// outTradeNo is attempt no's out_trade_no: the order_sn for the first, so
// notifications keyed by order_sn keep working.
func outTradeNo(sn string, no int) string {
	if no == 1 {
		return sn
	}
	return sn + "-" + strconv.Itoa(no)
}

func subject(o model.Order) string { return "Order " + o.OrderSN }
