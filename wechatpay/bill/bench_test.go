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

	"paynotify/internal/procstat"
	"paynotify/model"
	"paynotify/wechatpay/bill"
)

// BenchmarkOpenBigDay is a big merchant's day: a bill of BILL_BENCH_ROWS
// rows (default 1,000,000: 98 % payments, 2 % refunds) in today's layout,
// gzipped, opened (decompressed, hashed and checked against its summary)
// and read through Entries, as a reconciliation run reads it. It reports
// the time of both passes and the peak RSS they added (the peak is reset
// after writing the file). Run it alone:
//
//	go test -run '^$' -bench BenchmarkOpenBigDay -benchtime 1x ./wechatpay/bill
func BenchmarkOpenBigDay(b *testing.B) {
	rows := 1_000_000
	if s := os.Getenv("BILL_BENCH_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil || rows < 100 {
			b.Fatalf("BILL_BENCH_ROWS=%q", s)
		}
	}
	path := b.TempDir() + "/bill.csv.gz"
	hash, size, err := writeBigDay(path, rows)
	if err != nil {
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
		bf, err := bill.Open(f, size, bill.HashSHA1, hash)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := bf.Entries(func(model.BillEntry) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if n != rows || bf.Totals.Payments+bf.Totals.Refunds != rows {
			b.Fatalf("%d entries, totals %+v; want %d", n, bf.Totals, rows)
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
	b.Logf("%d rows (%d MiB gzipped) opened and read in %s (%s of CPU), peak RSS %d MiB",
		rows, size>>20, took.Round(time.Millisecond), cpu.Round(time.Millisecond), peak>>20)
}

// writeBigDay writes the day's bill: every 50th row is a refund of the
// payment before it.
func writeBigDay(path string, rows int) (hash string, size int64, err error) {
	f, err := os.Create(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, model.Beijing)
	rate := decimal.RequireFromString("0.006")
	hash, err = bill.WriteGzip(f, header, func(w *bill.Writer) error {
		for i, n := 0, 0; n < rows; i++ {
			amount := decimal.New(int64(i%10000+1), -2)
			p := bill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: fmt.Sprintf("42000020261130%014d", i),
				OutTradeNo: fmt.Sprintf("BIG%010d", i), Amount: amount, Received: amount, Fee: amount.Mul(rate).Round(5).Neg(),
				FinishedAt: day.Add(time.Duration(i) * (24 * time.Hour) / time.Duration(rows+1)).UTC()}, Subject: "咖啡豆 1kg"}
			if err := w.Write(p); err != nil {
				return err
			}
			n++
			if i%49 == 48 && n < rows {
				half := decimal.New(max(int64(i%10000+1)/2, 1), -2)
				r := p
				r.Kind, r.OutRequestNo, r.RefundID, r.OrderAmount = model.BillRefund, fmt.Sprintf("RF%010d", i), fmt.Sprintf("503000%022d", i), amount
				r.Amount, r.Received, r.Fee = half.Neg(), half.Neg(), half.Mul(rate).Round(5)
				if err := w.Write(r); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	return hash, st.Size(), nil
}
