// Package providertest checks a payment provider's adapter against a fake
// of the provider, as testing/fstest.TestFS checks a file system: every
// adapter the service takes (service.Provider, and its notifications'
// reader) must pass Test with its fake. The suite holds what the service
// relies on and no provider's words: a genuine notification is taken, the
// documented forgeries are refused, observations are ones the ledger
// takes, a trade is started, found paid and closed, a refund is made once
// per request number however often it is asked, and the day's bill states
// both.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/service"
)

// Notices reads a provider's notification as the notify path does:
// verified, in the ledger's terms (wechatpay.Provider, alipay.Apps).
type Notices interface {
	Notice(ctx context.Context, h http.Header, body []byte) (model.Notice, error)
}

// Forgery is what a fake does to a notification before handing it over.
type Forgery int

// Forgeries a provider's notifications must be refused for, beside the
// genuine one.
const (
	// Genuine: the notification as the provider posted it.
	Genuine Forgery = iota
	// BadSignature: signed by a key that is not the provider's. Refused
	// with model.ErrBadSignature.
	BadSignature
	// TamperedAmount: the amount changed after the provider signed.
	// Refused with model.ErrBadSignature or model.ErrInvalidNotification.
	TamperedAmount
	// WrongApp: signed by the provider, naming an app (or account) the
	// adapter was not configured for. Refused with model.ErrUnknownApp or
	// model.ErrWrongMerchant.
	WrongApp
)

// String names f for test names.
func (f Forgery) String() string {
	switch f {
	case Genuine:
		return "Genuine"
	case BadSignature:
		return "BadSignature"
	case TamperedAmount:
		return "TamperedAmount"
	case WrongApp:
		return "WrongApp"
	}
	return fmt.Sprintf("Forgery(%d)", int(f))
}

// Fake is the provider's fake as the suite drives it: the buyer, and the
// notifications it sent.
type Fake interface {
	// Pay has the buyer pay the open trade outTradeNo, and the provider
	// notify its payment; an error when the trade takes no payment
	// (closed, or not open).
	Pay(ctx context.Context, outTradeNo string) error
	// Notice is the notification of outTradeNo's payment as the provider
	// posted it (its header and body), edited by f.
	Notice(ctx context.Context, outTradeNo string, f Forgery) (http.Header, []byte, error)
}

// Harness is one adapter, what reads its notifications, and its fake.
type Harness struct {
	// Name is the provider the adapter speaks for.
	Name model.Provider
	// Provider is the adapter, pointed at Fake.
	Provider service.Provider
	// Notices reads the notifications Fake posts.
	Notices Notices
	Fake    Fake
	// Method is a method Provider accepts that opens the trade at the
	// provider (SignsLocally false).
	Method model.PayMethod
	// Account and App are what the adapter's payments are taken in: a
	// notification's observation names them.
	Account, App string
}

// amount is every trade's; refunded is what the refund test gives back.
var (
	amount   = decimal.RequireFromString("10.00")
	refunded = decimal.RequireFromString("1.50")
)

// Test checks h's adapter against h's fake.
func Test(t *testing.T, h Harness) {
	t.Helper()
	if !h.Provider.Accepts(h.Method) || h.Provider.SignsLocally(h.Method) {
		t.Fatalf("Harness.Method %q: want a method the adapter accepts and opens at the provider", h.Method)
	}
	if a, ok := h.Provider.(service.Adapter); ok {
		// What Providers.Add registers: the provider it speaks for, a
		// spec the ledger takes.
		if s := a.Spec(); s.Name != h.Name {
			t.Errorf("Spec names provider %q, want %q", s.Name, h.Name)
		} else if err := model.RegisterProvider(s); err != nil {
			t.Errorf("Spec %+v: %v", s, err)
		}
	}
	t.Run("StartQueryPay", func(t *testing.T) { testStartQueryPay(t, h) })
	t.Run("Close", func(t *testing.T) { testClose(t, h) })
	t.Run("Notices", func(t *testing.T) { testNotices(t, h) })
	t.Run("RefundOncePerRequest", func(t *testing.T) { testRefund(t, h) })
	t.Run("Bill", func(t *testing.T) { testBill(t, h) })
}

