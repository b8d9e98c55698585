package fakewechatpay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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

// env is the fake on a real server, paynotify's client pointed at it and
// a notify endpoint verifying with that client.
type env struct {
	fake   *fakewechatpay.Server
	gw     *httptest.Server
	client *wechatpay.Client
	// notifyURL is the notify endpoint's.
	notifyURL string

	mu      sync.Mutex
	refuse  int
	serials []string
	got     []wechatpay.Notification
	errs    []error
}

func newEnv(t *testing.T, edit func(*fakewechatpay.Config)) *env {
	t.Helper()
	e := &env{}
	recv := httptest.NewServer(http.HandlerFunc(e.receive))
	t.Cleanup(recv.Close)
	e.notifyURL = recv.URL
	cfg := fakewechatpay.Config{
		MchID: mchID, AppID: appID, APIv3Key: apiV3Key,
		PrivateKey: devkey.Read(t, "wechatpay_private_key.pem"), PublicKeyID: publicKeyID,
		PlatformKey: devkey.Read(t, "wechatpay_platform_private_key.pem"), PlatformCert: devkey.Read(t, "wechatpay_platform_cert.pem"),
		Sign:              fakewechatpay.SignEither,
		MerchantPublicKey: devkey.Read(t, "wechatpay_merchant_public_key.pem"), MerchantSerial: merchantSerial,
		NotifyURL: recv.URL,
		Resends:   []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond},
	}
	if edit != nil {
		edit(&cfg)
	}
	fake, err := fakewechatpay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.fake = fake
	e.gw = httptest.NewServer(fake.Handler())
	t.Cleanup(fake.Close)
	t.Cleanup(e.gw.Close)
	e.client, err = wechatpay.New(wechatpay.Config{
		MchID: mchID, AppID: appID, APIv3Key: apiV3Key,
		MerchantPrivateKey: devkey.Read(t, "wechatpay_merchant_private_key.pem"), MerchantSerial: merchantSerial,
		PublicKey: devkey.Read(t, "wechatpay_public_key.pem"), PublicKeyID: publicKeyID,
		PlatformCerts: []string{devkey.Read(t, "wechatpay_platform_cert.pem")},
		Gateway:       e.gw.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// receive is the notify endpoint: 204 when the notification verifies
// (after refusing the first e.refuse with 500), 401 when it does not.
func (e *env) receive(w http.ResponseWriter, r *http.Request) {
	n, err := e.client.ReadNotification(r)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serials = append(e.serials, r.Header.Get(wechatpay.HeaderSerial))
	switch {
	case err != nil:
		e.errs = append(e.errs, err)
		w.WriteHeader(http.StatusUnauthorized)
	case e.refuse > 0:
		e.refuse--
		w.WriteHeader(http.StatusInternalServerError)
	default:
		e.got = append(e.got, n)
		w.WriteHeader(http.StatusNoContent)
	}
}

// open opens a native trade through the client.
func (e *env) open(t *testing.T, outTradeNo string, fen int64) {
	t.Helper()
	if _, err := e.client.Pay(context.Background(), wechatpay.PayRequest{
		Method: wechatpay.MethodNative, OutTradeNo: outTradeNo, Description: "Espresso beans 1kg", Total: fen,
	}); err != nil {
		t.Fatal(err)
	}
}

func TestNotificationResentUntil2xx(t *testing.T) {
	e := newEnv(t, nil)
	e.open(t, "DEMO-1001", 10000)
	e.refuse = 2
	if err := e.fake.Pay(context.Background(), "DEMO-1001"); !errors.Is(err, fakewechatpay.ErrNotAcknowledged) {
		t.Fatalf("first delivery: %v, want ErrNotAcknowledged", err)
	}
	e.fake.WaitNotifications()
	notes := e.fake.Notifications()
	if len(notes) != 3 {
		t.Fatalf("%d attempts, want 3 (refused, refused, acknowledged)", len(notes))
	}
	for i, n := range notes {
		want := fakewechatpay.Refused
		if i == 2 {
			want = fakewechatpay.Acknowledged
		}
		if n.Outcome != want || n.Attempt != i+1 || n.ID != notes[0].ID {
			t.Errorf("attempt %d: %s #%d id %s, want %s #%d id %s", i, n.Outcome, n.Attempt, n.ID, want, i+1, notes[0].ID)
		}
	}
	if len(e.got) != 1 || e.got[0].Payment.OutTradeNo != "DEMO-1001" || e.got[0].ID != notes[0].ID {
		t.Fatalf("received %+v", e.got)
	}
}

func TestNotificationGivesUpAfterTheSchedule(t *testing.T) {
	e := newEnv(t, nil)
	e.open(t, "DEMO-1002", 100)
	e.refuse = 100
	e.fake.Pay(context.Background(), "DEMO-1002")
	e.fake.WaitNotifications()
	if n := len(e.fake.Notifications()); n != 4 {
		t.Fatalf("%d attempts, want 1 + 3 resends", n)
	}
}

func TestSignsWithEitherKey(t *testing.T) {
	// WeChat Pay signs with either key at random while a merchant moves to
	// the public key: both serials must come, and both verify.
	e := newEnv(t, nil)
	seen := map[string]bool{}
	for i := 0; len(seen) < 2; i++ {
		if i == 200 {
			t.Fatalf("after %d notifications only %v signed", i, seen)
		}
		no := "DEMO-" + time.Now().Format("150405") + "-" + string(rune('A'+i%26)) + string(rune('A'+i/26))
		e.open(t, no, 1)
		if err := e.fake.Pay(context.Background(), no); err != nil {
			t.Fatal(err)
		}
		seen[e.serials[len(e.serials)-1]] = true
	}
	if !seen[publicKeyID] || !seen[certSerial] || len(e.errs) > 0 {
		t.Fatalf("serials %v, refusals %v", seen, e.errs)
	}
}

func TestSignatureProbeIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	n, err := e.fake.SendProbe(context.Background(), e.notifyURL)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != http.StatusUnauthorized || len(e.errs) != 1 || !errors.Is(e.errs[0], wechatpay.ErrSignatureProbe) {
		t.Fatalf("probe answered %d, refusals %v", n.Status, e.errs)
	}
}

func TestNotificationFaults(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.open(t, "DEMO-2001", 1)
	e.open(t, "DEMO-2002", 2)
	e.open(t, "DEMO-2003", 3)

	e.fake.LoseNotifications(true)
	e.fake.Pay(ctx, "DEMO-2001")
	e.fake.LoseNotifications(false)
	e.fake.DuplicateNotifications(2)
	e.fake.Pay(ctx, "DEMO-2002")
	e.fake.DuplicateNotifications(1)
	e.fake.HoldNotifications(true)
	e.fake.Pay(ctx, "DEMO-2003")
	e.fake.HoldNotifications(false)
	if len(e.got) != 2 {
		t.Fatalf("received %d before release, want the duplicated one twice", len(e.got))
	}
	if err := e.fake.ReleaseHeld(ctx); err != nil {
		t.Fatal(err)
	}
	if len(e.got) != 3 || e.got[2].Payment.OutTradeNo != "DEMO-2003" {
		t.Fatalf("received %+v", e.got)
	}
	if err := e.fake.Resend(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if len(e.got) != 4 || e.got[3].ID != e.got[0].ID {
		t.Fatalf("a resend keeps its id: %+v", e.got)
	}
}
