package service_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

// The development merchant of WeChat Pay, as testdata/dev has its keys.
const (
	wxMchID, wxAppID  = "1900000001", "wxd000000000000001"
	wxAPIv3Key        = "paynotify-dev-apiv3-key-32bytes!"
	wxMerchantSerial  = "3775B6A45ACD588826D15E583A95F5DD4F2B1E2F"
	wxPublicKeyID     = "PUB_KEY_ID_0119000000000001"
	wxUnknownTradeNo  = "4200002026113000000000000003"
	wxConsoleRefundNo = "WXCONSOLE-1"
)

// wechatRig is reconRig's twin for WeChat Pay: the service's
// reconciliation of WeChat Pay's bill against a fake WeChat Pay whose
// clock the test holds, through the real adapter over HTTP.
type wechatRig struct {
	*reconRig
	wx       *fakewechatpay.Server
	provider *wechatpay.Provider
	// day is the Beijing day of the business (yesterday: the fake and
	// the SDK sign and check with the real time, so the rig's clock
	// stays near it).
	day string
}

func newWechatRig(t *testing.T, store *dao.Store) *wechatRig {
	t.Helper()
	r := &wechatRig{reconRig: newReconRig(t, store)}
	yesterday := time.Now().In(model.Beijing).AddDate(0, 0, -1)
	r.day = yesterday.Format(time.DateOnly)
	r.clock.mu.Lock()
	r.clock.at = bjTime(t, r.day+" 10:00:00")
	r.clock.mu.Unlock()
	var err error
	r.wx, err = fakewechatpay.New(fakewechatpay.Config{
		MchID: wxMchID, AppID: wxAppID, APIv3Key: wxAPIv3Key,
		PrivateKey: devkey.Read(t, "wechatpay_private_key.pem"), PublicKeyID: wxPublicKeyID,
		PlatformKey: devkey.Read(t, "wechatpay_platform_private_key.pem"), PlatformCert: devkey.Read(t, "wechatpay_platform_cert.pem"),
		Sign:              fakewechatpay.SignEither,
		MerchantPublicKey: devkey.Read(t, "wechatpay_merchant_public_key.pem"), MerchantSerial: wxMerchantSerial,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(r.wx.Handler())
	t.Cleanup(gw.Close)
	t.Cleanup(r.wx.Close)
	client, err := wechatpay.New(wechatpay.Config{
		MchID: wxMchID, AppID: wxAppID, APIv3Key: wxAPIv3Key,
		MerchantPrivateKey: devkey.Read(t, "wechatpay_merchant_private_key.pem"), MerchantSerial: wxMerchantSerial,
		PublicKey: devkey.Read(t, "wechatpay_public_key.pem"), PublicKeyID: wxPublicKeyID,
		PlatformCerts: []string{devkey.Read(t, "wechatpay_platform_cert.pem")},
		Gateway:       gw.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.provider = wechatpay.NewProvider(client, "")
	r.recon = r.wechatInstance("instance-a")
	return r
}

// wechatInstance is another process's reconciliation of WeChat Pay's bill.
func (r *wechatRig) wechatInstance(owner string) *service.BillReconciler {
	rec := service.NewBillReconciler(r.store, r.provider, r.payments, quietLog)
	rec.Provider = model.ProviderWechatpay
	rec.SetClock(func() time.Time { return r.clock.Now().Add(24 * time.Hour) })
	rec.SetOwner(owner)
	rec.Batch = 2
	return rec
}

// notifyWechat applies a verified WeChat Pay notification of the fake's
// clock.
func (r *wechatRig) notifyWechat(t *testing.T, outTradeNo, transactionID, amount string) model.Outcome {
	t.Helper()
	return r.observe(t, model.ProviderWechatpay, outTradeNo, transactionID, amount)
}

// One WeChat Pay day, end to end on the real adapter and the fake: a lost
// notification repaired, a payment for a deleted order UNMATCHED, a forged
// but verified row MISSING_AT_PROVIDER and nothing changed, a refund made
// in the merchant platform UNKNOWN_REFUND and capping later refunds, the
// fees booked once against wechatpay_clearing; run again and by another
// instance, nothing is repaired twice.
func TestReconcileWechatPayDay(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newWechatRig(t, store)
		lost := r.order(t, "WX-LOST", "88.00")
		if _, err := store.SQL().Exec(`INSERT INTO oms_pay_attempt (order_id, attempt_no, out_trade_no, method, amount, state, provider)
			VALUES (?, 2, 'WX-LOST-2', 'native', '88.00', ?, 'wechatpay')`, lost, model.AttemptExpired); err != nil {
			t.Fatal(err)
		}
		// Paid at WeChat Pay; the notification never came.
		r.wx.AddPaidTrade("WX-LOST-2", "4200002026113000000000000001", 8800, r.clock.Now())
		// Paid for an order that is gone.
		r.wx.AddPaidTrade("WX-GONE", "4200002026113000000000000002", 500, r.clock.Now())
		// A verified notification WeChat Pay never settled.
		forged := r.order(t, "WX-FORGED", "50.00")
		r.notifyWechat(t, "WX-FORGED", wxUnknownTradeNo, "50.00")
		// Paid and notified, then partly refunded in the merchant platform.
		r.order(t, "WX-OK", "100.00")
		r.wx.AddPaidTrade("WX-OK", "4200002026113000000000000004", 10000, r.clock.Now())
		r.notifyWechat(t, "WX-OK", "4200002026113000000000000004", "100.00")
		if err := r.wx.ConsoleRefund("WX-OK", wxConsoleRefundNo, 7000, r.clock.Now()); err != nil {
			t.Fatal(err)
		}

		run := r.run(t, r.recon, r.day)
		if run.State != model.ReconDone || run.Provider != model.ProviderWechatpay || run.Counts[model.ReconRepaired] != 1 ||
			run.Counts[model.ReconUnmatched] != 1 || run.Counts[model.ReconMissingAtProvider] != 1 || run.Counts[model.ReconUnknownRefund] != 1 {
			t.Fatalf("run %+v", run)
		}
		if run.Bill.Payments != 3 || !run.Bill.PaymentReceived.Equal(dec("193.00")) || run.Bill.Refunds != 1 {
			t.Errorf("bill totals %+v", run.Bill)
		}
		check := func() {
			t.Helper()
			if o := mustGetOrder(t, store, "WX-LOST"); o.Status != model.OrderPaid {
				t.Errorf("the lost payment's order is %d, want paid", o.Status)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE order_id = ? AND state = 'APPLIED' AND provider = 'wechatpay'", lost); n != 1 {
				t.Errorf("%d APPLIED WeChat Pay payments of the lost order", n)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE trade_no = ? AND state = 'UNMATCHED' AND provider = 'wechatpay'", "4200002026113000000000000002"); n != 1 {
				t.Errorf("%d UNMATCHED payments for the deleted order", n)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE order_id = ? AND state = 'APPLIED'", forged); n != 1 {
				t.Errorf("the forged payment changed: %d APPLIED", n)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM oms_refund WHERE kind = 'CONSOLE' AND provider = 'wechatpay' AND out_request_no = ?", wxConsoleRefundNo); n != 1 {
				t.Errorf("%d console refunds recorded", n)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE event_type = ? AND payload LIKE ?", model.EventFeesBooked, `%wechatpay%`); n == 0 {
				t.Error("no WeChat Pay fee event")
			}
		}
		check()
		miss := r.items(t, r.day, model.ReconMissingAtProvider)
		if len(miss) != 1 || miss[0].TradeNo != wxUnknownTradeNo || miss[0].BillAmount != nil {
			t.Fatalf("missing items %+v", miss)
		}
		// The platform's refund counts against its payment: 30.00 is left.
		if _, err := r.refunds.Request(ctx, "WX-OK", "rma-1", dec("40.00"), "returned"); !errors.Is(err, model.ErrRefundTooLarge) {
			t.Fatalf("refund of 40.00 of the 30.00 left: %v", err)
		}

		again := r.run(t, r.recon, r.day)
		other := r.run(t, r.wechatInstance("instance-b"), r.day)
		for _, x := range []model.ReconRun{again, other} {
			if x.State != model.ReconDone || x.Counts[model.ReconRepaired] != 1 || x.Counts[model.ReconUnknownRefund] != 1 {
				t.Fatalf("run again %+v", x)
			}
		}
		if other.Attempts != 3 {
			t.Errorf("%d attempts, want 3", other.Attempts)
		}
		check()
		if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE aggregate_id = ? AND event_type = ?", lost, model.EventOrderPaid); n != 1 {
			t.Errorf("%d order.paid events for the repaired order", n)
		}

		// Alipay's run of the same date is its own, and unchanged: the
		// fake Alipay has no business that day.
		alipayRun := r.run(t, r.instance("instance-a"), r.day)
		if alipayRun.Provider != model.ProviderAlipay || alipayRun.State != model.ReconDone || alipayRun.Bill.Payments != 0 {
			t.Fatalf("Alipay's run %+v", alipayRun)
		}
	})
}

// Two instances reconciling one WeChat Pay date at once repair a lost
// notification once, whichever claims the date first — and each is seen
// to win: one payment, one order.paid, one REPAIRED item, its 手续费
// booked once against wechatpay_clearing. The days go back from
// yesterday: WeChat Pay keeps three months of bills, and the SDK signs
// with the real time.
func TestReconcileWechatPayTwoInstances(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newWechatRig(t, store)
		r.raceTwoInstances(t, model.ProviderWechatpay, bjTime(t, r.day+" 10:00:00"), 80, r.wechatInstance,
			func(round int, at time.Time) (int64, string) {
				sn := fmt.Sprintf("WX-TWO-%d", round)
				id := r.order(t, sn, raceAmount)
				transactionID := fmt.Sprintf("4200002026113000000000%06d", 600+round)
				r.wx.AddPaidTrade(sn, transactionID, 5000, at)
				return id, transactionID
			})
	})
}

