package service_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"paynotify/alipay/bill"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	wxbill "paynotify/wechatpay/bill"
)

// TestReconcileHostileLastLine: a bill of payments the ledger lacks whose
// last line carries an out_trade_no longer than its column fails the run
// before the first repair — not with "Data too long" after the earlier
// batches were repaired — and the attempt's counts say so: nothing.
func TestReconcileHostileLastLine(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		day := bjTime(t, reconDay+" 00:00:00")
		at := bjTime(t, reconDay+" 11:00:00").UTC()
		for _, last := range []string{strings.Repeat("S", 65), "T00=cmd|' /C calc'!A0"} {
			var b bytes.Buffer
			err := bill.WriteZip(&b, bill.Header{Account: rigSellerID, Date: day}, func(w *bill.Writer) error {
				for i := range 7 { // several batches of two (Batch 2)
					sn := fmt.Sprintf("HL-%d", i)
					if i == 6 {
						sn = last
					}
					if err := w.Write(bill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment,
						TradeNo: fmt.Sprintf("20261130220014000000000009%02d", i), OutTradeNo: sn,
						Amount: dec("1.00"), Received: dec("1.00"), FinishedAt: at}}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			r.fake.ServeBill(reconDay, b.Bytes())
			run := r.run(t, r.recon, reconDay)
			if run.State != model.ReconFailed || !strings.Contains(run.Error, "商户订单号") {
				t.Fatalf("run of a bill ending in %q: %+v", last, run)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment"); n != 0 {
				t.Fatalf("a failed run recorded %d payments", n)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM outbox"); n != 0 {
				t.Fatalf("a failed run wrote %d events", n)
			}
			d, err := r.recon.Detail(ctx, reconDay, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			h := d.History[len(d.History)-1]
			if h.State != model.ReconFailed || h.Repaired != 0 || h.Items != 0 {
				t.Fatalf("the failed attempt: %+v", h)
			}
		}
	})
}

// TestReconcileWechatPayHostileLastLine is TestReconcileHostileLastLine
// through WeChat Pay's reader, whose own checks let these lines through:
// five lost payments, then a last line the ledger could not take (an
// out_trade_no with a space, a '/', a '&', of 65 characters; a
// transaction_id with a space). The run fails before the first repair:
// no payment, no event, no matched line, an attempt that repaired nothing.
func TestReconcileWechatPayHostileLastLine(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		cases := []struct{ name, tradeNo, outTradeNo, field string }{
			{"Space", "4200002026113000000000009990", "W2 X", "out_trade_no"},
			{"Slash", "4200002026113000000000009991", "W2/X", "out_trade_no"},
			{"Ampersand", "4200002026113000000000009992", "W1&X", "out_trade_no"},
			{"TooLong", "4200002026113000000000009993", strings.Repeat("W", 65), "out_trade_no"},
			{"SpacedTransactionID", "4200002026 113000000000009994", "W-OK", "trade_no"},
		}
		for i, c := range cases {
			r := newWechatRig(t, store)
			at := bjTime(t, r.day+" 11:00:00")
			for k := range 5 { // lost notifications, in batches of two before the bad line
				sn := fmt.Sprintf("WH%d-%d", i, k)
				r.order(t, sn, "1.00")
				r.wx.AddPaidTrade(sn, fmt.Sprintf("42000020261130000000%04d%04d", i, k), 100, at.Add(time.Duration(k)*time.Minute))
			}
			r.wx.AddToBill(wxbill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: c.tradeNo, OutTradeNo: c.outTradeNo,
				Amount: dec("1.00"), Received: dec("1.00"), FinishedAt: at.Add(time.Hour).UTC()}})
			run := r.run(t, r.recon, r.day)
			if run.State != model.ReconFailed || !strings.Contains(run.Error, c.field) || !strings.Contains(run.Error, "bad bill") {
				t.Fatalf("%s: run of a bill ending in %q/%q: %+v", c.name, c.tradeNo, c.outTradeNo, run)
			}
			for _, q := range []string{"SELECT COUNT(*) FROM oms_order_payment", "SELECT COUNT(*) FROM outbox",
				"SELECT COUNT(*) FROM recon_seen", "SELECT COUNT(*) FROM recon_item"} {
				if n := r.count(t, q); n != 0 {
					t.Fatalf("%s: a failed run left %d rows: %s", c.name, n, q)
				}
			}
			d, err := r.recon.Detail(ctx, r.day, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			h := d.History[len(d.History)-1]
			if h.State != model.ReconFailed || h.Repaired != 0 || h.Items != 0 {
				t.Fatalf("%s: the failed attempt: %+v", c.name, h)
			}
		}
	})
}
