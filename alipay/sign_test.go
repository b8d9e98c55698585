package alipay

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"paynotify/internal/devkey"
)

// devForm is a notification as the stand-in Alipay in testdata/dev sends.
func devForm() url.Values {
	return url.Values{
		"app_id":       {"2021000000000001"},
		"seller_id":    {"2088000000000001"},
		"notify_id":    {"2024010100222000000000000000000001"},
		"notify_type":  {"trade_status_sync"},
		"trade_status": {"TRADE_SUCCESS"},
		"out_trade_no": {"ORD-1"},
		"trade_no":     {"2024010122001400000000000001"},
		"total_amount": {"100.00"},
		"gmt_payment":  {"2024-01-01 12:00:00"},
		"charset":      {"utf-8"},
		"version":      {"1.0"},
	}
}

// devClient verifies what the stand-in Alipay signs, in sandbox mode.
func devClient(tb testing.TB) *Client {
	tb.Helper()
	f := devForm()
	return mustNew(tb, Config{
		AppID:           f.Get("app_id"),
		SellerID:        f.Get("seller_id"),
		AppPrivateKey:   devkey.Read(tb, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(tb, "alipay_public_key.pem"),
	})
}

// bareBase64 strips the PEM armour, leaving what the Alipay console shows.
func bareBase64(pemKey string) string {
	var b strings.Builder
	for line := range strings.Lines(pemKey) {
		if !strings.HasPrefix(line, "-----") {
			b.WriteString(strings.TrimSpace(line))
		}
	}
	return b.String()
}

func TestSignFormRoundTrip(t *testing.T) {
	alipayKey := devkey.Read(t, "alipay_private_key.pem")
	tests := []struct {
		name string
		key  string
		edit func(url.Values)
	}{
		{name: "Plain", key: alipayKey},
		{name: "EmptyValue", key: alipayKey, edit: func(f url.Values) { f.Set("refund_fee", ""); f.Set("body", "") }},
		{name: "RawValues", key: alipayKey, edit: func(f url.Values) { f.Set("subject", "yansongda+测试 - 1 & a=b%20") }},
		{name: "SignTypeOverwritten", key: alipayKey, edit: func(f url.Values) { f.Set("sign_type", "RSA") }},
		{name: "KeyPKCS8", key: devkey.Read(t, "app_private_key.pem")},
		{name: "KeyBareBase64", key: bareBase64(alipayKey)},
		{name: "KeyEscapedNewlines", key: strings.ReplaceAll(alipayKey, "\n", `\n`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form := devForm()
			if tt.edit != nil {
				tt.edit(form)
			}
			before := form.Encode()
			signed, err := SignForm(tt.key, form)
			if err != nil {
				t.Fatal(err)
			}
			if form.Encode() != before {
				t.Error("SignForm changed its input")
			}
			if got := signed.Get("sign_type"); got != "RSA2" {
				t.Errorf("sign_type = %q, want RSA2", got)
			}
			pub, err := PublicKeyOf(tt.key)
			if err != nil {
				t.Fatal(err)
			}
			f := devForm()
			c := mustNew(t, Config{
				AppID:           f.Get("app_id"),
				SellerID:        f.Get("seller_id"),
				AppPrivateKey:   devkey.Read(t, "app_private_key.pem"),
				AlipayPublicKey: pub,
			})
			if err := c.VerifyNotification(context.Background(), signed); err != nil {
				t.Fatalf("own signature refused: %v", err)
			}
		})
	}
}

// TestSignFormDevKeys pins the pairing of the committed dev keys: what the
// stand-in Alipay signs, alipay_public_key.pem verifies.
func TestSignFormDevKeys(t *testing.T) {
	signed, err := SignForm(devkey.Read(t, "alipay_private_key.pem"), devForm())
	if err != nil {
		t.Fatal(err)
	}
	if err := devClient(t).VerifyNotification(context.Background(), signed); err != nil {
		t.Fatal(err)
	}
}

func TestSignFormRepeatedKey(t *testing.T) {
	form := devForm()
	form.Add("out_trade_no", "ORD-2")
	if _, err := SignForm(devkey.Read(t, "alipay_private_key.pem"), form); err == nil {
		t.Fatal("signed a form with a repeated key")
	}
}

func TestSignContent(t *testing.T) {
	tests := []struct {
		name string
		form url.Values
		want string
	}{
		{
			name: "SortedRawSkipped",
			form: url.Values{
				"b": {"2"}, "a": {"x y+z&=%20"}, "sign": {"s"}, "sign_type": {"RSA2"},
				"empty": {""}, "": {"nokey"}, "c_d": {"测试"},
			},
			want: "a=x y+z&=%20&b=2&c_d=测试",
		},
		{name: "Empty", form: url.Values{}, want: ""},
		// Keys sort as keys, not as "k=v" strings: "a" before "a1".
		{name: "KeyPrefix", form: url.Values{"a1": {"1"}, "a": {"0"}}, want: "a=0&a1=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := signContent(tt.form); got != tt.want {
				t.Errorf("signContent = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSignContentRealSamples checks signContent against Alipay itself, with
// no smartwalle in the way: each real signature verifies over it.
func TestSignContentRealSamples(t *testing.T) {
	for _, s := range loadSamples(t) {
		t.Run(s.name, func(t *testing.T) {
			pub, err := parsePublicKey(s.publicKey)
			if err != nil {
				t.Fatal(err)
			}
			sig, err := base64.StdEncoding.DecodeString(s.form.Get("sign"))
			if err != nil {
				t.Fatal(err)
			}
			digest := sha256.Sum256([]byte(signContent(s.form)))
			if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
				t.Fatalf("Alipay's signature does not cover signContent: %v", err)
			}
		})
	}
}

func TestPublicKeyOf(t *testing.T) {
	got, err := PublicKeyOf(devkey.Read(t, "alipay_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	gotKey, err := parsePublicKey(got)
	if err != nil {
		t.Fatal(err)
	}
	wantKey, err := parsePublicKey(devkey.Read(t, "alipay_public_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if !gotKey.Equal(wantKey) {
		t.Error("PublicKeyOf(alipay_private_key.pem) is not alipay_public_key.pem")
	}
	if !strings.HasPrefix(got, "-----BEGIN PUBLIC KEY-----\n") {
		t.Errorf("not PKIX PEM: %.30q", got)
	}
}
