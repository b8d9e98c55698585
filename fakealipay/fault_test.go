package fakealipay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/fakealipay"
	"paynotify/internal/devkey"
)

// TestFailNext pins the trap: a signed business failure comes back from
// smartwalle with a nil error. Only Code says the refund did not happen.
func TestFailNext(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.paid(t, "ORD-1", "10.00")
	e.fake.FailNext(fakealipay.MethodRefund, "40004", "ACQ.SYSTEM_ERROR", 2)

	param := smartwalle.TradeRefund{OutTradeNo: "ORD-1", OutRequestNo: "R1", RefundAmount: "10.00"}
	for range 2 {
		rsp, err := e.sdk.TradeRefund(ctx, param)
		if err != nil {
			t.Fatalf("a signed failure came back as an error: %v", err)
		}
		if rsp.IsSuccess() {
			t.Fatal("a failure came back as success")
		}
		wantCode(t, rsp.Error, smartwalle.CodeBusinessFailed, "ACQ.SYSTEM_ERROR")
	}
	if tr, _ := e.fake.Trade("ORD-1"); len(tr.Refunds) != 0 {
		t.Fatalf("a failed call refunded: %+v", tr.Refunds)
	}

	rsp, err := e.sdk.TradeRefund(ctx, param)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rsp.Error, smartwalle.CodeSuccess, "")
	if got := e.fake.Calls(fakealipay.MethodRefund); got != 3 {
		t.Errorf("Calls = %d, want 3", got)
	}
}

// TestTimeoutNext: the refund happens but its answer never reaches the
// caller; a retry with the same out_request_no learns it happened.
func TestTimeoutNext(t *testing.T) {
	e := newEnv(t, nil)
	e.paid(t, "ORD-1", "10.00")
	// Far longer than the caller waits: the fake stops waiting when the
	// caller hangs up, so the test does not.
	e.fake.TimeoutNext(fakealipay.MethodRefund, time.Hour, 1)

	param := smartwalle.TradeRefund{OutTradeNo: "ORD-1", OutRequestNo: "R1", RefundAmount: "4.00"}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := e.sdk.TradeRefund(ctx, param)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the caller's deadline", err)
	}
	tr, _ := e.fake.Trade("ORD-1")
	if len(tr.Refunds) != 1 || tr.Refunds[0].OutRequestNo != "R1" {
		t.Fatalf("the refund did not happen: %+v", tr.Refunds)
	}

	rsp, err := e.sdk.TradeRefund(context.Background(), param)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rsp.Error, smartwalle.CodeSuccess, "")
	if rsp.FundChange != "N" || rsp.RefundFee != "4.00" {
		t.Fatalf("retry answered %+v", rsp)
	}
	e.fake.WaitNotifications()
	if got := len(e.recv.Forms()); got != 2 {
		t.Errorf("received %d notifications, want payment and one refund", got)
	}
}

// TestDropNext: the call fails outright and nothing happens.
func TestDropNext(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.DropNext(fakealipay.MethodPrecreate, 1)
	_, err := e.sdk.TradePreCreate(context.Background(), smartwalle.TradePreCreate{Trade: smartwalle.Trade{
		Subject: "Espresso beans 1kg", OutTradeNo: "ORD-1", TotalAmount: "10.00",
	}})
	if err == nil {
		t.Fatal("a dropped call succeeded")
	}
	if _, ok := e.fake.Trade("ORD-1"); ok {
		t.Fatal("a dropped call opened a trade")
	}
	if got := e.fake.Calls(fakealipay.MethodPrecreate); got != 1 {
		t.Errorf("Calls = %d, want 1", got)
	}
	wantCode(t, e.precreate(t, "ORD-1", "10.00").Error, smartwalle.CodeSuccess, "")
}

// TestUnsignedAnswers pins how smartwalle treats an answer without a
// sign: as an error of type *alipay.Error, whatever its code says.
func TestUnsignedAnswers(t *testing.T) {
	tests := []struct {
		name    string
		call    func(t *testing.T, e *env) error // the call's error
		subCode string
	}{
		{
			name: "WrongAppID",
			call: func(t *testing.T, e *env) error {
				_, err := e.otherApp(t).TradeQuery(context.Background(), smartwalle.TradeQuery{OutTradeNo: "ORD-1"})
				return err
			},
			subCode: "isv.invalid-app-id",
		},
		{
			name: "UnknownMethod",
			call: func(t *testing.T, e *env) error {
				var rsp smartwalle.Error
				return e.sdk.Request(context.Background(), smartwalle.NewPayload("alipay.trade.nonsense"), &rsp)
			},
			subCode: "isv.invalid-method",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			err := tt.call(t, e)
			var aerr *smartwalle.Error
			if !errors.As(err, &aerr) {
				t.Fatalf("got %v (%T), want *alipay.Error", err, err)
			}
			if aerr.Code != "40002" || aerr.SubCode != tt.subCode {
				t.Fatalf("got %+v, want 40002 %s", aerr, tt.subCode)
			}
		})
	}
}

// otherApp is a smartwalle client for another app id on e's gateway.
func (e *env) otherApp(t *testing.T) *smartwalle.Client {
	t.Helper()
	c, err := smartwalle.New("2021000000000999", devkey.Read(t, "app_private_key.pem"), false,
		smartwalle.WithSandboxGateway(e.fake.GatewayURL(e.gw.URL)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAliPayPublicKey(devkey.Read(t, "alipay_public_key.pem")); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCallSignature: with the app's public key configured, the fake
// refuses a call signed with another key, in a signed 40002.
func TestCallSignature(t *testing.T) {
	e := newEnv(t, func(c *fakealipay.Config) { c.AppPublicKey = devkey.Read(t, "app_public_key.pem") })
	wantCode(t, e.precreate(t, "ORD-1", "10.00").Error, smartwalle.CodeSuccess, "")

	// The stand-in Alipay key is not the app's.
	forger := newClient(t, devkey.Read(t, "alipay_private_key.pem"), e.fake.GatewayURL(e.gw.URL))
	rsp, err := forger.SDK().TradeQuery(context.Background(), smartwalle.TradeQuery{OutTradeNo: "ORD-1"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, rsp.Error, smartwalle.CodeInvalidParam, "isv.invalid-signature")
}
