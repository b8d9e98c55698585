package bill_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay/bill"
	"paynotify/internal/procstat"
	"paynotify/model"
)

// BenchmarkOpenBigDay is a big merchant's day: a bill ZIP of
// BILL_BENCH_ROWS lines (default 1,000,000: 98 % payments, 2 % refunds)
// opened (read once to check its totals) and read through Entries, as a
// reconciliation run reads it — the parsing alone, beside WeChat Pay's
// benchmark of the same name. It reports the time, the CPU and the peak
// RSS both passes added. Run it alone:
//
//	go test -run '^$' -bench BenchmarkOpenBigDay -benchtime 1x ./alipay/bill
func BenchmarkOpenBigDay(b *testing.B) {
	rows := 1_000_000
	if s := os.Getenv("BILL_BENCH_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil || rows < 100 {
			b.Fatalf("BILL_BENCH_ROWS=%q", s)
		}
	}
	path := b.TempDir() + "/bill.zip"
	if err := writeBigDay(path, rows); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	procstat.ResetPeakRSS(b)

	b.ResetTimer()
	start, cpu0 := time.Now(), procstat.CPUTime(b)
	for range b.N {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			b.Fatal(err)
		}
		bf, err := bill.Open(f, st.Size())
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := bf.Entries(func(model.BillEntry) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if n != rows {
			b.Fatalf("%d entries; want %d", n, rows)
		}
	}
	took := time.Since(start) / time.Duration(b.N)
	cpu := (procstat.CPUTime(b) - cpu0) / time.Duration(b.N)
	b.StopTimer()
	peak := procstat.PeakRSS(b)
	b.ReportMetric(took.Seconds(), "s/run")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(cpu.Seconds(), "cpu-s/run")
	b.ReportMetric(float64(rows)/took.Seconds(), "lines/s")
	b.Logf("%d lines opened and read in %s (%s of CPU), peak RSS %d MiB", rows, took.Round(time.Millisecond), cpu.Round(time.Millisecond), peak>>20)
}

// writeBigDay writes the day's bill: every 50th line is a refund of the
// payment before it.
func writeBigDay(path string, rows int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rate := decimal.RequireFromString("0.006")
	return bill.WriteZip(f, bill.Header{Account: pid, Date: day}, func(w *bill.Writer) error {
		for i, n := 0, 0; n < rows; i++ {
			amount := decimal.New(int64(i%10000+1), -2)
			p := model.BillEntry{Kind: model.BillPayment, TradeNo: fmt.Sprintf("2026113022001%015d", i), OutTradeNo: fmt.Sprintf("BIG%010d", i),
				Amount: amount, Received: amount, Fee: amount.Mul(rate).Round(2).Neg(),
				FinishedAt: day.Add(time.Duration(i) * (24 * time.Hour) / time.Duration(rows+1)).UTC()}
			if err := w.Write(bill.Line{BillEntry: p, Subject: "咖啡豆 1kg"}); err != nil {
				return err
			}
			n++
			if i%49 == 48 && n < rows {
				half := decimal.New(max(int64(i%10000+1)/2, 1), -2)
				r := p
				r.Kind, r.OutRequestNo = model.BillRefund, fmt.Sprintf("RF%010d", i)
				r.Amount, r.Received, r.Fee = half.Neg(), half.Neg(), half.Mul(rate).Round(2)
				if err := w.Write(bill.Line{BillEntry: r, Subject: "咖啡豆 1kg"}); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
}
