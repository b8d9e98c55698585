package wechatpay_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/wechatpay"
)

// spec is a notification to build: what it says and how it is sealed
// and signed.
type spec struct {
	event    string
	resource map[string]any
	apiV3Key string
	keyFile  string // the signing key, in testdata/dev
	serial   string
	at       time.Time
	edit     func(h http.Header, body []byte) []byte
	// ciphertext, if set, is the resource's ciphertext as signed, for
	// one that is not what sealing makes.
	ciphertext string
}

// paid is the resource of DEMO-1001 paid 100.00 yuan.
func paid() map[string]any {
	return map[string]any{
		"appid": appID, "mchid": mchID, "out_trade_no": "DEMO-1001", "transaction_id": "4200002026120100000000000001",
		"trade_type": "NATIVE", "trade_state": "SUCCESS", "trade_state_desc": "支付成功", "bank_type": "OTHERS",
		"success_time": "2026-12-01T10:00:00+08:00", "payer": map[string]string{"openid": "oDEMO"},
		"amount": map[string]any{"total": 10000, "payer_total": 10000, "currency": "CNY", "payer_currency": "CNY"},
	}
}

// build seals and signs a notification as WeChat Pay would.
func build(tb testing.TB, s spec) (http.Header, []byte) {
	tb.Helper()
	if s.event == "" {
		s.event = wechatpay.EventTransactionSuccess
	}
	if s.resource == nil {
		s.resource = paid()
	}
	if s.apiV3Key == "" {
		s.apiV3Key = apiV3Key
	}
	if s.keyFile == "" {
		s.keyFile, s.serial = "wechatpay_private_key.pem", publicKeyID
	}
	if s.at.IsZero() {
		s.at = time.Now()
	}
	plain, err := json.Marshal(s.resource)
	if err != nil {
		tb.Fatal(err)
	}
	ciphertext := seal(tb, s.apiV3Key, "0123456789AB", "transaction", plain)
	if s.ciphertext != "" {
		ciphertext = s.ciphertext
	}
	body, err := json.Marshal(map[string]any{
		"id": "EV-2026-0001", "create_time": "2026-12-01T10:00:01+08:00", "resource_type": "encrypt-resource",
		"event_type": s.event, "summary": "支付成功",
		"resource": map[string]string{
			"original_type": "transaction", "algorithm": "AEAD_AES_256_GCM", "associated_data": "transaction",
			"nonce": "0123456789AB", "ciphertext": ciphertext,
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	g, err := fakewechatpay.SignNotification(devkey.Read(tb, s.keyFile), s.serial, s.at, body)
	if err != nil {
		tb.Fatal(err)
	}
	h := make(http.Header)
	g.Set(h)
	if s.edit != nil {
		body = s.edit(h, body)
	}
	return h, body
}

func TestVerifyNotification(t *testing.T) {
	both := newClient(t, clientConfig(t, true, true))
	want := wechatpay.Transaction{
		TransactionID: "4200002026120100000000000001", OutTradeNo: "DEMO-1001", Total: 10000, Currency: "CNY",
		SuccessTime: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), TradeType: "NATIVE", NotifyID: "EV-2026-0001",
		MchID: mchID, AppID: appID,
	}
	byCert := spec{keyFile: "wechatpay_platform_private_key.pem", serial: certSerial}
	for _, tc := range []struct {
		name   string
		client *wechatpay.Client
		spec   spec
		err    error // nil: want the transaction
	}{
		{"PublicKey", newClient(t, clientConfig(t, true, false)), spec{}, nil},
		{"Certificate", newClient(t, clientConfig(t, false, true)), byCert, nil},
		{"BothByPublicKey", both, spec{}, nil},
		{"BothByCertificate", both, byCert, nil},
		{"CertificateOnlyRefusesPublicKey", newClient(t, clientConfig(t, false, true)), spec{}, wechatpay.ErrUnknownSerial},
		{"PublicKeyOnlyRefusesCertificate", newClient(t, clientConfig(t, true, false)), byCert, wechatpay.ErrUnknownSerial},
		{"Probe", both, spec{edit: func(h http.Header, b []byte) []byte {
			h.Set(wechatpay.HeaderSignature, wechatpay.ProbePrefix+"TkVWRVItQS1SRUFMLVNJR05BVFVSRQ==")
			return b
		}}, wechatpay.ErrSignatureProbe},
		{"SixMinutesOld", both, spec{at: time.Now().Add(-6 * time.Minute)}, wechatpay.ErrStaleTimestamp},
		{"SixMinutesAhead", both, spec{at: time.Now().Add(6 * time.Minute)}, wechatpay.ErrStaleTimestamp},
		{"FourMinutesOld", both, spec{at: time.Now().Add(-4 * time.Minute)}, nil},
		{"SignedByAnotherKey", both, spec{keyFile: "wechatpay_merchant_private_key.pem", serial: publicKeyID}, wechatpay.ErrSignature},
		{"CertificateSerialPublicKeySignature", both, spec{keyFile: "wechatpay_private_key.pem", serial: certSerial}, wechatpay.ErrSignature},
		{"BodyEdited", both, spec{edit: func(h http.Header, b []byte) []byte {
			return append(b, ' ')
		}}, wechatpay.ErrSignature},
		{"NonceEdited", both, spec{edit: func(h http.Header, b []byte) []byte {
			h.Set(wechatpay.HeaderNonce, "X"+h.Get(wechatpay.HeaderNonce))
			return b
		}}, wechatpay.ErrSignature},
		{"NoTimestamp", both, spec{edit: func(h http.Header, b []byte) []byte {
			h.Del(wechatpay.HeaderTimestamp)
			return b
		}}, wechatpay.ErrSignature},
		{"OtherSignatureType", both, spec{edit: func(h http.Header, b []byte) []byte {
			h.Set(wechatpay.HeaderSignatureType, "WECHATPAY2-SM2-WITH-SM3")
			return b
		}}, wechatpay.ErrSignature},
		{"CiphertextNotBase64", both, spec{ciphertext: "not*base64"}, model.ErrInvalidNotification},
		{"CiphertextNotSealed", both, spec{ciphertext: "bm90IHNlYWxlZCBieSBhbnkga2V5"}, wechatpay.ErrDecrypt},
		{"OtherAPIv3Key", both, spec{apiV3Key: "another-32-byte-apiv3-key-here!!"}, wechatpay.ErrDecrypt},
		{"OtherMchID", both, spec{resource: with(paid(), "mchid", "1900000002")}, model.ErrWrongMerchant},
		{"OtherAppID", both, spec{resource: with(paid(), "appid", "wx0000000000000099")}, model.ErrUnknownApp},
		{"NotPaid", both, spec{resource: with(paid(), "trade_state", "NOTPAY")}, wechatpay.ErrNotPaid},
		{"NoAmount", both, spec{resource: with(paid(), "amount", map[string]any{"currency": "CNY"})}, model.ErrInvalidNotification},
		{"AmountNotInteger", both, spec{resource: with(paid(), "amount", map[string]any{"total": 100.5})}, model.ErrInvalidNotification},
		{"NotCNY", both, spec{resource: with(paid(), "amount", map[string]any{"total": 10000, "currency": "USD"})}, model.ErrInvalidNotification},
		{"NoSuccessTime", both, spec{resource: with(paid(), "success_time", "")}, model.ErrInvalidNotification},
		{"UnknownEvent", both, spec{event: "TRANSACTION.CLOSED"}, model.ErrInvalidNotification},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body := build(t, tc.spec)
			n, err := tc.client.VerifyNotification(context.Background(), h, body)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.Refund != nil || n.Payment == nil {
				t.Fatalf("notification %+v, want a payment", n)
			}
			if diff := cmp.Diff(want, *n.Payment); diff != "" {
				t.Fatalf("transaction (-want +got):\n%s", diff)
			}
		})
	}
}

