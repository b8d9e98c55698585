package wechatpay_test

// What the SDK gets wrong, each next to what this package does instead.

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/notify"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/app"

	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/wechatpay"
)

// expiredCert is a platform certificate of the dev platform key that
// expired yesterday, serial 0A.
func expiredCert(t *testing.T) string {
	t.Helper()
	key, err := wechatpay.ParsePrivateKey(devkey.Read(t, "wechatpay_platform_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(10), Subject: pkix.Name{CommonName: "retired platform certificate"},
		NotBefore: time.Now().AddDate(-5, 0, 0), NotAfter: time.Now().AddDate(0, 0, -1),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestSDKTrustsAnExpiredCertificate: the SDK's notify handler verifies a
// signature by a platform certificate past its NotAfter (WeChat Pay has
// retired that key); ours refuses the serial.
func TestSDKTrustsAnExpiredCertificate(t *testing.T) {
	old := expiredCert(t)
	certs, err := wechatpay.ParseCertificates(old)
	if err != nil {
		t.Fatal(err)
	}
	h, body := build(t, spec{keyFile: "wechatpay_platform_private_key.pem", serial: "0A"})

	sdk, err := notify.NewRSANotifyHandler(apiV3Key, verifiers.NewSHA256WithRSAVerifier(core.NewCertificateMapWithList(certs)))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/wechatpay/notify", strings.NewReader(string(body)))
	req.Header = h.Clone()
	var tx payments.Transaction
	if _, err := sdk.ParseNotifyRequest(context.Background(), req, &tx); err != nil {
		t.Fatalf("the SDK refused (then this hand-written check is not needed): %v", err)
	}

	cfg := clientConfig(t, false, false)
	cfg.PlatformCerts = []string{old}
	_, err = newClient(t, cfg).VerifyNotification(context.Background(), h, body)
	if !errors.Is(err, wechatpay.ErrUnknownSerial) {
		t.Fatalf("err %v, want ErrUnknownSerial", err)
	}
}

// TestSDKTakesAnUnsignedErrorForWeChatPays: the SDK checks the signature
// of 2xx answers only; a 4xx/5xx comes back as *core.APIError whatever
// sent it. An unsigned 404 ORDER_NOT_EXIST (from a proxy, or forged) would
// tell the closer the trade was never opened; ours leaves the outcome
// unknown.
func TestSDKTakesAnUnsignedErrorForWeChatPays(t *testing.T) {
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"code":"ORDER_NOT_EXIST","message":"订单不存在"}`))
	}))
	defer liar.Close()

	cfg := clientConfig(t, true, false)
	key, _ := wechatpay.ParsePrivateKey(cfg.MerchantPrivateKey)
	pub, _ := wechatpay.ParsePublicKey(cfg.PublicKey)
	sdk, err := core.NewClient(context.Background(), option.WithWechatPayPublicKeyAuthCipher(mchID, merchantSerial, key, publicKeyID, pub))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sdk.Get(context.Background(), liar.URL+"/v3/pay/transactions/out-trade-no/DEMO-1001?mchid="+mchID)
	if !core.IsAPIError(err, "ORDER_NOT_EXIST") {
		t.Fatalf("the SDK answered %v (then this hand-written check is not needed)", err)
	}

	cfg.Gateway = liar.URL
	ours := newClient(t, cfg)
	if err := ours.CloseTrade(context.Background(), "DEMO-1001"); !errors.Is(err, model.ErrGatewayUnknown) {
		t.Fatalf("close: %v, want ErrGatewayUnknown", err)
	}
	var ae *wechatpay.APIError
	if _, err := ours.QueryTrade(context.Background(), "DEMO-1001"); !errors.As(err, &ae) || ae.Signed || errors.Is(err, model.ErrTradeNotExist) {
		t.Fatalf("query: %v, want an unsigned APIError, not ErrTradeNotExist", err)
	}
}

// TestSDKAppParamsLackAppID: the SDK's app PrepayWithRequestPayment
// leaves out the appid the app's PayReq needs; ours has it.
func TestSDKAppParamsLackAppID(t *testing.T) {
	e := newEnv(t, func(fc *fakewechatpay.Config, _ *wechatpay.Config) { fc.Sign = fakewechatpay.SignPublicKey })
	cfg := clientConfig(t, true, true)
	key, _ := wechatpay.ParsePrivateKey(cfg.MerchantPrivateKey)
	pub, _ := wechatpay.ParsePublicKey(cfg.PublicKey)
	hc := &http.Client{Transport: toGateway{e.gw.URL}}
	sdk, err := core.NewClient(context.Background(),
		option.WithWechatPayPublicKeyAuthCipher(mchID, merchantSerial, key, publicKeyID, pub), option.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	svc := app.AppApiService{Client: sdk}
	rsp, _, err := svc.PrepayWithRequestPayment(context.Background(), app.PrepayRequest{
		Appid: core.String(appID), Mchid: core.String(mchID), Description: core.String("x"),
		OutTradeNo: core.String("DEMO-8001"), NotifyUrl: core.String(e.recv.srv.URL), Amount: &app.Amount{Total: core.Int64(1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rsp)
	if strings.Contains(strings.ToLower(string(b)), `"appid"`) {
		t.Fatalf("the SDK's app set has an appid now: %s", b)
	}
	if a := e.pay(t, wechatpay.MethodApp, "DEMO-8002", 1); a.Params["appid"] != appID {
		t.Fatalf("our app set %v has no appid", a.Params)
	}
}

// toGateway sends every request to a gateway, as Config.Gateway does.
type toGateway struct{ base string }

func (g toGateway) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	u := strings.TrimPrefix(g.base, "http://")
	r.URL.Scheme, r.URL.Host, r.Host = "http", u, u
	return http.DefaultTransport.RoundTrip(r)
}
