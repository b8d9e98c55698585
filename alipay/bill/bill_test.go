package bill_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"paynotify/alipay/bill"
	"paynotify/model"
)

func open(t *testing.T, b []byte) (*bill.File, error) {
	t.Helper()
	return bill.Open(bytes.NewReader(b), int64(len(b)))
}

func entries(t *testing.T, f *bill.File) []model.BillEntry {
	t.Helper()
	var got []model.BillEntry
	if err := f.Entries(func(e model.BillEntry) error {
		e.Line = 0
		got = append(got, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func sampleEntries() []model.BillEntry {
	var want []model.BillEntry
	for _, l := range sample {
		want = append(want, l.BillEntry)
	}
	return want
}

var decimalEqual = cmp.Comparer(func(a, b decimal.Decimal) bool { return a.Equal(b) })

func TestOpenGood(t *testing.T) {
	wantTotals := model.BillTotals{Payments: 3, PaymentReceived: d("188.01"), Refunds: 1, RefundReceived: d("-30.00"), Fees: d("-0.95")}
	for _, name := range []string{"today.zip", "reordered.zip"} {
		t.Run(name, func(t *testing.T) {
			f, err := open(t, readFixture(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := bill.FileNames(pid, day); f.Name != want {
				t.Errorf("detail %q, want %q (the summary is not the detail)", f.Name, want)
			}
			if diff := cmp.Diff(wantTotals, f.Totals, decimalEqual); diff != "" {
				t.Errorf("totals (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(sampleEntries(), entries(t, f), decimalEqual); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOpenDamaged: every damaged file is refused with a reason naming the
// fault, and none of its entries reaches a caller.
func TestOpenDamaged(t *testing.T) {
	for _, c := range []struct{ file, reason string }{
		{"not_a_zip.zip", "not a readable ZIP"},
		{"truncated.zip", "not a readable ZIP"},
		{"utf8.zip", "UTF-8 text where GBK is expected"},
		{"missing_column.zip", "header lacks column(s) 服务费（元）"},
		{"totals_disagree.zip", "#交易合计 says 3 payments, 188.02 received; the rows hold 3, 188.01"},
		{"rows_missing.zip", "no rows"},
		{"empty_day.zip", "no rows: a day without business has no bill (NO_BILL_DATA)"},
		{"truncated_detail.zip", "the file ends mid-row: truncated"},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := open(t, readFixture(t, c.file))
			if !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Open = %v, %v; want ErrBadBill with %q", f, err, c.reason)
			}
		})
	}
}

// TestScanLines covers the faults a generator does not make, line by line.
func TestScanLines(t *testing.T) {
	head := "#支付宝业务明细查询\n#-----业务明细列表-----\n" + strings.Join(bill.Columns, ",") + "\n"
	row := func(kind, tradeNo, amount, received, finished string) string {
		cells := make([]string, len(bill.Columns))
		for i, c := range bill.Columns {
			switch c {
			case bill.ColKind:
				cells[i] = kind
			case bill.ColTradeNo:
				cells[i] = tradeNo + "\t"
			case bill.ColOutTradeNo:
				cells[i] = " SN-1 "
			case bill.ColAmount:
				cells[i] = amount
			case bill.ColReceived:
				cells[i] = received
			case bill.ColFinished:
				cells[i] = finished
			}
		}
		return strings.Join(cells, ",") + "\n"
	}
	tail := func(n int, sum string) string {
		return "#-----业务明细列表结束-----\n#交易合计：" + itoa(n) + "笔，商家实收共" + sum + "元，商家优惠共0.00元\n#退款合计：0笔，商家实收退款共0.00元，商家优惠退款共0.00元\n"
	}
	good := row("交易", "T1", "1.00", "1.00", "2026-11-30 10:00:00")
	for _, c := range []struct{ name, text, reason string }{
		{"Good", head + good + tail(1, "1.00"), ""},
		{"CRLF", strings.ReplaceAll(head+good+tail(1, "1.00"), "\n", "\r\n"), ""},
		{"UnknownKind", head + row("转账", "T1", "1.00", "1.00", "2026-11-30 10:00:00") + tail(1, "1.00"), "业务类型 \"转账\" is neither"},
		{"BadAmount", head + row("交易", "T1", "1,00", "1.00", "2026-11-30 10:00:00") + tail(1, "1.00"), "cells, the header has"},
		{"ThreeDecimals", head + row("交易", "T1", "1.001", "1.00", "2026-11-30 10:00:00") + tail(1, "1.00"), "订单金额（元） \"1.001\" is not an amount"},
		{"NegativePayment", head + row("交易", "T1", "-1.00", "-1.00", "2026-11-30 10:00:00") + tail(1, "-1.00"), "a payment's are positive"},
		{"BadTime", head + row("交易", "T1", "1.00", "1.00", "30/11/2026") + tail(1, "1.00"), "完成时间 \"30/11/2026\""},
		{"EmptyTradeNo", head + row("交易", "", "1.00", "1.00", "2026-11-30 10:00:00") + tail(1, "1.00"), "支付宝交易号 is empty"},
		// What the ledger could not record, or an operator never name
		// again, fails the file before anything is repaired.
		{"LongTradeNo", head + row("交易", strings.Repeat("7", 129), "1.00", "1.00", "2026-11-30 10:00:00") + tail(1, "1.00"), "支付宝交易号 \"777"},
		{"HostileTradeNo", head + row("交易", "T00=cmd|' /C calc'!A0", "1.00", "1.00", "2026-11-30 10:00:00") + tail(1, "1.00"), "is not an identifier of at most 128"},
		{"ControlByte", head + row("交易", "T\x01", "1.00", "1.00", "2026-11-30 10:00:00") + tail(1, "1.00"), "is not an identifier"},
		{"DateRange", "#起始日期：[2026年11月30日 00:00:00]   终止日期：[2026年11月31日 00:00:00]\n" + head + good + tail(1, "1.00"), "unreadable date range"},
		{"RowAfterEnd", head + good + tail(1, "1.00") + good, "a row after the 业务明细列表结束 marker"},
		{"RowBeforeMarker", good + head + good + tail(1, "1.00"), "a row before the 业务明细列表 marker"},
		{"TotalsDisagree", head + good + tail(1, "1.01"), "#交易合计 says 1 payments, 1.01 received; the rows hold 1, 1.00"},
		{"NoTotals", head + good + "#-----业务明细列表结束-----\n", "no #交易合计 or #退款合计 line"},
		{"Empty", "", "no 业务明细列表 marker"},
		{"NoHeader", "#-----业务明细列表-----\n", "no header row"},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := encodeGBK(t, c.text)
			_, err := bill.Scan(bytes.NewReader(raw), nil)
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Scan = %v; want ErrBadBill with %q", err, c.reason)
			}
		})
	}
}

// TestScanCallbackError: the caller's error stops the scan as it is.
func TestScanCallbackError(t *testing.T) {
	f, err := open(t, readFixture(t, "today.zip"))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	if err := f.Entries(func(model.BillEntry) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Entries = %v after %d entries", err, n)
	}
}

func itoa(n int) string { return decimal.NewFromInt(int64(n)).String() }

// TestOpenLongOutTradeNo: a line whose out_trade_no is longer than its
// column (and Alipay's limit, 64) fails Open, the one read before any
// repair, however late in the file it stands.
func TestOpenLongOutTradeNo(t *testing.T) {
	lines := append([]bill.Line{}, sample...)
	last := sample[0]
	last.TradeNo, last.OutTradeNo = "2026113022001400000000000009", strings.Repeat("S", 65)
	lines = append(lines, last)
	if _, err := open(t, zipOf(bill.Header{Account: pid, Date: day}, lines)); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "商户订单号") {
		t.Fatalf("Open = %v, want ErrBadBill naming 商户订单号", err)
	}
	last.OutTradeNo = strings.Repeat("S", 64)
	if _, err := open(t, zipOf(bill.Header{Account: pid, Date: day}, append(lines[:len(lines)-1], last))); err != nil {
		t.Fatalf("64 characters, as the column holds: %v", err)
	}
}

// TestCovers: a bill is taken only for the day it is the bill of, by its
// detail's name and by the range it states, and only as the bill of the
// account it names (Of).
func TestCovers(t *testing.T) {
	f, err := open(t, readFixture(t, "today.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Covers(day); err != nil {
		t.Fatalf("the day's own bill: %v", err)
	}
	if err := f.Covers(day.AddDate(0, 0, 5)); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "not the bill of 2026-12-05") {
		t.Fatalf("another day: %v", err)
	}
	if f.Account != pid || f.Of(pid) != nil {
		t.Fatalf("our own bill: account %q, %v", f.Account, f.Of(pid))
	}
	if err := f.Of("2088000000000777"); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "account "+pid+"'s, not ours (2088000000000777)") {
		t.Fatalf("another account's bill: %v", err)
	}
	// Named for the day, but stating another day's range inside.
	other := bill.Header{Account: pid, Date: day.AddDate(0, 0, -5)}
	f, err = open(t, zipWith(bill.Header{Account: pid, Date: day}, detailWith(other, func(w *bill.Writer) error {
		for _, l := range sample {
			w.Write(l)
		}
		return w.Close()
	})))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Covers(day); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "covers 2026-11-25 00:00:00 to 2026-11-26 00:00:00") {
		t.Fatalf("a bill stating 2026-11-25: %v", err)
	}
}

// TestOpenManyEntries: a ZIP with more entries than a bill has is refused
// before its directory is read, whatever count its end record states.
func TestOpenManyEntries(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	name, _ := bill.FileNames(pid, day)
	for i := range bill.MaxEntries + 1 {
		if _, err := zw.Create(fmt.Sprintf("empty-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := zw.Create(name); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, b.Bytes()); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "entries in the ZIP") {
		t.Fatalf("Open = %v, want ErrBadBill for the entries", err)
	}
	// The end record says 2, the directory holds more: counted all the same.
	raw := b.Bytes()
	end := bytes.LastIndex(raw, []byte("PK\x05\x06"))
	binary.LittleEndian.PutUint16(raw[end+8:], 2)
	binary.LittleEndian.PutUint16(raw[end+10:], 2)
	if _, err := open(t, raw); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "more than 16 entries in the ZIP's directory") {
		t.Fatalf("Open of a lying end record = %v", err)
	}
}

// TestOpenBomb: a detail that expands a thousand times is refused once it
// has expanded MaxExpansion times its compressed size, not at 4 GiB.
func TestOpenBomb(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	name, _ := bill.FileNames(pid, day)
	w, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	blank := bytes.Repeat([]byte("\n"), 1<<20)
	for range 64 { // 64 MiB of blank lines, some 64 KiB zipped
		w.Write(blank)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, b.Bytes()); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "times its compressed size") {
		t.Fatalf("Open of %d zipped bytes = %v, want ErrBadBill for the expansion", b.Len(), err)
	}
}
