package service_test

import (
	"bytes"
	"strings"
	"testing"

	"paynotify/alipay/bill"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	wxbill "paynotify/wechatpay/bill"
)

// TestReconcileRefusesAnotherAccountsBill: an Alipay bill naming another
// account (#账号, and the file names) than our seller_id fails the run
// whole: the payment it holds that our ledger lacks is not repaired.
func TestReconcileRefusesAnotherAccountsBill(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "ACC-1", "1.00")
		var b bytes.Buffer
		err := bill.WriteZip(&b, bill.Header{Account: "2088000000000777", Date: bjTime(t, reconDay+" 00:00:00")}, func(w *bill.Writer) error {
			return w.Write(bill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "2026113022001400000000000777",
				OutTradeNo: "ACC-1", Amount: dec("1.00"), Received: dec("1.00"), FinishedAt: bjTime(t, reconDay+" 11:00:00").UTC()}})
		})
		if err != nil {
			t.Fatal(err)
		}
		r.fake.ServeBill(reconDay, b.Bytes())
		run := r.run(t, r.recon, reconDay)
		if run.State != model.ReconFailed || !strings.Contains(run.Error, "2088000000000777") || !strings.Contains(run.Error, "bad bill") {
			t.Fatalf("run of another account's bill: %+v", run)
		}
		for _, q := range []string{"SELECT COUNT(*) FROM oms_order_payment", "SELECT COUNT(*) FROM outbox", "SELECT COUNT(*) FROM recon_seen"} {
			if n := r.count(t, q); n != 0 {
				t.Fatalf("a refused bill left %d rows: %s", n, q)
			}
		}
	})
}

// TestReconcileLineOutsideBillDay: a bill line that finished days before
// the bill's day (Alipay's bill of the 30th holding a payment of the
// 20th; WeChat Pay's likewise) is an OUTSIDE_BILL_DAY item, neither
// repaired nor matched, while the day's own lost payment is repaired.
func TestReconcileLineOutsideBillDay(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		t.Run("Alipay", func(t *testing.T) {
			r := newReconRig(t, store)
			in, out := r.order(t, "DAY-IN", "1.00"), r.order(t, "DAY-OUT", "2.00")
			var b bytes.Buffer
			err := bill.WriteZip(&b, bill.Header{Account: rigSellerID, Date: bjTime(t, reconDay+" 00:00:00")}, func(w *bill.Writer) error {
				for _, l := range []struct{ tradeNo, sn, amount, at string }{
					{"2026112022001400000000000001", "DAY-OUT", "2.00", "2026-11-20 11:00:00"},
					{"2026113022001400000000000002", "DAY-IN", "1.00", reconDay + " 11:00:00"},
				} {
					if err := w.Write(bill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: l.tradeNo, OutTradeNo: l.sn,
						Amount: dec(l.amount), Received: dec(l.amount), FinishedAt: bjTime(t, l.at).UTC()}}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			r.fake.ServeBill(reconDay, b.Bytes())
			checkOutsideDay(t, r, r.run(t, r.recon, reconDay), reconDay, in, out, "2026112022001400000000000001")
		})
		t.Run("WechatPay", func(t *testing.T) {
			r := newWechatRig(t, store)
			in, out := r.order(t, "WDAY-IN", "1.00"), r.order(t, "WDAY-OUT", "2.00")
			day := bjTime(t, r.day+" 11:00:00")
			var b bytes.Buffer
			_, err := wxbill.WriteGzip(&b, wxbill.Header{AppID: wxAppID, MchID: wxMchID}, func(w *wxbill.Writer) error {
				if err := w.Write(wxbill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200002026112000000000000001",
					OutTradeNo: "WDAY-OUT", Amount: dec("2.00"), Received: dec("2.00"), FinishedAt: day.AddDate(0, 0, -10).UTC()}}); err != nil {
					return err
				}
				return w.Write(wxbill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200002026113000000000000002",
					OutTradeNo: "WDAY-IN", Amount: dec("1.00"), Received: dec("1.00"), FinishedAt: day.UTC()}})
			})
			if err != nil {
				t.Fatal(err)
			}
			r.wx.ServeBill(r.day, b.Bytes())
			checkOutsideDay(t, r.reconRig, r.run(t, r.recon, r.day), r.day, in, out, "4200002026112000000000000001")
		})
	})
}

// checkOutsideDay checks what a run left of a bill holding the day's lost
// payment (order in) and a line of ten days before (order out).
func checkOutsideDay(t *testing.T, r *reconRig, run model.ReconRun, date string, in, out int64, outTradeNo string) {
	t.Helper()
	if run.State != model.ReconDone || run.Counts[model.ReconRepaired] != 1 || run.Counts[model.ReconOutsideBillDay] != 1 {
		t.Fatalf("run %+v", run)
	}
	items := r.items(t, date, model.ReconOutsideBillDay)
	if len(items) != 1 || items[0].TradeNo != outTradeNo || items[0].ResolvedAt != nil || !strings.Contains(items[0].Detail, "outside the bill's day") {
		t.Fatalf("items %+v", items)
	}
	if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE order_id = ?", out); n != 0 {
		t.Errorf("the line outside the bill's day was recorded: %d payments", n)
	}
	if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE order_id = ?", in); n != 1 {
		t.Errorf("the day's own lost payment: %d payments", n)
	}
	if n := r.count(t, "SELECT COUNT(*) FROM recon_seen WHERE ref = ?", outTradeNo); n != 0 {
		t.Errorf("the line outside the bill's day was matched")
	}
}

// TestReconcileRefusesAnotherMerchantsWechatPayBill: a WeChat Pay bill
// whose rows name another 商户号 than our mchid fails the run whole.
func TestReconcileRefusesAnotherMerchantsWechatPayBill(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newWechatRig(t, store)
		r.order(t, "WACC-1", "1.00")
		var b bytes.Buffer
		_, err := wxbill.WriteGzip(&b, wxbill.Header{AppID: wxAppID, MchID: "1900009999"}, func(w *wxbill.Writer) error {
			return w.Write(wxbill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200002026113000000000000777",
				OutTradeNo: "WACC-1", Amount: dec("1.00"), Received: dec("1.00"), FinishedAt: bjTime(t, r.day+" 11:00:00").UTC()}})
		})
		if err != nil {
			t.Fatal(err)
		}
		r.wx.ServeBill(r.day, b.Bytes())
		run := r.run(t, r.recon, r.day)
		if run.State != model.ReconFailed || !strings.Contains(run.Error, "1900009999") || !strings.Contains(run.Error, "bad bill") {
			t.Fatalf("run of another merchant's bill: %+v", run)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment"); n != 0 {
			t.Fatalf("a refused bill recorded %d payments", n)
		}
	})
}