// WeChat Pay's faults fail the run with the reason and repair nothing; a
// day without a bill (NO_STATEMENT_EXIST) is quiet unless the ledger has
// WeChat Pay payments that day; a day older than three months is refused.
func TestReconcileWechatPayFaults(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newWechatRig(t, store)
		r.order(t, "WX-BAD", "5.00")
		r.wx.AddPaidTrade("WX-BAD", "4200002026113000000000000101", 500, r.clock.Now())
		for _, c := range []struct {
			name   string
			fault  func()
			reason string
		}{
			{"WrongHash", func() { r.wx.WrongBillHash(1) }, "not the file WeChat Pay vouched for"},
			{"ExpiredURL", func() { r.wx.ExpireBillURL(1) }, "INVALID_REQUEST"},
			{"Damaged", func() { r.wx.ServeBill(r.day, []byte("\x1f\x8b damaged")) }, "not a readable gzip"},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.fault()
				defer r.wx.ServeBill(r.day, nil)
				run := r.run(t, r.recon, r.day)
				if run.State != model.ReconFailed || !strings.Contains(run.Error, c.reason) {
					t.Fatalf("run %+v; want FAILED with %q", run, c.reason)
				}
				if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment"); n != 0 {
					t.Fatalf("a failed run recorded %d payments", n)
				}
			})
		}

		// The day before: WeChat Pay has no bill (NO_STATEMENT_EXIST).
		next := r.clock.Now().AddDate(0, 0, -1).Format(time.DateOnly)
		r.clock.mu.Lock()
		r.clock.at = bjTime(t, next+" 12:00:00")
		r.clock.mu.Unlock()
		quiet := r.run(t, r.recon, next)
		if quiet.State != model.ReconDone || quiet.Unresolved != 0 {
			t.Fatalf("a quiet day %+v", quiet)
		}
		r.order(t, "WX-NOBILL", "7.00")
		r.notifyWechat(t, "WX-NOBILL", "4200002026120100000000000102", "7.00")
		nb := r.run(t, r.recon, next)
		if nb.State != model.ReconDone || nb.Counts[model.ReconMissingAtProvider] != 1 || nb.Bill.Payments != 0 {
			t.Fatalf("no-bill day with a payment %+v", nb)
		}

		// Four months back: refused before a run is claimed, as a day
		// after yesterday is, with the reason; no run is left behind.
		old := r.clock.Now().AddDate(0, -4, 0).Format(time.DateOnly)
		if run, err := r.recon.Run(ctx, old); !errors.Is(err, model.ErrInvalidRequest) || !strings.Contains(err.Error(), "WeChat Pay keeps trade bills for 3 months") {
			t.Fatalf("a day four months back: %+v, %v", run, err)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM recon_run WHERE bill_date = ?", old); n != 0 {
			t.Fatalf("a refused day left %d runs", n)
		}
	})
}