// with is m with key set to v.
func with(m map[string]any, key string, v any) map[string]any {
	m[key] = v
	return m
}

func TestVerifyNotificationRefundIsAHint(t *testing.T) {
	c := newClient(t, clientConfig(t, true, true))
	for _, status := range []string{"SUCCESS", "ABNORMAL", "CLOSED"} {
		t.Run(status, func(t *testing.T) {
			h, body := build(t, spec{event: "REFUND." + status, resource: map[string]any{
				"mchid": mchID, "out_trade_no": "DEMO-1001", "transaction_id": "4200002026120100000000000001",
				"out_refund_no": "RF-1", "refund_id": "50300", "refund_status": status,
				"amount": map[string]any{"total": 10000, "refund": 2500, "payer_total": 10000, "payer_refund": 2500},
			}})
			n, err := c.VerifyNotification(context.Background(), h, body)
			if err != nil {
				t.Fatal(err)
			}
			if n.Payment != nil || n.Refund == nil {
				t.Fatalf("notification %+v, want a refund hint only", n)
			}
			if n.Refund.OutRefundNo != "RF-1" || n.Refund.Status != wechatpay.RefundStatus(status) || n.Refund.Refund != 2500 {
				t.Fatalf("hint %+v", *n.Refund)
			}
		})
	}
	t.Run("OtherMchID", func(t *testing.T) {
		h, body := build(t, spec{event: wechatpay.EventRefundSuccess, resource: map[string]any{"mchid": "1900000002", "out_refund_no": "RF-1"}})
		if _, err := c.VerifyNotification(context.Background(), h, body); !errors.Is(err, model.ErrWrongMerchant) {
			t.Fatalf("err %v, want ErrWrongMerchant", err)
		}
	})
	t.Run("RefundEventCarryingATransaction", func(t *testing.T) {
		// A resource that is a payment under a REFUND.* event is never a
		// payment: it has no out_refund_no.
		h, body := build(t, spec{event: wechatpay.EventRefundSuccess})
		n, err := c.VerifyNotification(context.Background(), h, body)
		if err == nil || n.Payment != nil {
			t.Fatalf("notification %+v, err %v: want refused", n, err)
		}
	})
}

