package wechatpay_test

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/wechatpay"
)

// The development merchant of testdata/dev.
const (
	mchID          = "1900000001"
	appID          = "wxd000000000000001"
	apiV3Key       = "paynotify-dev-apiv3-key-32bytes!"
	merchantSerial = "3775B6A45ACD588826D15E583A95F5DD4F2B1E2F"
	publicKeyID    = "PUB_KEY_ID_0119000000000001"
	certSerial     = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
)

// clientConfig is the merchant's configuration trusting the dev WeChat Pay
// keys: the public key, the platform certificate, or both.
func clientConfig(tb testing.TB, publicKey, cert bool) wechatpay.Config {
	tb.Helper()
	cfg := wechatpay.Config{
		MchID: mchID, AppID: appID, APIv3Key: apiV3Key,
		MerchantPrivateKey: devkey.Read(tb, "wechatpay_merchant_private_key.pem"),
		MerchantSerial:     merchantSerial,
	}
	if publicKey {
		cfg.PublicKey, cfg.PublicKeyID = devkey.Read(tb, "wechatpay_public_key.pem"), publicKeyID
	}
	if cert {
		cfg.PlatformCerts = []string{devkey.Read(tb, "wechatpay_platform_cert.pem")}
	}
	return cfg
}

// newClient builds a client from cfg.
func newClient(tb testing.TB, cfg wechatpay.Config) *wechatpay.Client {
	tb.Helper()
	c, err := wechatpay.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// fakeConfig is the fake WeChat Pay holding both dev keys, signing with
// mode, checking the merchant's signatures.
func fakeConfig(tb testing.TB, mode fakewechatpay.SignMode) fakewechatpay.Config {
	tb.Helper()
	return fakewechatpay.Config{
		MchID: mchID, AppID: appID, APIv3Key: apiV3Key,
		PrivateKey: devkey.Read(tb, "wechatpay_private_key.pem"), PublicKeyID: publicKeyID,
		PlatformKey:       devkey.Read(tb, "wechatpay_platform_private_key.pem"),
		PlatformCert:      devkey.Read(tb, "wechatpay_platform_cert.pem"),
		Sign:              mode,
		MerchantPublicKey: devkey.Read(tb, "wechatpay_merchant_public_key.pem"),
		MerchantSerial:    merchantSerial,
	}
}

// env is a fake WeChat Pay on a real HTTP server, our client pointed at
// it, and a notify endpoint that verifies with the client.
type env struct {
	fake   *fakewechatpay.Server
	gw     *httptest.Server
	client *wechatpay.Client
	recv   *receiver
}

// newEnv starts an env; edit, if given, adjusts the fake's and the
// client's configs.
func newEnv(t *testing.T, edit func(*fakewechatpay.Config, *wechatpay.Config)) *env {
	t.Helper()
	fc := fakeConfig(t, fakewechatpay.SignEither)
	cc := clientConfig(t, true, true)
	if edit != nil {
		edit(&fc, &cc)
	}
	e := &env{}
	e.recv = newReceiver(t)
	fc.NotifyURL = e.recv.srv.URL
	fake, err := fakewechatpay.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	e.fake = fake
	e.gw = httptest.NewServer(fake.Handler())
	t.Cleanup(fake.Close)
	t.Cleanup(e.gw.Close)
	cc.Gateway = e.gw.URL
	e.client = newClient(t, cc)
	e.recv.client = e.client
	return e
}

// receiver stands in for the service's notify endpoint: it verifies each
// notification with the client, answers 204 when it verifies (and refuse
// is 0) and 4xx otherwise.
type receiver struct {
	srv    *httptest.Server
	client *wechatpay.Client

	mu     sync.Mutex
	got    []wechatpay.Notification
	errs   []error
	refuse int // refuse this many valid ones first, with 500
}

// newReceiver starts a receiver.
func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := rc.client.ReadNotification(r)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil {
			rc.errs = append(rc.errs, err)
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"code":"FAIL","message":"bad signature"}`))
			return
		}
		if rc.refuse > 0 {
			rc.refuse--
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"code":"FAIL","message":"busy"}`))
			return
		}
		rc.got = append(rc.got, n)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// Got returns the notifications accepted and the refusals' errors.
func (rc *receiver) Got() ([]wechatpay.Notification, []error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]wechatpay.Notification(nil), rc.got...), append([]error(nil), rc.errs...)
}

// Refuse makes the receiver answer 500 to the next n valid notifications.
func (rc *receiver) Refuse(n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.refuse = n
}

// seal encrypts plain as WeChat Pay does a resource, with key.
func seal(tb testing.TB, key, nonce, ad string, plain []byte) string {
	tb.Helper()
	block, err := aes.NewCipher([]byte(key))
	if err != nil {
		tb.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		tb.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plain, []byte(ad)))
}
