package service_test

import (
	"context"
	"fmt"
	"io"
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
	wxbill "paynotify/wechatpay/bill"
)

// BenchmarkReconcileBigDay is a big merchant's day, for each provider: a
// bill of RECON_BENCH_ROWS lines (default 1,000,000: 98 % payments, 2 %
// refunds) in the provider's real layout — Alipay's ZIP, WeChat Pay's
// gzip, opened with its SHA1 checked against the hash_value as the
// adapter opens it — parsed and matched against a ledger that holds every
// one of them, on MariaDB (TEST_MYSQL_DSN). It reports the time of the
// run, the CPU this process spent on it and the peak RSS (the peak is
// reset after seeding). Run it alone, both providers one after the other:
//
//	TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' go test -run '^$' \
//	  -bench BenchmarkReconcileBigDay -benchtime 1x -timeout 30m ./service
//
// or one of them: -bench 'BenchmarkReconcileBigDay/WechatPay'.
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
	for _, p := range bigDayProviders {
		b.Run(p.name, func(b *testing.B) { benchmarkBigDay(b, p, rows) })
	}
}

// bigDayProvider is one provider's side of the big day: its trade
// numbers, and its bill written to a file and read back as its adapter
// reads it.
type bigDayProvider struct {
	name     string
	provider model.Provider
	// tradeNo is the format of payment i's trade number.
	tradeNo string
	// write writes the lines as the provider's bill file at path and
	// returns the source that opens it.
	write func(path string, day time.Time, lines []bigLine) (service.BillSource, error)
}

var bigDayProviders = []bigDayProvider{
	{name: "Alipay", provider: model.ProviderAlipay, tradeNo: "2026113022001%015d", write: writeAlipayBigBill},
	{name: "WechatPay", provider: model.ProviderWechatpay, tradeNo: "42000020261130%014d", write: writeWechatBigBill},
}

func benchmarkBigDay(b *testing.B, p bigDayProvider, rows int) {
	store := daotest.Open(b, dao.DriverMySQL)
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, model.Beijing)
	lines := bigDay(rows, day, p.tradeNo)

	seedStart := time.Now()
	bills, err := p.write(b.TempDir()+"/bill", day, lines)
	if err != nil {
		b.Fatal(err)
	}
	if err := seedLedger(store, p.provider, lines); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d %s lines (bill and ledger) in %s", rows, p.name, time.Since(seedStart).Round(time.Second))
	lines = nil
	runtime.GC()
	debug.FreeOSMemory()
	procstat.ResetPeakRSS(b)

	rec := service.NewBillReconciler(store, bills, service.NewPayments(store), quietLog)
	rec.Provider = p.provider
	rec.SetClock(func() time.Time { return day.AddDate(0, 0, 1).Add(10 * time.Hour) })
	if s := os.Getenv("RECON_BENCH_BATCH"); s != "" {
		rec.Batch, _ = strconv.Atoi(s)
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), procstat.CPUTime(b)
	run, err := rec.Run(context.Background(), day.Format("2006-01-02"))
	took, cpu := time.Since(start), procstat.CPUTime(b)-cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if run.State != model.ReconDone || run.Provider != p.provider || run.Unresolved != 0 || run.Bill.Payments+run.Bill.Refunds != rows {
		b.Fatalf("run %+v", run)
	}
	peak := procstat.PeakRSS(b)
	b.ReportMetric(took.Seconds(), "s/run")
	b.ReportMetric(cpu.Seconds(), "cpu-s/run")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(rows)/took.Seconds(), "lines/s")
	b.Logf("%d %s lines reconciled in %s (%s of this process's CPU), peak RSS %d MiB",
		rows, p.name, took.Round(time.Millisecond), cpu.Round(time.Millisecond), peak>>20)
}

// bigLine is one generated bill line.
type bigLine struct {
	tradeNo, outTradeNo, requestNo string
	cents                          int64
	// paid is a refund's payment, in cents.
	paid int64
	at   time.Time
}

// bigDay generates the day's lines: every 50th is a refund of the payment
// before it. Payment i's trade number is fmt.Sprintf(tradeNo, i).
func bigDay(n int, day time.Time, tradeNo string) []bigLine {
	out := make([]bigLine, 0, n)
	for i := 0; len(out) < n; i++ {
		at := day.Add(time.Duration(i) * (24 * time.Hour) / time.Duration(n+1))
		p := bigLine{tradeNo: fmt.Sprintf(tradeNo, i), outTradeNo: fmt.Sprintf("BIG%010d", i), cents: int64(i%10000 + 1), at: at}
		out = append(out, p)
		if i%49 == 48 && len(out) < n {
			r := p
			r.requestNo = fmt.Sprintf("RF%010d", i)
			r.cents, r.paid = max(p.cents/2, 1), p.cents
			out = append(out, r)
		}
	}
	return out
}

func (l bigLine) amount() decimal.Decimal { return decimal.New(l.cents, -2) }

var feeRate = decimal.RequireFromString("0.006")