func TestVerifyNotificationClock(t *testing.T) {
	// A fixed clock: the testdata's timestamp is judged by it.
	at := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		now  time.Time
		ok   bool
	}{
		{"Same", at, true},
		{"FiveMinutesLater", at.Add(5 * time.Minute), true},
		{"FiveMinutesAndASecondLater", at.Add(5*time.Minute + time.Second), false},
		{"FiveMinutesAndASecondEarlier", at.Add(-5*time.Minute - time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := clientConfig(t, true, true)
			cfg.Now = func() time.Time { return tc.now }
			h, body := build(t, spec{at: at})
			_, err := newClient(t, cfg).VerifyNotification(context.Background(), h, body)
			if tc.ok != (err == nil) {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, wechatpay.ErrStaleTimestamp) {
				t.Fatalf("err %v, want ErrStaleTimestamp", err)
			}
		})
	}
}

// A merchant with several appids (PROVIDERS_FILE) takes each one's
// notifications, names the app in the transaction, and refuses an appid it
// was not given; an APIv3 key being reset opens notices sealed with either
// key, the new one listed first.
func TestVerifyNotificationAppsAndKeys(t *testing.T) {
	const other, unknown = "wx2222222222222222", "wx9999999999999999"
	const newKey = "new-32-byte-apiv3-key-0123456789"
	cfg := clientConfig(t, true, false)
	cfg.AppIDs = []string{other}
	cfg.APIv3Key, cfg.OldAPIv3Keys = newKey, []string{cfg.APIv3Key}
	c := newClient(t, cfg)
	for _, tc := range []struct {
		name, appID, key string
		err              error
	}{
		{"FirstAppOldKey", appID, apiV3Key, nil},
		{"SecondAppOldKey", other, apiV3Key, nil},
		{"SecondAppNewKey", other, newKey, nil},
		{"UnknownApp", unknown, newKey, model.ErrUnknownApp},
		{"UnknownKey", other, "another-32-byte-apiv3-key-here!!", wechatpay.ErrDecrypt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body := build(t, spec{resource: with(paid(), "appid", tc.appID), apiV3Key: tc.key})
			n, err := c.VerifyNotification(context.Background(), h, body)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err == nil && (n.Payment.AppID != tc.appID || n.Payment.MchID != mchID) {
				t.Errorf("payment of mchid %q appid %q, want %q %q", n.Payment.MchID, n.Payment.AppID, mchID, tc.appID)
			}
		})
	}
}