// seq numbers the suite's trades within a process.
var seq atomic.Int64

// outTradeNo is a new trade number of the suite's.
func outTradeNo() string { return fmt.Sprintf("PT%d-%d", time.Now().UnixNano(), seq.Add(1)) }

// start opens a trade at the provider and returns its out_trade_no.
func start(t *testing.T, h Harness) string {
	t.Helper()
	sn := outTradeNo()
	got, err := h.Provider.StartPayment(context.Background(), model.PayStart{OutTradeNo: sn, Subject: "providertest " + sn,
		Amount: amount, Method: h.Method, ExpireAt: time.Now().Add(30 * time.Minute), Payer: model.Payer{IP: "127.0.0.1"}})
	if err != nil || got == "" {
		t.Fatalf("StartPayment(%s) = %q, %v; want what the buyer opens", sn, got, err)
	}
	return sn
}

// paid opens a trade, has the buyer pay it and returns what a query says.
func paid(t *testing.T, h Harness) model.Trade {
	t.Helper()
	sn := start(t, h)
	if err := h.Fake.Pay(context.Background(), sn); err != nil {
		t.Fatalf("the buyer paying %s: %v", sn, err)
	}
	tr, err := h.Provider.QueryTrade(context.Background(), sn)
	if err != nil {
		t.Fatalf("QueryTrade(%s) once paid: %v", sn, err)
	}
	return tr
}

func testStartQueryPay(t *testing.T, h Harness) {
	ctx := context.Background()
	if _, err := h.Provider.QueryTrade(ctx, "PT-never-opened"); !errors.Is(err, model.ErrTradeNotExist) {
		t.Errorf("QueryTrade of a trade never opened: %v, want model.ErrTradeNotExist", err)
	} else if model.ProviderOf(err) != h.Name {
		t.Errorf("QueryTrade's error names provider %q, want %q", model.ProviderOf(err), h.Name)
	}
	sn := start(t, h)
	tr, err := h.Provider.QueryTrade(ctx, sn)
	switch {
	case errors.Is(err, model.ErrTradeNotExist):
		// A trade the buyer has not yet opened may be unknown (Alipay's
		// precreate): what matters is that it is not paid.
	case err != nil:
		t.Fatalf("QueryTrade(%s) before paying: %v", sn, err)
	case tr.Status != model.TradeOpen:
		t.Fatalf("QueryTrade(%s) before paying: %s, want %s", sn, tr.Status, model.TradeOpen)
	}
	if err := h.Fake.Pay(ctx, sn); err != nil {
		t.Fatalf("the buyer paying %s: %v", sn, err)
	}
	tr, err = h.Provider.QueryTrade(ctx, sn)
	if err != nil {
		t.Fatalf("QueryTrade(%s) once paid: %v", sn, err)
	}
	if tr.Provider != h.Name || tr.OutTradeNo != sn || tr.Status != model.TradePaid || tr.TradeNo == "" || !tr.Amount.Equal(amount) || tr.PaidAt == nil {
		t.Fatalf("QueryTrade(%s) once paid = %+v; want %s's %s paid, %s, with its trade number and time", sn, tr, h.Name, sn, amount)
	}
	o := tr.Observation(model.PayAttempt{Provider: h.Name, Account: h.Account, App: h.App, OutTradeNo: sn})
	if err := o.Check(); err != nil {
		t.Fatalf("the query's observation %+v is refused by the ledger: %v", o, err)
	}
}

