package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/fakealipay"
	"paynotify/model"
)

// The background jobs of two instances on two nodes: both refund workers
// look for the same REFUND_PENDING payments, and both daily
// reconciliations find yesterday due as they start. Claims are by SKIP
// LOCKED, which on Galera skips only this node's locks, so the two nodes
// can claim one row at once: a claim is a write, and the second to commit
// fails certification (1213). Each payment is refunded once, and the day
// is reconciled by one run.
func TestGaleraJobsOnTwoNodes(t *testing.T) {
	appKey, appPub := newKeyPair(t)
	alipayKey, alipayPub := newKeyPair(t)
	fake, err := fakealipay.New(fakealipay.Config{AppID: instancesAppID, SellerID: instancesSellerID, PrivateKey: alipayKey, AppPublicKey: appPub})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(fake.Handler())
	t.Cleanup(gw.Close)
	t.Cleanup(fake.Close)
	// The instances call the fake, which knows their key and signs as Alipay.
	_, ti := startGalera(t, "ALIPAY_APP_PRIVATE_KEY="+appKey, "ALIPAY_PUBLIC_KEY="+alipayPub,
		"ALIPAY_SANDBOX_GATEWAY="+fake.GatewayURL(gw.URL), "ALIPAY_JOBS_INTERVAL=100ms", "RECON_AT=00:00")
	ti.alipayKey = alipayKey

	// Paid at the wrong amount: each payment goes REFUND_PENDING
	// (AMOUNT_MISMATCH), and the workers refund it.
	const orders = 40
	ti.orders(t, "GALERA-REFUND-%d", orders, "10.00")
	for k := range orders {
		sn := fmt.Sprintf("GALERA-REFUND-%d", k)
		fake.AddPaidTrade(sn, "T-"+sn, decimal.RequireFromString("9.00"), time.Now())
		if got, err := ti.notify(k%2, ti.notification(t, sn, "T-"+sn, "9.00")); err != nil || got != "success" {
			t.Fatalf("%s: %q, %v", sn, got, err)
		}
	}
	waitFor(t, "every payment refunded", func() bool {
		var n int
		if err := ti.store.SQL().QueryRow("SELECT COUNT(*) FROM oms_order_payment WHERE state = ?", model.PaymentRefunded).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == orders
	})
	// One refund row per payment, each REFUNDED: Alipay's side (below)
	// cannot show a second refund of a payment already refunded in full,
	// which it would refuse.
	var refunds, done, trades int
	if err := ti.store.SQL().QueryRow("SELECT COUNT(*), COUNT(CASE WHEN state = ? THEN 1 END), COUNT(DISTINCT trade_no) FROM oms_refund",
		model.RefundRefunded).Scan(&refunds, &done, &trades); err != nil {
		t.Fatal(err)
	}
	if refunds != orders || done != orders || trades != orders {
		t.Fatalf("%d refunds (%d REFUNDED) of %d trades, want one REFUNDED refund for each of %d payments", refunds, done, trades, orders)
	}
	for k := range orders {
		sn := fmt.Sprintf("GALERA-REFUND-%d", k)
		trade, ok := fake.Trade(sn)
		if !ok || len(trade.Refunds) != 1 || !trade.Refunded().Equal(decimal.RequireFromString("9.00")) {
			t.Fatalf("%s: Alipay holds refunds %+v, want one of 9.00", sn, trade.Refunds)
		}
	}

	// Runs are kept per account: the instances' one seller's (Legacy: a
	// run from before accounts, '', counts as its too).
	galeraRunAccount := model.BillAccount{Provider: model.ProviderAlipay, Account: instancesSellerID, Legacy: true}
	yesterday := time.Now().In(model.Beijing).AddDate(0, 0, -1).Format("2006-01-02")
	waitFor(t, "yesterday reconciled", func() bool {
		run, err := ti.store.ReconRun(context.Background(), galeraRunAccount, yesterday)
		return err == nil && run.State == model.ReconDone
	})
	run, err := ti.store.ReconRun(context.Background(), galeraRunAccount, yesterday)
	if err != nil || run.Attempts != 1 {
		t.Fatalf("run of %s: %+v, %v; want one attempt", yesterday, run, err)
	}
}
