package service_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"paynotify/alipay/bill"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
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
