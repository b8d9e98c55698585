package wechatpay_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/wechatpay"
)

// TestSignatureAgreesWithSDK holds the notification signature check
// (keys prepared once, internal/sha256rsa) to the SDK's verifiers, the
// ones it replaces: for each key mode, each signer and serial, valid and
// tampered, with the certificate valid and expired, both give the answer
// wanted.
func TestSignatureAgreesWithSDK(t *testing.T) {
	certs, err := wechatpay.ParseCertificates(devkey.Read(t, "wechatpay_platform_cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		publicKeyFile = "wechatpay_private_key.pem"
		platformFile  = "wechatpay_platform_private_key.pem"
	)
	signers := []struct {
		name, keyFile, serial string
		byPublicKey, byCert   bool // a valid signature by the key its serial names
	}{
		{"public key", publicKeyFile, publicKeyID, true, false},
		{"certificate", platformFile, certSerial, false, true},
		{"public key under the certificate's serial", publicKeyFile, certSerial, false, false},
		{"certificate's key under the public key's id", platformFile, publicKeyID, false, false},
		{"unknown serial", publicKeyFile, "PUB_KEY_ID_0119000000000999", false, false},
	}
	flip := func(h http.Header, bit int) {
		sig, err := base64.StdEncoding.DecodeString(h.Get(wechatpay.HeaderSignature))
		if err != nil {
			t.Fatal(err)
		}
		sig[bit/8] ^= 1 << (bit % 8)
		h.Set(wechatpay.HeaderSignature, base64.StdEncoding.EncodeToString(sig))
	}
	tampers := []struct {
		name string
		edit func(h http.Header, body []byte) []byte
	}{
		{"valid", nil},
		{"body", func(_ http.Header, b []byte) []byte { return append(b[:len(b)-1:len(b)-1], ' ', '}') }},
		{"timestamp", func(h http.Header, b []byte) []byte {
			ts, _ := strconv.ParseInt(h.Get(wechatpay.HeaderTimestamp), 10, 64)
			h.Set(wechatpay.HeaderTimestamp, strconv.FormatInt(ts-1, 10))
			return b
		}},
		{"nonce", func(h http.Header, b []byte) []byte {
			h.Set(wechatpay.HeaderNonce, h.Get(wechatpay.HeaderNonce)+"0")
			return b
		}},
		{"first signature bit", func(h http.Header, b []byte) []byte { flip(h, 0); return b }},
		{"last signature bit", func(h http.Header, b []byte) []byte { flip(h, 2047); return b }},
		{"signature short", func(h http.Header, b []byte) []byte {
			h.Set(wechatpay.HeaderSignature, h.Get(wechatpay.HeaderSignature)[4:])
			return b
		}},
		{"signature not base64", func(h http.Header, b []byte) []byte { h.Set(wechatpay.HeaderSignature, "not*base64"); return b }},
	}
	modes := []struct {
		name              string
		publicKey, certOK bool
	}{{"public key", true, false}, {"certificates", false, true}, {"both", true, true}}
	clocks := []struct {
		name string
		now  time.Time
	}{{"certificate valid", time.Now()}, {"certificate expired", certs[0].NotAfter.Add(time.Hour)}}
	accepted := 0
	for _, m := range modes {
		for _, clock := range clocks {
			cfg := clientConfig(t, m.publicKey, m.certOK)
			cfg.Now = func() time.Time { return clock.now }
			c := newClient(t, cfg)
			for _, s := range signers {
				for _, tm := range tampers {
					body := []byte(`{"id":"EV-2026-0001","event_type":"TRANSACTION.SUCCESS"}`)
					g, err := fakewechatpay.SignNotification(devkey.Read(t, s.keyFile), s.serial, clock.now, body)
					if err != nil {
						t.Fatal(err)
					}
					h := make(http.Header)
					g.Set(h)
					if tm.edit != nil {
						body = tm.edit(h, body)
					}
					want := tm.edit == nil && (s.byPublicKey && m.publicKey || s.byCert && m.certOK && clock.now.Before(certs[0].NotAfter))
					ours, sdk := wechatpay.VerifySigned(c, h, body), wechatpay.SDKVerify(c, h, body)
					if (ours == nil) != want || (sdk == nil) != want {
						t.Errorf("%s keys, %s, signed by the %s, %s: ours %v, SDK's %v; want accepted %v",
							m.name, clock.name, s.name, tm.name, ours, sdk, want)
					}
					if want {
						accepted++
					}
				}
			}
		}
	}
	if accepted != 6 { // the public key: 2 modes × 2 clocks; the certificate: 2 modes, valid
		t.Errorf("%d valid signatures accepted, want 6", accepted)
	}
}
