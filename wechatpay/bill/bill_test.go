package bill_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/wechatpay/bill"
)

func open(t *testing.T, f fixture) (*bill.File, error) {
	t.Helper()
	return bill.Open(bytes.NewReader(f.gz), int64(len(f.gz)), "SHA1", f.hash)
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

func entriesOf(lines []bill.Line) []model.BillEntry {
	var want []model.BillEntry
	for _, l := range lines {
		want = append(want, l.BillEntry)
	}
	return want
}

var decimalEqual = cmp.Comparer(func(a, b decimal.Decimal) bool { return a.Equal(b) })

func TestOpenGood(t *testing.T) {
	sampleTotals := model.BillTotals{Payments: 3, PaymentReceived: d("188.01"), Refunds: 1, RefundReceived: d("-30.00"), Fees: d("-0.948")}
	var payments, noApp []bill.Line
	for _, l := range sample {
		if l.Kind == model.BillPayment {
			payments = append(payments, l)
		}
		l.App = "" // reordered.csv.gz has no 公众账号ID column
		noApp = append(noApp, l)
	}
	for _, c := range []struct {
		file    string
		want    []bill.Line
		totals  model.BillTotals
		summary bill.Summary
	}{
		{"today.csv.gz", sample, sampleTotals, bill.Summary{Rows: 4, Settlement: d("188.01"), Refund: d("30.00"),
			Fee: d("0.948"), Order: d("288.01"), RefundAsked: d("30.00")}},
		{"reordered.csv.gz", noApp, sampleTotals, bill.Summary{Rows: 4, Settlement: d("188.01"), Refund: d("30.00"),
			Fee: d("0.948"), Order: d("288.01"), RefundAsked: d("30.00")}},
		{"old.csv.gz", payments, model.BillTotals{Payments: 3, PaymentReceived: d("188.01"), Fees: d("-1.128")},
			bill.Summary{Rows: 3, Settlement: d("188.01"), Fee: d("1.128"), Order: d("188.01")}},
		{"empty_day.csv.gz", nil, model.BillTotals{}, bill.Summary{}},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := open(t, readFixture(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.totals, f.Totals, decimalEqual); diff != "" {
				t.Errorf("totals (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.summary, f.Summary, decimalEqual); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(entriesOf(c.want), entries(t, f), decimalEqual); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOpenRealLayout reads a day written as WeChat Pay's documentation
// shows it, byte for byte, not by this package's writer.
func TestOpenRealLayout(t *testing.T) {
	f, err := open(t, gzWith([]byte(realDay)))
	if err != nil {
		t.Fatal(err)
	}
	pay, ref := at("15:35:18"), at("16:59:46")
	want := []model.BillEntry{
		{Kind: model.BillPayment, TradeNo: "4200000910202611282955148400", OutTradeNo: "S20261130153505214586",
			Amount: d("9.90"), Received: d("9.90"), Fee: d("-0.0594"), FinishedAt: pay, App: "wx81be3101902f7cb2"},
		{Kind: model.BillRefund, TradeNo: "4200000910202611282955148400", OutTradeNo: "S20261130153505214586", OutRequestNo: "RF-1",
			Amount: d("-9.90"), Received: d("-9.90"), Fee: d("0.0594"), FinishedAt: ref, App: "wx81be3101902f7cb2"},
	}
	if diff := cmp.Diff(want, entries(t, f), decimalEqual); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(bill.Summary{Rows: 2, Settlement: d("9.90"), Refund: d("9.90"), Order: d("19.80"), RefundAsked: d("9.90")},
		f.Summary, decimalEqual); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// TestOpenDamaged: every damaged file is refused with a reason naming the
// fault, and none of its entries reaches a caller.
func TestOpenDamaged(t *testing.T) {
	today := readFixture(t, "today.csv.gz")
	for _, c := range []struct {
		name   string
		f      fixture
		reason string
	}{
		{"NotGzip", readFixture(t, "not_gzip.csv.gz"), "not a readable gzip"},
		{"TruncatedGzip", readFixture(t, "truncated.csv.gz"), "not a readable gzip"},
		{"GzipWithTrailingGarbage", fixture{gz: append(append([]byte{}, today.gz...), "garbage"...), hash: today.hash}, "not a readable gzip"},
		{"HashMismatch", fixture{gz: today.gz, hash: bill.Hash([]byte("another day"))}, "SHA1 of the bill is"},
		// The hash of the gzip, not of the bill in it.
		{"HashOfTheGzip", fixture{gz: today.gz, hash: bill.Hash(today.gz)}, "not the file WeChat Pay vouched for"},
		{"HashNotHex", fixture{gz: today.gz, hash: "not-a-sha1"}, "is not a SHA1 in hex"},
		{"HashEmpty", fixture{gz: today.gz}, "is not a SHA1 in hex"},
		{"GBK", readFixture(t, "gbk.csv.gz"), "not UTF-8 text"},
		{"MissingColumn", readFixture(t, "missing_column.csv.gz"), "header lacks column(s) 手续费"},
		{"SummaryDisagrees", readFixture(t, "summary_disagrees.csv.gz"), "the summary says 应结订单总金额 188.02; the rows' 应结订单金额 add up to 188.01"},
		{"SummaryFeeDisagrees", readFixture(t, "summary_fee_disagrees.csv.gz"), "the summary says 手续费总金额 0.94801; the rows' 手续费 add up to 0.94800"},
		{"RowsMissing", readFixture(t, "rows_missing.csv.gz"), "the summary says 总交易单数 2; the file holds 0 rows"},
		{"TruncatedBill", readFixture(t, "truncated_bill.csv.gz"), "the file ends mid-row: truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := open(t, c.f)
			if !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Open = %v, %v; want ErrBadBill with %q", f, err, c.reason)
			}
		})
	}
}

// TestOpenHashBeforeContent: a file that is not the one vouched for is
// reported as such even when its text is damaged too.
func TestOpenHashBeforeContent(t *testing.T) {
	f := readFixture(t, "summary_disagrees.csv.gz")
	f.hash = bill.Hash([]byte("another day"))
	if _, err := open(t, f); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "SHA1 of the bill is") {
		t.Fatalf("Open = %v; want the hash mismatch", err)
	}
}

func TestOpenHashType(t *testing.T) {
	f := readFixture(t, "today.csv.gz")
	for _, typ := range []string{"SHA1", "sha1"} {
		if _, err := bill.Open(bytes.NewReader(f.gz), int64(len(f.gz)), typ, strings.ToUpper(f.hash)); err != nil {
			t.Errorf("hash_type %s, upper-case hash_value: %v", typ, err)
		}
	}
	if _, err := bill.Open(bytes.NewReader(f.gz), int64(len(f.gz)), "SM3", f.hash); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), `hash_type "SM3"`) {
		t.Errorf("hash_type SM3: %v", err)
	}
}

// TestScanLines covers the faults a generator does not make, line by line.
func TestScanLines(t *testing.T) {
	head := strings.Join(bill.Columns, ",") + "\r\n"
	type cells map[string]string
	row := func(c cells) string {
		v := cells{bill.ColTime: "2026-11-30 10:00:00", bill.ColTradeNo: "4200001", bill.ColOutTradeNo: "SN-1", bill.ColState: "SUCCESS",
			bill.ColSettlement: "1.00", bill.ColOrder: "1.00", bill.ColFee: "0.00600", bill.ColRefund: "0.00", bill.ColRefundAsked: "0.00",
			bill.ColOutRefundNo: "0", bill.ColRefundID: "0"}
		for k, x := range c {
			v[k] = x
		}
		out := make([]string, len(bill.Columns))
		for i, col := range bill.Columns {
			out[i] = "`" + v[col]
		}
		return strings.Join(out, ",") + "\r\n"
	}
	refund := cells{bill.ColState: "REFUND", bill.ColSettlement: "0.00", bill.ColRefund: "0.40", bill.ColRefundAsked: "0.40",
		bill.ColOutRefundNo: "RF-1", bill.ColRefundStatus: "SUCCESS", bill.ColFee: "-0.00240"}
	with := func(c cells, more cells) cells {
		out := cells{}
		for k, v := range c {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	sum := func(n int, settlement, refund, fee, order, asked string) string {
		return strings.Join(bill.SummaryColumns, ",") + "\r\n`" + itoa(n) + ",`" + settlement + ",`" + refund + ",`0.00,`" + fee + ",`" + order + ",`" + asked + "\r\n"
	}
	good := row(nil)
	goodSum := sum(1, "1.00", "0.00", "0.00600", "1.00", "0.00")
	for _, c := range []struct {
		name, text, reason string
		entries            int
	}{
		{"Good", head + good + goodSum, "", 1},
		{"LF", strings.ReplaceAll(head+good+goodSum, "\r\n", "\n"), "", 1},
		{"NoLastLineEnd", strings.TrimSuffix(head+good+goodSum, "\r\n"), "", 1},
		{"BOM", "\ufeff" + head + good + goodSum, "", 1},
		{"BacktickedSummaryHeader", head + good + "`" + strings.Join(bill.SummaryColumns, ",`") + "\r\n`1,`1.00,`0.00,`0.00,`0.00600,`1.00,`0.00\r\n", "", 1},
		{"BlankLines", head + "\r\n" + good + "\r\n" + goodSum + "\r\n\r\n", "", 1},
		{"Refund", head + good + row(refund) + sum(2, "1.00", "0.40", "0.00360", "2.00", "0.40"), "", 2},
		{"RefundProcessing", head + good + row(with(refund, cells{bill.ColRefundStatus: "PROCESSING"})) + sum(2, "1.00", "0.40", "0.00360", "2.00", "0.40"), "", 1},
		{"Revoked", head + good + row(cells{bill.ColState: "REVOKED"}) + sum(2, "2.00", "0.00", "0.01200", "2.00", "0.00"), "", 1},
		{"FeeTwoDecimals", head + row(cells{bill.ColFee: "0.01"}) + sum(1, "1.00", "0.00", "0.01", "1.00", "0.00"), "", 1},
		{"UnknownState", head + row(cells{bill.ColState: "CLOSED"}) + goodSum, `交易状态 "CLOSED" is neither SUCCESS nor REFUND`, 0},
		{"NoBacktick", head + strings.ReplaceAll(good, "`", "") + goodSum, "not prefixed by a backtick", 0},
		{"BadAmount", head + row(cells{bill.ColSettlement: "1,00"}) + goodSum, `应结订单金额 "1,00" is not an amount`, 0},
		{"CellMissing", head + strings.Replace(good, ",`SN-1", "", 1) + goodSum, "26 cells, the header has 27", 0},
		{"ThreeDecimals", head + row(cells{bill.ColSettlement: "1.001"}) + goodSum, `应结订单金额 "1.001" is not an amount`, 0},
		{"SixDecimalFee", head + row(cells{bill.ColFee: "0.006000"}) + goodSum, `手续费 "0.006000" is not an amount`, 0},
		{"NegativePayment", head + row(cells{bill.ColOrder: "-1.00", bill.ColSettlement: "-1.00"}) + sum(1, "-1.00", "0.00", "0.00600", "-1.00", "0.00"), "a payment's amounts are positive", 0},
		{"ZeroRefund", head + good + row(with(refund, cells{bill.ColRefund: "0.00", bill.ColRefundAsked: "0.00"})) + goodSum, "a refund's amounts are positive", 0},
		{"BadTime", head + row(cells{bill.ColTime: "30/11/2026"}) + goodSum, `交易时间 "30/11/2026"`, 0},
		{"NoSuchDay", head + row(cells{bill.ColTime: "2026-02-30 10:00:00"}) + goodSum, `交易时间 "2026-02-30 10:00:00"`, 0},
		{"HourPast23", head + row(cells{bill.ColTime: "2026-11-30 24:00:00"}) + goodSum, `交易时间 "2026-11-30 24:00:00"`, 0},
		{"EmptyTradeNo", head + row(cells{bill.ColTradeNo: ""}) + goodSum, "微信订单号 is empty", 0},
		{"RefundWithoutNumber", head + good + row(with(refund, cells{bill.ColOutRefundNo: "0"})) + goodSum, "商户退款单号 is empty", 0},
		{"NonASCIITradeNo", head + row(cells{bill.ColOutTradeNo: "订单1"}) + goodSum, "商户订单号 is not an ASCII identifier", 0},
		{"NonASCIIAppID", head + row(cells{bill.ColAppID: "小程序"}) + goodSum, "公众账号ID is not an ASCII identifier", 0},
		{"EmptyAppID", head + row(cells{bill.ColAppID: ""}) + goodSum, "", 1},
		{"ZeroAppID", head + row(cells{bill.ColAppID: "0"}) + goodSum, "", 1},
		{"OneMerchant", head + row(cells{bill.ColMchID: "1900000001"}) + row(cells{bill.ColMchID: "1900000001"}) + sum(2, "2.00", "0.00", "0.01200", "2.00", "0.00"), "", 2},
		{"TwoMerchants", head + row(cells{bill.ColMchID: "1900000001"}) + row(cells{bill.ColMchID: "1900009999"}) + sum(2, "2.00", "0.00", "0.01200", "2.00", "0.00"), `商户号 "1900009999", the rows before it "1900000001"`, 0},
		{"RowAfterSummary", head + good + goodSum + good, "a line after the summary", 0},
		{"RowBeforeHeader", good + head + good + goodSum, "a row before the header", 0},
		{"ColumnTwice", strings.TrimSuffix(head, "\r\n") + ",手续费\r\n" + good + goodSum, `column "手续费" twice in the header`, 0},
		{"SummaryCount", head + good + sum(2, "1.00", "0.00", "0.00600", "1.00", "0.00"), "the summary says 总交易单数 2; the file holds 1 rows", 0},
		{"SummaryOrderDisagrees", head + good + sum(1, "1.00", "0.00", "0.00600", "1.01", "0.00"), "the summary says 订单总金额 1.01; the rows' 订单金额 add up to 1.00", 0},
		{"SummaryRefundDisagrees", head + good + row(refund) + sum(2, "1.00", "0.41", "0.00360", "2.00", "0.40"), "the summary says 退款总金额 0.41", 0},
		{"SummaryLacksColumn", head + good + "总交易单数,应结订单总金额\r\n`1,`1.00\r\n", "summary header lacks column(s) 手续费总金额", 0},
		{"SummaryValuesShort", head + good + strings.Join(bill.SummaryColumns, ",") + "\r\n`1,`1.00\r\n", "2 values in the summary row, its header has 7", 0},
		{"SummaryNotACount", head + good + strings.Join(bill.SummaryColumns, ",") + "\r\n`one,`1.00,`0.00,`0.00,`0.00600,`1.00,`0.00\r\n", `总交易单数 "one" is not a count`, 0},
		{"NoSummary", head + good, "no summary", 0},
		{"SummaryHeaderOnly", head + good + strings.Join(bill.SummaryColumns, ",") + "\r\n", "a summary header without its row", 0},
		{"Empty", "", "no header row", 0},
		{"NotUTF8", head + strings.Replace(good, "SN-1", "SN-\xff", 1) + goodSum, "not UTF-8 text", 0},
		{"LongLine", head + strings.Repeat("`x,", 40000) + "\r\n" + goodSum, "line longer than", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			_, err := bill.Scan(strings.NewReader(c.text), func(model.BillEntry) error { n++; return nil })
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if n != c.entries {
					t.Fatalf("%d entries, want %d", n, c.entries)
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
	f, err := open(t, readFixture(t, "today.csv.gz"))
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

// TestOpenCapped: a bill that decompresses past the cap (a gzip bomb) is
// refused, not read to its end.
func TestOpenCapped(t *testing.T) {
	f := readFixture(t, "today.csv.gz")
	defer bill.SetMaxBillBytes(int64(len(f.gz)))()
	if _, err := open(t, f); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "decompressed") {
		t.Fatalf("Open = %v; want the cap", err)
	}
}