func testClose(t *testing.T, h Harness) {
	ctx := context.Background()
	// A paid trade is not closed: the close is refused, the trade stays
	// paid.
	tr := paid(t, h)
	if err := h.Provider.CloseTrade(ctx, tr.OutTradeNo); err == nil {
		t.Fatalf("CloseTrade of the paid trade %s: no error", tr.OutTradeNo)
	}
	if after, err := h.Provider.QueryTrade(ctx, tr.OutTradeNo); err != nil || after.Status != model.TradePaid {
		t.Fatalf("QueryTrade of a paid trade asked to close = %+v, %v; want %s", after, err, model.TradePaid)
	}
	sn := start(t, h)
	if err := h.Provider.CloseTrade(ctx, sn); err != nil {
		t.Fatalf("CloseTrade(%s): %v", sn, err)
	}
	if err := h.Fake.Pay(ctx, sn); err == nil {
		t.Fatalf("the buyer paid %s once it was closed", sn)
	}
	tr, err := h.Provider.QueryTrade(ctx, sn)
	switch {
	case errors.Is(err, model.ErrTradeNotExist):
		// Closed before the buyer opened it: never there (Alipay).
	case err != nil:
		t.Fatalf("QueryTrade(%s) once closed: %v", sn, err)
	case tr.Status != model.TradeClosed:
		t.Fatalf("QueryTrade(%s) once closed: %s, want %s", sn, tr.Status, model.TradeClosed)
	}
}

func testNotices(t *testing.T, h Harness) {
	ctx := context.Background()
	tr := paid(t, h)
	sn := tr.OutTradeNo
	t.Run("Genuine", func(t *testing.T) {
		hd, body, err := h.Fake.Notice(ctx, sn, Genuine)
		if err != nil {
			t.Fatal(err)
		}
		n, err := h.Notices.Notice(ctx, hd, body)
		if err != nil {
			t.Fatalf("the genuine notification of %s is refused: %v", sn, err)
		}
		p := n.Payment
		if n.ID == "" || n.RefundNo != "" {
			t.Fatalf("notice %+v: want a payment's, with the notification's id", n)
		}
		if p.Provider != h.Name || p.OutTradeNo != sn || p.TradeNo != tr.TradeNo || !p.Amount.Equal(amount) ||
			p.PaidAt == nil || p.Account != h.Account || p.App != h.App || p.Ref == "" {
			t.Fatalf("observation %+v; want %s's payment of %s (trade %s, %s, paid at a time) in account %q app %q",
				p, h.Name, sn, tr.TradeNo, amount, h.Account, h.App)
		}
		if err := p.Check(); err != nil {
			t.Fatalf("the notification's observation is refused by the ledger: %v", err)
		}
		// Read twice, it says the same: a resend is the same payment.
		again, err := h.Notices.Notice(ctx, hd, body)
		if err != nil || again.Payment.TradeNo != p.TradeNo || again.ID != n.ID {
			t.Fatalf("the same notification read again: %+v, %v", again, err)
		}
	})
	for _, c := range []struct {
		f    Forgery
		want []error
	}{
		{BadSignature, []error{model.ErrBadSignature}},
		{TamperedAmount, []error{model.ErrBadSignature, model.ErrInvalidNotification}},
		{WrongApp, []error{model.ErrUnknownApp, model.ErrWrongMerchant}},
	} {
		t.Run(c.f.String(), func(t *testing.T) {
			hd, body, err := h.Fake.Notice(ctx, sn, c.f)
			if err != nil {
				t.Fatal(err)
			}
			n, err := h.Notices.Notice(ctx, hd, body)
			if err == nil {
				t.Fatalf("a %s notification of %s is taken: %+v", c.f, sn, n)
			}
			if !isAny(err, c.want) {
				t.Fatalf("a %s notification is refused with %v; want one of %v", c.f, err, c.want)
			}
		})
	}
}

// isAny reports whether err is any of targets.
func isAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// refundNo is the suite's refund's out_request_no for a trade.
func refundNo(sn string) string { return "R" + sn }