// entry is the line as a bill entry, its fee charged (given back on a
// refund).
func (l bigLine) entry(fee decimal.Decimal) model.BillEntry {
	e := model.BillEntry{Kind: model.BillPayment, TradeNo: l.tradeNo, OutTradeNo: l.outTradeNo,
		Amount: l.amount(), Received: l.amount(), Fee: fee.Neg(), FinishedAt: l.at.UTC()}
	if l.requestNo != "" {
		e.Kind, e.OutRequestNo = model.BillRefund, l.requestNo
		e.Amount, e.Received, e.Fee = e.Amount.Neg(), e.Received.Neg(), fee
	}
	return e
}

// writeAlipayBigBill writes the lines as Alipay's bill ZIP (fees at 0.6 %
// to the fen).
func writeAlipayBigBill(path string, day time.Time, lines []bigLine) (service.BillSource, error) {
	err := writeFile(path, func(f io.Writer) error {
		return bill.WriteZip(f, bill.Header{Account: rigSellerID, Date: day}, func(w *bill.Writer) error {
			for _, l := range lines {
				if err := w.Write(bill.Line{BillEntry: l.entry(l.amount().Mul(feeRate).Round(2)), Subject: "咖啡豆 1kg"}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return fileBills(path, func(f *os.File, size int64) (model.Bill, error) {
		bf, err := bill.Open(f, size)
		if err != nil {
			return nil, err
		}
		return openedBill{entries: bf.Entries, totals: bf.Totals, f: f}, nil
	}), err
}

// writeWechatBigBill writes the lines as WeChat Pay's gzip bill (手续费 at
// 0.6 % to five decimals, as WeChat Pay writes it, and the summary rows);
// its source checks the file's SHA1 against the hash_value WriteGzip
// returned, as the adapter checks the query's.
func writeWechatBigBill(path string, day time.Time, lines []bigLine) (service.BillSource, error) {
	var hash string
	err := writeFile(path, func(f io.Writer) (err error) {
		hash, err = wxbill.WriteGzip(f, wxbill.Header{AppID: wxAppID, MchID: wxMchID}, func(w *wxbill.Writer) error {
			for _, l := range lines {
				line := wxbill.Line{BillEntry: l.entry(decimal.New(l.cents*6, -5)), Subject: "咖啡豆 1kg"}
				if l.requestNo != "" {
					line.RefundID, line.OrderAmount = "50300"+l.requestNo, decimal.New(l.paid, -2)
				}
				if err := w.Write(line); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	return fileBills(path, func(f *os.File, size int64) (model.Bill, error) {
		bf, err := wxbill.Open(f, size, wxbill.HashSHA1, hash)
		if err != nil {
			return nil, err
		}
		return openedBill{entries: bf.Entries, totals: bf.Totals, f: f}, nil
	}), err
}

// writeFile creates the file at path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// seedLedger records every line in the ledger as provider's, as the
// notification path and the refund worker would have: multi-row INSERTs
// of 2,000.
func seedLedger(store *dao.Store, provider model.Provider, lines []bigLine) error {
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
		args := make([]any, 0, len(part)*6)
		q.WriteString("INSERT INTO oms_order_payment (provider, trade_no, order_id, out_trade_no, amount, state, paid_at) VALUES ")
		for j, l := range part {
			if j > 0 {
				q.WriteString(",")
			}
			q.WriteString("(?, ?, ?, ?, ?, 'APPLIED', ?)")
			args = append(args, provider, l.tradeNo, i+j+1, l.outTradeNo, l.amount().StringFixed(2), l.at.UTC())
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			return err
		}
	}
	for i := 0; i < len(refunds); i += chunk {
		part := refunds[i:min(i+chunk, len(refunds))]
		var q strings.Builder
		args := make([]any, 0, len(part)*7)
		q.WriteString("INSERT INTO oms_refund (out_request_no, kind, provider, trade_no, out_trade_no, order_id, amount, state, update_time) VALUES ")
		for j, l := range part {
			if j > 0 {
				q.WriteString(",")
			}
			q.WriteString("(?, 'AFTER_SALE', ?, ?, ?, ?, ?, 'REFUNDED', ?)")
			args = append(args, l.requestNo, provider, l.tradeNo, l.outTradeNo, i+j+1, l.amount().StringFixed(2), l.at.UTC())
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// fileBills serves the bill file at path for any day, opened by open
// (which checks it whole, as the provider's adapter does).
func fileBills(path string, open func(f *os.File, size int64) (model.Bill, error)) service.BillSource {
	return service.BillSourceFunc(func(ctx context.Context, day time.Time) (model.Bill, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err == nil {
			var b model.Bill
			if b, err = open(f, st.Size()); err == nil {
				return b, nil
			}
		}
		f.Close()
		return nil, err
	})
}

// openedBill is a bill file opened and checked by its provider's package.
type openedBill struct {
	entries func(func(model.BillEntry) error) error
	totals  model.BillTotals
	f       *os.File
}

func (b openedBill) BillTotals() model.BillTotals                 { return b.totals }
func (b openedBill) Entries(fn func(model.BillEntry) error) error { return b.entries(fn) }
func (b openedBill) Close() error                                 { return b.f.Close() }
