package alipay

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"paynotify/internal/devkey"
	"paynotify/model"
)

// alipayCert is one of Alipay's certificates as the test issues it: its
// key signs notifications, its serial names it (alipay_cert_sn).
type alipayCert struct {
	key, pem, sn string
}

// newAlipayCert issues a certificate of a new key with serial.
func newAlipayCert(tb testing.TB, serial int64) alipayCert {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "Ant Financial Certification Authority Class 2 R1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return alipayCert{
		key: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
		pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), sn: CertSN(cert),
	}
}

// While Alipay renews its certificate both verify: a notification naming
// alipay_cert_sn is checked with that certificate only (one of none
// configured is refused), one naming none with each; a key of neither is
// refused. Alipay's public key beside the certificates verifies too (the
// move to certificate mode).
func TestVerifySeveralCertificates(t *testing.T) {
	const app, seller = "2021000000000077", "2088000000000077"
	old, renewed, stranger := newAlipayCert(t, 1001), newAlipayCert(t, 1002), newAlipayCert(t, 1003)
	appKey := devkey.Read(t, "app_private_key.pem")
	form := func(t *testing.T, key, sn string) url.Values {
		t.Helper()
		f := url.Values{"notify_id": {"n-1"}, "app_id": {app}, "seller_id": {seller}, "out_trade_no": {"ORD-1"},
			"trade_no": {"2026120722001400000000000001"}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {"9.00"}}
		signed, err := SignForm(key, f)
		if err != nil {
			t.Fatal(err)
		}
		if sn != "" { // not in the signed content, as Alipay's rule has it
			signed.Set(fieldCertSN, sn)
		}
		return signed
	}
	renewal := mustNew(t, Config{AppID: app, SellerID: seller, AppPrivateKey: appKey,
		AlipayPublicCert: renewed.pem, OtherAlipayPublicCerts: []string{old.pem}})
	for _, tc := range []struct {
		name, key, sn string
		ok            bool
	}{
		{"OldNamingNone", old.key, "", true},
		{"NewNamingNone", renewed.key, "", true},
		{"OldNamingOld", old.key, old.sn, true},
		{"NewNamingNew", renewed.key, renewed.sn, true},
		{"OldNamingNew", old.key, renewed.sn, false},
		{"NewNamingOld", renewed.key, old.sn, false},
		{"OldNamingUnknown", old.key, stranger.sn, false},
		{"StrangerNamingNone", stranger.key, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := renewal.VerifyNotification(context.Background(), form(t, tc.key, tc.sn))
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, model.ErrBadSignature) {
				t.Fatalf("verify: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// Once the old certificate is gone, its signature is refused.
	renewed1 := mustNew(t, Config{AppID: app, SellerID: seller, AppPrivateKey: appKey, AlipayPublicCert: renewed.pem})
	if err := renewed1.VerifyNotification(context.Background(), form(t, old.key, "")); !errors.Is(err, model.ErrBadSignature) {
		t.Fatalf("old certificate dropped: %v", err)
	}

	// Moving to certificate mode: the public key and the certificate.
	oldPub, err := PublicKeyOf(old.key)
	if err != nil {
		t.Fatal(err)
	}
	moving := mustNew(t, Config{AppID: app, SellerID: seller, AppPrivateKey: appKey, AlipayPublicKey: oldPub, AlipayPublicCert: renewed.pem})
	for _, key := range []string{old.key, renewed.key} {
		if err := moving.VerifyNotification(context.Background(), form(t, key, "")); err != nil {
			t.Errorf("public key beside the certificate: %v", err)
		}
	}

	// One certificate listed twice is a configuration error naming it.
	_, err = New(Config{AppID: app, SellerID: seller, AppPrivateKey: appKey, AlipayPublicCert: renewed.pem, OtherAlipayPublicCerts: []string{renewed.pem}})
	if err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("a certificate twice: %v", err)
	}
}
