package wechatpay_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/wechatpay"
	"paynotify/wechatpay/bill"
)

var decimalEqual = cmp.Comparer(func(a, b decimal.Decimal) bool { return a.Equal(b) })

func billEntries(t *testing.T, b *wechatpay.Bill) []model.BillEntry {
	t.Helper()
	var got []model.BillEntry
	if err := b.Entries(func(e model.BillEntry) error {
		e.Line = 0
		got = append(got, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTradeBill: the day's bill asked for gzipped, downloaded by a signed
// request, checked against the signed query's SHA1 and its own summary,
// and read back as the fake's trades and refunds.
func TestTradeBill(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	today := time.Now()
	if _, err := e.client.TradeBill(ctx, today); !errors.Is(err, wechatpay.ErrNoBill) || !errors.Is(err, model.ErrNoBill) {
		t.Fatalf("bill of a day without trades: %v, want ErrNoBill", err)
	}
	paid := e.paidTrade(t, "DEMO-7001", 10000)
	other := e.paidTrade(t, "DEMO-7002", 250)
	if err := e.fake.ConsoleRefund("DEMO-7001", "CONSOLE-1", 3000, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := e.client.TradeBill(ctx, today)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	refund, _ := e.fake.Refund("CONSOLE-1")
	want := []model.BillEntry{
		{Kind: model.BillPayment, TradeNo: paid.TransactionID, OutTradeNo: "DEMO-7001", Amount: d("100.00"), Received: d("100.00"),
			Fee: d("-0.6"), FinishedAt: paid.Paid.Truncate(time.Second).UTC(), App: appID},
		{Kind: model.BillPayment, TradeNo: other.TransactionID, OutTradeNo: "DEMO-7002", Amount: d("2.50"), Received: d("2.50"),
			Fee: d("-0.015"), FinishedAt: other.Paid.Truncate(time.Second).UTC(), App: appID},
		{Kind: model.BillRefund, TradeNo: paid.TransactionID, OutTradeNo: "DEMO-7001", OutRequestNo: "CONSOLE-1", Amount: d("-30.00"),
			Received: d("-30.00"), Fee: d("0.18"), FinishedAt: refund.Settled.Truncate(time.Second).UTC(), App: appID},
	}
	if diff := cmp.Diff(want, billEntries(t, b), decimalEqual); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(model.BillTotals{Payments: 2, PaymentReceived: d("102.50"), Refunds: 1, RefundReceived: d("-30.00"), Fees: d("-0.435")},
		b.BillTotals(), decimalEqual); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}

	t.Run("Faults", func(t *testing.T) {
		date := today.In(model.Beijing).Format(time.DateOnly)
		damaged := func() []byte {
			var buf bytes.Buffer
			w := bill.NewWriter(&buf, bill.Header{AppID: "wx", MchID: "1"})
			w.Write(bill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "T", OutTradeNo: "O", Amount: d("1"), Received: d("1"), FinishedAt: today}})
			w.CloseStating(bill.Summary{Rows: 1, Settlement: d("2")})
			return buf.Bytes()
		}()
		for _, c := range []struct {
			name   string
			fault  func()
			is     error
			reason string
		}{
			{"WrongHash", func() { e.fake.WrongBillHash(1) }, model.ErrBadBill, "not the file WeChat Pay vouched for"},
			{"ExpiredURL", func() { e.fake.ExpireBillURL(1) }, model.ErrGatewayUnknown, "HTTP 400 INVALID_REQUEST"},
			{"NotGzip", func() { e.fake.ServeBill(date, []byte("<html>busy</html>")) }, model.ErrBadBill, "not a readable gzip"},
			{"SummaryDisagrees", func() { e.fake.ServeBill(date, gz(t, damaged)) }, model.ErrBadBill, "the summary says 应结订单总金额 2.00"},
			{"QueryFails", func() { e.fake.FailNext("trade bill", 500, "SYSTEM_ERROR", 1) }, model.ErrGatewayUnknown, "SYSTEM_ERROR"},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.fault()
				defer e.fake.ServeBill(date, nil)
				b, err := e.client.TradeBill(ctx, today)
				if err == nil {
					b.Close()
				}
				if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.reason) {
					t.Fatalf("TradeBill = %v; want %v with %q", err, c.is, c.reason)
				}
			})
		}
		// And the bill is whole again once the faults are gone.
		b, err := e.client.TradeBill(ctx, today)
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	})

	t.Run("Edits", func(t *testing.T) {
		e.fake.BillAmount(other.TransactionID, 260)
		e.fake.DropFromBill(paid.TransactionID)
		e.fake.AddToBill(bill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200009999", OutTradeNo: "NEVER-SEEN",
			Amount: d("5.00"), Received: d("5.00"), FinishedAt: today.UTC()}})
		b, err := e.client.TradeBill(ctx, today)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		got := map[string]string{}
		for _, e := range billEntries(t, b) {
			got[e.OutTradeNo+"/"+e.OutRequestNo] = e.Amount.StringFixed(2)
		}
		if diff := cmp.Diff(map[string]string{"DEMO-7002/": "2.60", "NEVER-SEEN/": "5.00"}, got); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})

	t.Run("TooOld", func(t *testing.T) {
		calls := e.fake.Calls("trade bill")
		_, err := e.client.TradeBill(ctx, today.AddDate(0, -3, -1))
		if !errors.Is(err, wechatpay.ErrBillTooOld) || !strings.Contains(err.Error(), "3 months") {
			t.Fatalf("TradeBill of four months ago: %v", err)
		}
		if e.fake.Calls("trade bill") != calls {
			t.Error("asked WeChat Pay for a bill it no longer keeps")
		}
	})
}

// gz gzips text.
func gz(t *testing.T, text []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }
