package fakealipay_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/alipay"
	"paynotify/fakealipay"
)

func TestPrecreatePayQuery(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()

	pre := e.precreate(t, "ORD-1", "88.80")
	wantCode(t, pre.Error, smartwalle.CodeSuccess, "")
	if pre.OutTradeNo != "ORD-1" || !strings.HasPrefix(pre.QRCode, e.gw.URL+"/cashier/") {
		t.Fatalf("precreate answered %+v", pre)
	}

	q, err := e.sdk.TradeQuery(ctx, smartwalle.TradeQuery{OutTradeNo: "ORD-1"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, q.Error, smartwalle.CodeSuccess, "")
	if q.TradeStatus != smartwalle.TradeStatusWaitBuyerPay || q.TotalAmount != "88.80" || q.BuyerPayAmount != "0.00" {
		t.Fatalf("before paying, query answered %+v", q)
	}
	if len(q.TradeNo) != 28 {
		t.Errorf("trade_no %q is not 28 digits", q.TradeNo)
	}

	if err := e.fake.Pay(ctx, "ORD-1"); err != nil {
		t.Fatal(err)
	}
	q, err = e.sdk.TradeQuery(ctx, smartwalle.TradeQuery{TradeNo: q.TradeNo})
	if err != nil {
		t.Fatal(err)
	}
	if q.TradeStatus != smartwalle.TradeStatusSuccess || q.BuyerPayAmount != "88.80" || q.SendPayDate == "" {
		t.Fatalf("after paying, query answered %+v", q)
	}

	forms := e.recv.Forms()
	if len(forms) != 1 {
		t.Fatalf("received %d notifications, want 1", len(forms))
	}
	f := forms[0]
	for k, want := range map[string]string{
		"notify_type": "trade_status_sync", "trade_status": "TRADE_SUCCESS", "out_trade_no": "ORD-1",
		"trade_no": q.TradeNo, "total_amount": "88.80", "app_id": appID, "seller_id": sellerID,
		"sign_type": "RSA2", "charset": "utf-8", "version": "1.0", "gmt_payment": q.SendPayDate,
	} {
		if got := f.Get(k); got != want {
			t.Errorf("notification %s = %q, want %q", k, got, want)
		}
	}
	n, err := alipay.ParseNotification(f.Get)
	if err != nil {
		t.Fatalf("the service's parser refuses the notification: %v", err)
	}
	if n.GmtPayment == nil {
		t.Error("no gmt_payment parsed")
	}
	if got := e.fake.Notifications(); len(got) != 1 || got[0].Outcome != fakealipay.Acknowledged {
		t.Errorf("notifications recorded: %+v", got)
	}

	if err := e.fake.Pay(ctx, "ORD-1"); !errors.Is(err, fakealipay.ErrTradeStatus) {
		t.Errorf("paying twice: %v, want ErrTradeStatus", err)
	}
	if err := e.fake.Pay(ctx, "ORD-404"); !errors.Is(err, fakealipay.ErrTradeNotExist) {
		t.Errorf("paying an unknown trade: %v, want ErrTradeNotExist", err)
	}
}

func TestPrecreateAgain(t *testing.T) {
	e := newEnv(t, nil)
	first := e.precreate(t, "ORD-1", "10.00")

	again := e.precreate(t, "ORD-1", "10.00")
	wantCode(t, again.Error, smartwalle.CodeSuccess, "")
	if again.QRCode != first.QRCode {
		t.Errorf("same order, new QR code %q (was %q)", again.QRCode, first.QRCode)
	}
	wantCode(t, e.precreate(t, "ORD-1", "10.01").Error, smartwalle.CodeBusinessFailed, "ACQ.CONTEXT_INCONSISTENT")

	if err := e.fake.Pay(context.Background(), "ORD-1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.precreate(t, "ORD-1", "10.00").Error, smartwalle.CodeBusinessFailed, "ACQ.TRADE_HAS_SUCCESS")
	wantCode(t, e.precreate(t, "ORD-2", "0.001").Error, smartwalle.CodeBusinessFailed, "ACQ.INVALID_PARAMETER")
}

func TestQueryUnknown(t *testing.T) {
	e := newEnv(t, nil)
	q, err := e.sdk.TradeQuery(context.Background(), smartwalle.TradeQuery{OutTradeNo: "ORD-404"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, q.Error, smartwalle.CodeBusinessFailed, "ACQ.TRADE_NOT_EXIST")
}

func TestClose(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, e *env)
		code    smartwalle.Code
		subCode string
		status  alipay.TradeStatus // after the call; "" if no trade
	}{
		{name: "Unpaid", setup: func(t *testing.T, e *env) { e.precreate(t, "ORD-1", "10.00") }, code: "10000", status: alipay.TradeClosed},
		{name: "Unknown", setup: func(*testing.T, *env) {}, code: "40004", subCode: "ACQ.TRADE_NOT_EXIST"},
		{name: "Paid", setup: func(t *testing.T, e *env) { e.paid(t, "ORD-1", "10.00") }, code: "40004", subCode: "ACQ.TRADE_STATUS_ERROR", status: alipay.TradeSuccess},
		{name: "Closed", setup: func(t *testing.T, e *env) {
			e.precreate(t, "ORD-1", "10.00")
			if _, err := e.sdk.TradeClose(context.Background(), smartwalle.TradeClose{OutTradeNo: "ORD-1"}); err != nil {
				t.Fatal(err)
			}
		}, code: "40004", subCode: "ACQ.TRADE_STATUS_ERROR", status: alipay.TradeClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tt.setup(t, e)
			rsp, err := e.sdk.TradeClose(context.Background(), smartwalle.TradeClose{OutTradeNo: "ORD-1"})
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, rsp.Error, tt.code, tt.subCode)
			tr, _ := e.fake.Trade("ORD-1")
			if tr.Status != tt.status {
				t.Errorf("status %q, want %q", tr.Status, tt.status)
			}
		})
	}

	t.Run("ThenPay", func(t *testing.T) {
		e := newEnv(t, nil)
		e.precreate(t, "ORD-1", "10.00")
		if _, err := e.sdk.TradeClose(context.Background(), smartwalle.TradeClose{OutTradeNo: "ORD-1"}); err != nil {
			t.Fatal(err)
		}
		if err := e.fake.Pay(context.Background(), "ORD-1"); !errors.Is(err, fakealipay.ErrTradeStatus) {
			t.Errorf("paying a closed trade: %v, want ErrTradeStatus", err)
		}
	})
}

func TestRefund(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.paid(t, "ORD-1", "100.00")
	refund := func(outRequestNo, amount string) *smartwalle.TradeRefundRsp {
		t.Helper()
		rsp, err := e.sdk.TradeRefund(ctx, smartwalle.TradeRefund{OutTradeNo: "ORD-1", OutRequestNo: outRequestNo, RefundAmount: amount})
		if err != nil {
			t.Fatal(err)
		}
		return rsp
	}

	r := refund("R1", "30.00")
	wantCode(t, r.Error, smartwalle.CodeSuccess, "")
	if r.FundChange != "Y" || r.RefundFee != "30.00" {
		t.Fatalf("refund answered %+v", r)
	}

	// A retry of the same request succeeds without moving money again.
	r = refund("R1", "30.00")
	wantCode(t, r.Error, smartwalle.CodeSuccess, "")
	if r.FundChange != "N" || r.RefundFee != "30.00" {
		t.Fatalf("retried refund answered %+v", r)
	}
	wantCode(t, refund("R1", "31.00").Error, smartwalle.CodeBusinessFailed, "ACQ.CONTEXT_INCONSISTENT")
	wantCode(t, refund("R2", "70.01").Error, smartwalle.CodeBusinessFailed, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL")

	rq, err := e.sdk.TradeFastPayRefundQuery(ctx, smartwalle.TradeFastPayRefundQuery{OutTradeNo: "ORD-1", OutRequestNo: "R1"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rq.Error, smartwalle.CodeSuccess, "")
	if rq.RefundStatus != "REFUND_SUCCESS" || rq.RefundAmount != "30.00" || rq.OutRequestNo != "R1" {
		t.Fatalf("refund query answered %+v", rq)
	}
	// No such refund: success of the query, with no refund_status.
	rq, err = e.sdk.TradeFastPayRefundQuery(ctx, smartwalle.TradeFastPayRefundQuery{OutTradeNo: "ORD-1", OutRequestNo: "R2"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rq.Error, smartwalle.CodeSuccess, "")
	if rq.RefundStatus != "" || rq.RefundAmount != "" {
		t.Fatalf("query of a refused refund answered %+v", rq)
	}

	r = refund("R3", "70.00")
	if r.FundChange != "Y" || r.RefundFee != "100.00" {
		t.Fatalf("final refund answered %+v", r)
	}
	tr, _ := e.fake.Trade("ORD-1")
	if tr.Status != alipay.TradeClosed || !tr.Refunded().Equal(tr.TotalAmount) || len(tr.Refunds) != 2 {
		t.Fatalf("trade after refunds: %+v", tr)
	}
	wantCode(t, refund("R4", "0.01").Error, smartwalle.CodeBusinessFailed, "ACQ.TRADE_STATUS_ERROR")

	e.fake.WaitNotifications()
	forms := e.recv.Forms()
	if len(forms) != 3 {
		t.Fatalf("received %d notifications, want payment and 2 refunds", len(forms))
	}
	for i, want := range []struct{ status, refundFee, outBizNo string }{
		{"TRADE_SUCCESS", "30.00", "R1"},
		{"TRADE_CLOSED", "100.00", "R3"},
	} {
		f := forms[i+1]
		if f.Get("trade_status") != want.status || f.Get("refund_fee") != want.refundFee || f.Get("out_biz_no") != want.outBizNo || f.Get("gmt_refund") == "" {
			t.Errorf("refund notification %d: %v", i, f)
		}
	}
}

func TestRefundUnpaid(t *testing.T) {
	e := newEnv(t, nil)
	e.precreate(t, "ORD-1", "10.00")
	rsp, err := e.sdk.TradeRefund(context.Background(), smartwalle.TradeRefund{OutTradeNo: "ORD-1", OutRequestNo: "R1", RefundAmount: "1.00"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rsp.Error, smartwalle.CodeBusinessFailed, "ACQ.TRADE_STATUS_ERROR")
}