func testRefund(t *testing.T, h Harness) {
	ctx := context.Background()
	tr := paid(t, h)
	no := refundNo(tr.OutTradeNo)
	if done, err := h.Provider.RefundDone(ctx, tr.TradeNo, no, refunded); err != nil || done {
		t.Fatalf("RefundDone of a refund never asked = %v, %v; want false, nil (it may be asked)", done, err)
	}
	for i := range 2 {
		// An answer may leave the outcome open (WeChat Pay's PROCESSING):
		// the refund worker asks RefundDone then, as below.
		if err := h.Provider.Refund(ctx, tr.TradeNo, no, refunded, "providertest"); err != nil && !errors.Is(err, model.ErrGatewayUnknown) {
			t.Fatalf("Refund #%d of %s under %s: %v", i+1, tr.TradeNo, no, err)
		}
	}
	done, err := h.Provider.RefundDone(ctx, tr.TradeNo, no, refunded)
	if err != nil || !done {
		t.Fatalf("RefundDone(%s) = %v, %v; want true", no, done, err)
	}
	// The same request number for another amount refunds nothing more,
	// whatever it answers.
	h.Provider.Refund(ctx, tr.TradeNo, no, refunded.Add(decimal.New(1, 0)), "providertest")
	// The trade is still paid (a part refunded): once, whatever the bill
	// says of how often (Bill).
	if after, err := h.Provider.QueryTrade(ctx, tr.OutTradeNo); err != nil || after.Status != model.TradePaid {
		t.Fatalf("QueryTrade once a part is refunded = %+v, %v; want %s", after, err, model.TradePaid)
	}
	entries := billOf(t, h, tr, func(e model.BillEntry) bool { return e.Kind == model.BillRefund && e.OutRequestNo == no })
	if len(entries) != 1 || !entries[0].Amount.Equal(refunded.Neg()) || entries[0].TradeNo != tr.TradeNo {
		t.Fatalf("the bill's refunds under %s: %+v; want one of %s of trade %s (asked twice, refunded once)", no, entries, refunded.Neg(), tr.TradeNo)
	}
}

func testBill(t *testing.T, h Harness) {
	ctx := context.Background()
	tr := paid(t, h)
	entries := billOf(t, h, tr, func(e model.BillEntry) bool { return e.TradeNo == tr.TradeNo })
	if len(entries) != 1 || entries[0].Kind != model.BillPayment || entries[0].OutTradeNo != tr.OutTradeNo || !entries[0].Amount.Equal(amount) {
		t.Fatalf("the bill's lines of trade %s: %+v; want its payment of %s", tr.TradeNo, entries, amount)
	}
	// Four days ago the fake took nothing: no bill, said as such.
	quiet := time.Now().In(model.Beijing).AddDate(0, 0, -4)
	if k, ok := h.Provider.(service.BillKeeper); ok {
		if err := k.CheckBillDay(quiet, time.Now()); err != nil {
			t.Fatalf("CheckBillDay(%s): %v; want a day four days ago kept", quiet.Format(time.DateOnly), err)
		}
	}
	b, err := h.Provider.TradeBill(ctx, quiet)
	if err == nil {
		b.Close()
	}
	if !errors.Is(err, model.ErrNoBill) {
		t.Fatalf("TradeBill of a day with no business: %v; want model.ErrNoBill", err)
	}
}

// billOf is the lines keep takes from the bills of the Beijing days tr was
// paid on and today (a refund made just after midnight is the next day's),
// each line checked as reconciliation checks it.
func billOf(t *testing.T, h Harness, tr model.Trade, keep func(model.BillEntry) bool) []model.BillEntry {
	t.Helper()
	days := []time.Time{tr.PaidAt.In(model.Beijing)}
	if now := time.Now().In(model.Beijing); now.Format(time.DateOnly) != days[0].Format(time.DateOnly) {
		days = append(days, now)
	}
	var out []model.BillEntry
	for _, day := range days {
		y, m, d := day.Date()
		b, err := h.Provider.TradeBill(context.Background(), time.Date(y, m, d, 0, 0, 0, 0, model.Beijing))
		if err != nil {
			t.Fatalf("TradeBill(%s): %v", day.Format(time.DateOnly), err)
		}
		err = b.Entries(func(e model.BillEntry) error {
			if err := e.Check(); err != nil {
				return err
			}
			if keep(e) {
				out = append(out, e)
			}
			return nil
		})
		b.Close()
		if err != nil {
			t.Fatalf("the bill of %s: %v", day.Format(time.DateOnly), err)
		}
	}
	return out
}
