package fakealipay_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/alipay"
	"paynotify/alipay/bill"
	"paynotify/fakealipay"
	"paynotify/model"
)

// clock is a settable clock for the fake.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func bj(s string) time.Time {
	t, _ := time.ParseInLocation("2006-01-02 15:04:05", s, model.Beijing)
	return t
}
func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// entriesOf fetches the day's bill through paynotify's client and reads it.
func entriesOf(t *testing.T, c *alipay.Client, day time.Time) ([]model.BillEntry, model.BillTotals, error) {
	t.Helper()
	b, err := c.TradeBill(context.Background(), day)
	if err != nil {
		return nil, model.BillTotals{}, err
	}
	defer b.Close()
	var got []model.BillEntry
	err = b.Entries(func(e model.BillEntry) error { got = append(got, e); return nil })
	return got, b.Totals, err
}

// TestBill: the fake's bill is its trades and refunds of the day, in the
// real layout, fetched and read by paynotify's own client; tests can make
// it differ from the trades.
func TestBill(t *testing.T) {
	clk := &clock{t: bj("2026-11-30 10:00:00")}
	e := newEnv(t, func(c *fakealipay.Config) { c.Now = clk.Now })
	day := bj("2026-11-30 00:00:00")

	if _, _, err := entriesOf(t, e.alipay, day); !errors.Is(err, model.ErrNoBill) {
		t.Fatalf("a day without business: %v, want ErrNoBill", err)
	}

	e.paid(t, "SN-1", "100.00")
	clk.Set(bj("2026-11-30 23:59:59"))
	e.paid(t, "SN-2", "20.00")
	sn1, _ := e.fake.Trade("SN-1")
	sn2, _ := e.fake.Trade("SN-2")
	if err := e.fake.ConsoleRefund(sn1.TradeNo, "CONSOLE-1", dec("30.00")); err != nil {
		t.Fatal(err)
	}
	e.fake.AddPaidTrade("GHOST-1", "2026113022001499999999999999", dec("5.00"), bj("2026-11-30 12:00:00"))

	got, totals, err := entriesOf(t, e.alipay, day)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || totals.Payments != 3 || totals.Refunds != 1 || !totals.PaymentReceived.Equal(dec("125.00")) ||
		!totals.RefundReceived.Equal(dec("-30.00")) {
		t.Fatalf("bill %+v, totals %+v", got, totals)
	}
	refund := got[2] // 10:00 payment, 12:00 ghost, 23:59:59 refund and payment by trade_no
	for _, g := range got {
		if g.Kind == model.BillRefund {
			refund = g
		}
	}
	if refund.TradeNo != sn1.TradeNo || refund.OutRequestNo != "CONSOLE-1" || !refund.Amount.Equal(dec("-30.00")) || !refund.Fee.Equal(dec("0.18")) {
		t.Errorf("refund line %+v", refund)
	}

	// The tests' edits: a payment left out, an amount changed, a payment
	// moved into the next day's bill.
	e.fake.DropFromBill("2026113022001499999999999999")
	e.fake.BillAmount(sn1.TradeNo, dec("99.00"))
	e.fake.BillFinishedAt(sn2.TradeNo, bj("2026-12-01 00:00:01"))
	got, _, err = entriesOf(t, e.alipay, day)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].TradeNo != sn1.TradeNo || !got[0].Amount.Equal(dec("99.00")) || got[1].Kind != model.BillRefund {
		t.Fatalf("edited bill %+v", got)
	}
	next, _, err := entriesOf(t, e.alipay, day.AddDate(0, 0, 1))
	if err != nil || len(next) != 1 || next[0].TradeNo != sn2.TradeNo {
		t.Fatalf("next day's bill %+v, %v", next, err)
	}

	// A damaged file is refused by the client, with the reason.
	e.fake.ServeBill("2026-11-30", []byte("PK\x03\x04 not really"))
	if _, _, err := entriesOf(t, e.alipay, day); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "not a readable ZIP") {
		t.Fatalf("damaged bill: %v", err)
	}
	// Another day's bill served for this one is refused: it would make
	// false differences and repair another day's payments.
	var other bytes.Buffer
	if err := bill.WriteZip(&other, bill.Header{Account: sellerID, Date: bj("2026-11-25 00:00:00")}, func(w *bill.Writer) error {
		return w.Write(bill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "2026112522001400000000000001", OutTradeNo: "SN-OLD",
			Amount: dec("1.00"), Received: dec("1.00"), FinishedAt: bj("2026-11-25 10:00:00").UTC()}})
	}); err != nil {
		t.Fatal(err)
	}
	e.fake.ServeBill("2026-11-30", other.Bytes())
	if _, _, err := entriesOf(t, e.alipay, day); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "not the bill of 2026-11-30") {
		t.Fatalf("the bill of 2026-11-25 for 2026-11-30: %v", err)
	}
	e.fake.ServeBill("2026-11-30", nil)
	if _, _, err := entriesOf(t, e.alipay, day); err != nil {
		t.Fatalf("bill after ServeBill(nil): %v", err)
	}

	// A failing query is the usual unknown outcome.
	e.fake.FailNext(fakealipay.MethodBillURL, "20000", "isp.unknow-error", 1)
	if _, _, err := entriesOf(t, e.alipay, day); !errors.Is(err, model.ErrGatewayUnknown) {
		t.Fatalf("failed query: %v", err)
	}
}

// TestBillURLExpires: the download URL works for about 30 seconds.
func TestBillURLExpires(t *testing.T) {
	clk := &clock{t: bj("2026-11-30 10:00:00")}
	e := newEnv(t, func(c *fakealipay.Config) { c.Now = clk.Now })
	e.paid(t, "SN-1", "1.00")
	rsp, err := e.sdk.BillDownloadURLQuery(context.Background(), smartwalleBillQuery("2026-11-30"))
	if err != nil || !rsp.IsSuccess() {
		t.Fatalf("query: %v %+v", err, rsp)
	}
	clk.Set(bj("2026-11-30 10:00:31"))
	resp, err := e.gw.Client().Get(rsp.BillDownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("expired URL answered %d", resp.StatusCode)
	}
}

func smartwalleBillQuery(date string) smartwalle.BillDownloadURLQuery {
	return smartwalle.BillDownloadURLQuery{BillType: "trade", BillDate: date}
}
