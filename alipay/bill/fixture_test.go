package bill_test

import (
	"archive/zip"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay/bill"
	"paynotify/model"
)

var update = flag.Bool("update", false, "rewrite the fixtures in testdata/")

// day is the Beijing day every fixture is the bill of.
var day = time.Date(2026, 11, 30, 0, 0, 0, 0, model.Beijing)

const pid = "2088102177649450"

func d(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// at is a Beijing wall time of the fixture day, in UTC.
func at(hms string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", "2026-11-30 "+hms, model.Beijing)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// sample is the day every good fixture holds: two payments (one at
// 23:59:59), a refund of part of the first, and a payment whose subject
// holds a comma (quoted, as Alipay writes it).
var sample = []bill.Line{
	{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "2026113022001400000000000001", OutTradeNo: "SN-1",
		Amount: d("100.00"), Received: d("100.00"), Fee: d("-0.60"), FinishedAt: at("10:00:05")}, Subject: "商品一"},
	{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "2026113022001400000000000002", OutTradeNo: "SN-2-2",
		Amount: d("0.01"), Received: d("0.01"), Fee: d("0.00"), FinishedAt: at("23:59:59")}, Subject: "测试"},
	{BillEntry: model.BillEntry{Kind: model.BillRefund, TradeNo: "2026113022001400000000000001", OutTradeNo: "SN-1",
		OutRequestNo: "AS-1-abc", Amount: d("-30.00"), Received: d("-30.00"), Fee: d("0.18"), FinishedAt: at("12:00:00")}, Subject: "商品一"},
	{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "2026113022001400000000000003", OutTradeNo: "SN-3",
		Amount: d("88.00"), Received: d("88.00"), Fee: d("-0.53"), FinishedAt: at("08:30:00")}, Subject: `套餐"A",B`},
}

// fixtures are the files under testdata/, each with how it is made.
var fixtures = map[string]func() []byte{
	"today.zip": func() []byte { return zipOf(bill.Header{Account: pid, Date: day}, sample) },
	// Columns moved, one renamed with half-width parentheses, two unknown
	// ones added: found by name all the same.
	"reordered.zip": func() []byte {
		cols := []string{"备注", ColFee(), "商家实收(元)", "新字段", bill.ColOutRequestNo, bill.ColKind, bill.ColTradeNo,
			bill.ColFinished, bill.ColOutTradeNo, bill.ColAmount, "分账金额（元）", bill.ColSubject}
		return zipOf(bill.Header{Account: pid, Date: day, Columns: cols}, sample)
	},
	// A file without rows, as Alipay never serves one (a day without
	// business is NO_BILL_DATA).
	"empty_day.zip": func() []byte { return zipOf(bill.Header{Account: pid, Date: day}, nil) },
	"utf8.zip":      func() []byte { return zipOf(bill.Header{Account: pid, Date: day, UTF8: true}, sample) },
	"missing_column.zip": func() []byte {
		var cols []string
		for _, c := range bill.Columns {
			if c != bill.ColFee {
				cols = append(cols, c)
			}
		}
		return zipOf(bill.Header{Account: pid, Date: day, Columns: cols}, sample)
	},
	"totals_disagree.zip": func() []byte {
		h := bill.Header{Account: pid, Date: day}
		return zipWith(h, detailWith(h, func(w *bill.Writer) error {
			for _, l := range sample {
				w.Write(l)
			}
			t := w.Totals()
			t.PaymentReceived = t.PaymentReceived.Add(d("0.01"))
			return w.CloseStating(t)
		}))
	},
	// A day whose totals say two payments, but whose rows are gone.
	"rows_missing.zip": func() []byte {
		h := bill.Header{Account: pid, Date: day}
		return zipWith(h, detailWith(h, func(w *bill.Writer) error {
			return w.CloseStating(model.BillTotals{Payments: 2, PaymentReceived: d("100.01")})
		}))
	},
	// The detail cut short mid-row (a download that stopped, zipped as
	// it was): no end marker, no totals.
	"truncated_detail.zip": func() []byte {
		var full bytes.Buffer
		w := bill.NewWriter(&full, bill.Header{Account: pid, Date: day})
		for _, l := range sample {
			w.Write(l)
		}
		w.Close()
		cut := full.Bytes()[:bytes.Index(full.Bytes(), []byte("SN-2-2"))]
		return zipWith(bill.Header{Account: pid, Date: day}, cut)
	},
	// The ZIP itself cut in half.
	"truncated.zip": func() []byte {
		b := zipOf(bill.Header{Account: pid, Date: day}, sample)
		return b[:len(b)/2]
	},
	"not_a_zip.zip": func() []byte { return []byte("<html>error</html>") },
}

// ColFee is the fee column with half-width parentheses.
func ColFee() string { return "服务费(元)" }

func zipOf(h bill.Header, lines []bill.Line) []byte {
	var b bytes.Buffer
	err := bill.WriteZip(&b, h, func(w *bill.Writer) error {
		for _, l := range lines {
			if err := w.Write(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return b.Bytes()
}

// zipWith zips detail as it is.
func zipWith(h bill.Header, detail []byte) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	name, _ := bill.FileNames(h.Account, h.Date)
	f, err := zw.Create(name)
	if err == nil {
		_, err = f.Write(detail)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		panic(err)
	}
	return b.Bytes()
}

// detailWith writes a detail whose rows and trailer are up to body.
func detailWith(h bill.Header, body func(*bill.Writer) error) []byte {
	var b bytes.Buffer
	if err := body(bill.NewWriter(&b, h)); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// TestFixtures keeps testdata/ what the generators make (go test -update
// rewrites it): the files are real inputs in Alipay's layout, GBK bytes
// and all, that the other tests read.
func TestFixtures(t *testing.T) {
	for name, make := range fixtures {
		path := filepath.Join("testdata", name)
		want := make()
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its generator (run go test -update)", path)
		}
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