// The daily job runs per provider: WeChat Pay's waits for 10:00 Beijing,
// when WeChat Pay has published yesterday's bill, whatever RECON_AT says,
// and each provider's job finds only its own runs.
func TestReconcileWechatPayDailyJob(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newWechatRig(t, store)
		r.order(t, "WX-DAILY", "6.00")
		r.wx.AddPaidTrade("WX-DAILY", "4200002026113000000000000701", 600, r.clock.Now())
		var now time.Time
		wx, ali := r.wechatInstance("job"), r.instance("job")
		for _, rec := range []*service.BillReconciler{wx, ali} {
			rec.At = 9*time.Hour + 30*time.Minute
			rec.SetClock(func() time.Time { return now })
		}
		if wx.Name() == ali.Name() {
			t.Fatalf("both jobs are named %q", wx.Name())
		}
		today, _ := time.ParseInLocation(time.DateOnly, r.day, model.Beijing)
		today = today.AddDate(0, 0, 1)
		round := func(rec *service.BillReconciler, at time.Duration, want int) {
			t.Helper()
			now = today.Add(at)
			n, err := rec.RunOnce(ctx)
			if err != nil || n != want {
				t.Fatalf("%s at %s: %d runs, %v; want %d", rec.Name(), now, n, err, want)
			}
		}
		round(wx, 9*time.Hour+30*time.Minute, 0) // RECON_AT, but WeChat Pay's bill is not out
		round(wx, 10*time.Hour, 1)
		round(wx, 11*time.Hour, 0)  // done: not again
		round(ali, 11*time.Hour, 1) // Alipay's date is its own
		if o := mustGetOrder(t, store, "WX-DAILY"); o.Status != model.OrderPaid {
			t.Errorf("the job's run did not repair WX-DAILY: %d", o.Status)
		}
	})
}
