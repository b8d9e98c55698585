package alipay

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/internal/devkey"
	"paynotify/model"
)

// selfSignedCert issues a certificate for the PEM private key, standing in
// for the app certificate Alipay would issue.
func selfSignedCert(tb testing.TB, privateKey string) string {
	tb.Helper()
	key, err := parsePrivateKey(privateKey)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42),
		Subject:      pkix.Name{CommonName: "paynotify dev app"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestNewErrors(t *testing.T) {
	appKey := devkey.Read(t, "app_private_key.pem")
	alipayPub := devkey.Read(t, "alipay_public_key.pem")
	// A key cut short: PEM armour intact, body broken. Its lines must not
	// surface in the error.
	truncated := appKey[:len(appKey)/2] + "\n-----END PRIVATE KEY-----\n"
	valid := func() Config {
		return Config{AppID: "2021000000000001", SellerID: "2088000000000001", AppPrivateKey: appKey, AlipayPublicKey: alipayPub}
	}
	tests := []struct {
		name   string
		edit   func(*Config)
		field  string // the setting the error must name
		secret string // what the error must not quote
	}{
		{name: "NoAppID", edit: func(c *Config) { c.AppID = "" }, field: "ALIPAY_APP_ID"},
		{name: "NoSellerID", edit: func(c *Config) { c.SellerID = "" }, field: "ALIPAY_SELLER_ID"},
		{name: "NoAlipayKey", edit: func(c *Config) { c.AlipayPublicKey = "" }, field: "ALIPAY_PUBLIC_KEY"},
		{name: "NoPrivateKey", edit: func(c *Config) { c.AppPrivateKey = "" }, field: "ALIPAY_APP_PRIVATE_KEY"},
		{name: "GarbagePrivateKey", edit: func(c *Config) { c.AppPrivateKey = "MIIEvQ-secret-garbage-key" }, field: "ALIPAY_APP_PRIVATE_KEY", secret: "MIIEvQ-secret-garbage-key"},
		{name: "GarbageBase64PrivateKey", edit: func(c *Config) { c.AppPrivateKey = "c2VjcmV0LWdhcmJhZ2Uta2V5" }, field: "ALIPAY_APP_PRIVATE_KEY", secret: "c2VjcmV0LWdhcmJhZ2Uta2V5"},
		{name: "TruncatedPrivateKey", edit: func(c *Config) { c.AppPrivateKey = truncated }, field: "ALIPAY_APP_PRIVATE_KEY", secret: truncated},
		{name: "PublicKeyAsPrivate", edit: func(c *Config) { c.AppPrivateKey = alipayPub }, field: "ALIPAY_APP_PRIVATE_KEY", secret: alipayPub},
		{name: "GarbagePublicKey", edit: func(c *Config) { c.AlipayPublicKey = "MIIBIj-secret-garbage-key" }, field: "ALIPAY_PUBLIC_KEY", secret: "MIIBIj-secret-garbage-key"},
		{name: "PrivateKeyAsPublic", edit: func(c *Config) { c.AlipayPublicKey = appKey }, field: "ALIPAY_PUBLIC_KEY", secret: appKey},
		{name: "GarbageAlipayCert", edit: func(c *Config) { c.AlipayPublicCert = "not a certificate" }, field: "ALIPAY_PUBLIC_CERT", secret: "not a certificate"},
		{name: "GarbageAppCert", edit: func(c *Config) { c.AppCert = "not a certificate" }, field: "ALIPAY_APP_CERT", secret: "not a certificate"},
		{name: "AppCertOfOtherKey", edit: func(c *Config) { c.AppCert = selfSignedCert(t, devkey.Read(t, "alipay_private_key.pem")) }, field: "ALIPAY_APP_CERT"},
		{name: "GarbageRootCert", edit: func(c *Config) { c.AlipayRootCert = "not a certificate" }, field: "ALIPAY_ROOT_CERT", secret: "not a certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.edit(&cfg)
			_, err := New(cfg)
			if err == nil {
				t.Fatal("New accepted a bad config")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.field) {
				t.Errorf("error %q does not name %s", msg, tt.field)
			}
			for line := range strings.Lines(tt.secret) {
				if line = strings.TrimSpace(line); len(line) >= 8 && strings.Contains(msg, line) {
					t.Errorf("error %q quotes key material %q", msg, line)
				}
			}
		})
	}
}

// TestNewCertificateMode checks that outbound calls carry the serials of
// the app and root certificates.
func TestNewCertificateMode(t *testing.T) {
	var s04 sample
	for _, s := range loadSamples(t) {
		if len(s.certs) > 1 {
			s04 = s
		}
	}
	if s04.name == "" {
		t.Fatal("no sample with a certificate chain")
	}
	appKey := devkey.Read(t, "app_private_key.pem")
	c := mustNew(t, Config{
		AppID:            s04.form.Get("app_id"),
		SellerID:         s04.form.Get("seller_id"),
		AppPrivateKey:    appKey,
		AppCert:          selfSignedCert(t, appKey),
		AlipayPublicCert: strings.Join(s04.certs, ""),
		// Any RSA-signed certificates do as a root bundle here.
		AlipayRootCert: strings.Join(s04.certs, ""),
	})
	values, err := c.SDK().URLValues(smartwalle.TradeQuery{OutTradeNo: "ORD-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"app_cert_sn", "alipay_root_cert_sn"} {
		if values.Get(k) == "" {
			t.Errorf("outbound call without %s", k)
		}
	}
	if roots := strings.Split(values.Get("alipay_root_cert_sn"), "_"); len(roots) != 2 {
		t.Errorf("alipay_root_cert_sn has %d serials, want 2", len(roots))
	}
}

func TestNewGateway(t *testing.T) {
	const fake = "http://127.0.0.1:9/gateway.do"
	tests := []struct {
		name       string
		production bool
		wantHost   string
	}{
		{name: "SandboxUsesFake", production: false, wantHost: "127.0.0.1:9"},
		{name: "ProductionIgnoresFake", production: true, wantHost: "openapi.alipay.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, Config{
				AppID:           "2021000000000001",
				SellerID:        "2088000000000001",
				AppPrivateKey:   devkey.Read(t, "app_private_key.pem"),
				AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"),
				Production:      tt.production,
				SandboxGateway:  fake,
			})
			u, err := c.SDK().BuildURL(smartwalle.TradeQuery{OutTradeNo: "ORD-1"})
			if err != nil {
				t.Fatal(err)
			}
			if u.Host != tt.wantHost {
				t.Errorf("gateway host %q, want %q", u.Host, tt.wantHost)
			}
			if c.SDK().Client.Timeout == 0 {
				t.Error("SDK HTTP client has no timeout")
			}
			// Alipay reads timestamp as Beijing time, whatever our zone.
			ts, err := time.ParseInLocation(time.DateTime, u.Query().Get("timestamp"), model.Beijing)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(ts).Abs(); d > time.Hour {
				t.Errorf("timestamp %v off by %v: not Beijing time", ts, d)
			}
		})
	}
}
