package service_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay/bill"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/internal/procstat"
	"paynotify/model"
	"paynotify/service"
)

// BenchmarkReconcileBigDay is a big merchant's day: a bill of
// RECON_BENCH_ROWS lines (default 1,000,000: 98 % payments, 2 % refunds)
// in the real layout, parsed and matched against a ledger that holds every
// one of them, on MariaDB (TEST_MYSQL_DSN). It reports the time of the run
// and the peak RSS the run added (the peak is reset after seeding). Run it
// alone:
//
//	TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' go test -run '^$' \
//	  -bench BenchmarkReconcileBigDay -benchtime 1x -timeout 30m ./service
func BenchmarkReconcileBigDay(b *testing.B) {
	if os.Getenv("TEST_MYSQL_DSN") == "" {
		b.Skip("TEST_MYSQL_DSN is not set: the benchmark runs on MariaDB")
	}
	rows := 1_000_000
	if s := os.Getenv("RECON_BENCH_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil || rows < 100 {
			b.Fatalf("RECON_BENCH_ROWS=%q", s)
		}
	}
	store := daotest.Open(b, dao.DriverMySQL)
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, model.Beijing)
	path := b.TempDir() + "/bill.zip"
	lines := bigDay(rows, day)

	seedStart := time.Now()
	if err := writeBigBill(path, day, lines); err != nil {
		b.Fatal(err)
	}
	if err := seedLedger(store, lines); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d lines (bill and ledger) in %s", rows, time.Since(seedStart).Round(time.Second))
	lines = nil
	runtime.GC()
	debug.FreeOSMemory()
	procstat.ResetPeakRSS(b)

	rec := service.NewBillReconciler(store, fileBills(path), service.NewPayments(store), quietLog)
	rec.SetClock(func() time.Time { return day.AddDate(0, 0, 1).Add(9*time.Hour + 30*time.Minute) })
	if s := os.Getenv("RECON_BENCH_BATCH"); s != "" {
		rec.Batch, _ = strconv.Atoi(s)
	}
	b.ResetTimer()
	start := time.Now()
	run, err := rec.Run(context.Background(), day.Format("2006-01-02"))
	took := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if run.State != model.ReconDone || run.Unresolved != 0 || run.Bill.Payments+run.Bill.Refunds != rows {
		b.Fatalf("run %+v", run)
	}
	peak := procstat.PeakRSS(b)
	b.ReportMetric(took.Seconds(), "s/run")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(rows)/took.Seconds(), "lines/s")
	b.Logf("%d lines reconciled in %s, peak RSS %d MiB", rows, took.Round(time.Millisecond), peak>>20)
}

// bigLine is one generated bill line.
type bigLine struct {
	tradeNo, outTradeNo, requestNo string
	cents                          int64
	at                             time.Time
}

// bigDay generates the day's lines: every 50th is a refund of the payment
// before it.
func bigDay(n int, day time.Time) []bigLine {
	out := make([]bigLine, 0, n)
	for i := 0; len(out) < n; i++ {
		at := day.Add(time.Duration(i) * (24 * time.Hour) / time.Duration(n+1))
		p := bigLine{tradeNo: fmt.Sprintf("2026113022001%015d", i), outTradeNo: fmt.Sprintf("BIG%010d", i), cents: int64(i%10000 + 1), at: at}
		out = append(out, p)
		if i%49 == 48 && len(out) < n {
			r := p
			r.requestNo = fmt.Sprintf("RF%010d", i)
			r.cents = p.cents / 2
			if r.cents == 0 {
				r.cents = 1
			}
			out = append(out, r)
		}
	}
	return out
}

func (l bigLine) amount() decimal.Decimal { return decimal.New(l.cents, -2) }

var feeRate = decimal.RequireFromString("0.006")

// writeBigBill writes the lines as Alipay's bill ZIP.
func writeBigBill(path string, day time.Time, lines []bigLine) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return bill.WriteZip(f, bill.Header{Account: rigSellerID, Date: day}, func(w *bill.Writer) error {
		for _, l := range lines {
			e := model.BillEntry{Kind: model.BillPayment, TradeNo: l.tradeNo, OutTradeNo: l.outTradeNo,
				Amount: l.amount(), Received: l.amount(), Fee: l.amount().Mul(feeRate).Round(2).Neg(), FinishedAt: l.at.UTC()}
			if l.requestNo != "" {
				e.Kind, e.OutRequestNo = model.BillRefund, l.requestNo
				e.Amount, e.Received, e.Fee = e.Amount.Neg(), e.Received.Neg(), e.Fee.Neg()
			}
			if err := w.Write(bill.Line{BillEntry: e, Subject: "咖啡豆 1kg"}); err != nil {
				return err
			}
		}
		return nil
	})
}

// seedLedger records every line in the ledger, as the notification path
// and the refund worker would have: multi-row INSERTs of 2,000.
func seedLedger(store *dao.Store, lines []bigLine) error {
	db := store.SQL()
	const chunk = 2000
	var pays, refunds []bigLine
	for _, l := range lines {
		if l.requestNo == "" {
			pays = append(pays, l)
		} else {
			refunds = append(refunds, l)
		}
	}
	for i := 0; i < len(pays); i += chunk {
		part := pays[i:min(i+chunk, len(pays))]
		var q strings.Builder
		args := make([]any, 0, len(part)*5)
		q.WriteString("INSERT INTO oms_order_payment (provider, trade_no, order_id, out_trade_no, amount, state, paid_at) VALUES ")
		for j, l := range part {
			if j > 0 {
				q.WriteString(",")
			}
			q.WriteString("('alipay', ?, ?, ?, ?, 'APPLIED', ?)")
			args = append(args, l.tradeNo, i+j+1, l.outTradeNo, l.amount().StringFixed(2), l.at.UTC())
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			return err
		}
	}
	for i := 0; i < len(refunds); i += chunk {
		part := refunds[i:min(i+chunk, len(refunds))]
		var q strings.Builder
		args := make([]any, 0, len(part)*6)
		q.WriteString("INSERT INTO oms_refund (out_request_no, kind, provider, trade_no, out_trade_no, order_id, amount, state, update_time) VALUES ")
		for j, l := range part {
			if j > 0 {
				q.WriteString(",")
			}
			q.WriteString("(?, 'AFTER_SALE', 'alipay', ?, ?, ?, ?, 'REFUNDED', ?)")
			args = append(args, l.requestNo, l.tradeNo, l.outTradeNo, i+j+1, l.amount().StringFixed(2), l.at.UTC())
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// fileBills serves the bill file at path for any day.
func fileBills(path string) service.BillSource {
	return service.BillSourceFunc(func(ctx context.Context, day time.Time) (model.Bill, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err == nil {
			var bf *bill.File
			if bf, err = bill.Open(f, st.Size()); err == nil {
				return fileBill{File: bf, f: f}, nil
			}
		}
		f.Close()
		return nil, err
	})
}

type fileBill struct {
	*bill.File
	f *os.File
}

func (b fileBill) BillTotals() model.BillTotals { return b.File.Totals }
func (b fileBill) Close() error                 { return b.f.Close() }
