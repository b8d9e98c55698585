package fakealipay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/alipay"
	"paynotify/fakealipay"
)

// TestConcurrent has many buyers and refunds hit one trade at once: one
// payment, and never more refunded than paid.
func TestConcurrent(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	const n = 20

	var wg sync.WaitGroup
	qr := make(chan string, n)
	for range n {
		wg.Go(func() {
			rsp, err := e.sdk.TradePreCreate(ctx, smartwalle.TradePreCreate{Trade: smartwalle.Trade{
				Subject: "Espresso beans 1kg", OutTradeNo: "ORD-1", TotalAmount: "10.00",
			}})
			if err != nil || !rsp.IsSuccess() {
				t.Errorf("precreate: %v %+v", err, rsp)
				return
			}
			qr <- rsp.QRCode
		})
	}
	wg.Wait()
	close(qr)
	codes := map[string]bool{}
	for c := range qr {
		codes[c] = true
	}
	if len(codes) != 1 {
		t.Fatalf("%d trades for one order", len(codes))
	}

	var payments atomic.Int32
	for range n {
		wg.Go(func() {
			switch err := e.fake.Pay(ctx, "ORD-1"); {
			case err == nil:
				payments.Add(1)
			case !errors.Is(err, fakealipay.ErrTradeStatus):
				t.Errorf("pay: %v", err)
			}
		})
	}
	wg.Wait()
	if got := payments.Load(); got != 1 {
		t.Fatalf("%d payments, want 1", got)
	}

	// Each of n refunds of 1.00 is sent twice: ten move money once each.
	var moved atomic.Int32
	for i := range 2 * n {
		wg.Go(func() {
			rsp, err := e.sdk.TradeRefund(ctx, smartwalle.TradeRefund{
				OutTradeNo: "ORD-1", OutRequestNo: fmt.Sprintf("R%d", i%n), RefundAmount: "1.00",
			})
			if err != nil {
				t.Errorf("refund: %v", err)
				return
			}
			if rsp.IsSuccess() && rsp.FundChange == "Y" {
				moved.Add(1)
			}
		})
	}
	wg.Wait()
	if got := moved.Load(); got != 10 {
		t.Errorf("%d refunds moved money, want 10", got)
	}
	tr, _ := e.fake.Trade("ORD-1")
	if !tr.Refunded().Equal(tr.TotalAmount) || len(tr.Refunds) != 10 || tr.Status != alipay.TradeClosed {
		t.Errorf("trade after refunds: refunded %s in %d, status %s", tr.Refunded(), len(tr.Refunds), tr.Status)
	}
	e.fake.WaitNotifications()
	if got := len(e.recv.Forms()); got != 11 {
		t.Errorf("received %d notifications, want 1 payment and 10 refunds", got)
	}
}
