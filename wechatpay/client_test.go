package wechatpay_test

import (
	"strings"
	"testing"

	"paynotify/internal/devkey"
	"paynotify/wechatpay"
)

func TestNewNamesEverySetting(t *testing.T) {
	_, err := wechatpay.New(wechatpay.Config{})
	if err == nil {
		t.Fatal("an empty config was accepted")
	}
	for _, name := range []string{"WECHATPAY_MCHID", "WECHATPAY_APPID", "WECHATPAY_APIV3_KEY", "WECHATPAY_MERCHANT_KEY_FILE", "WECHATPAY_MERCHANT_SERIAL", "WECHATPAY_PUBLIC_KEY_FILE", "WECHATPAY_PLATFORM_CERT_FILES"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	secret := devkey.Read(t, "wechatpay_merchant_private_key.pem")
	for _, tc := range []struct {
		name string
		edit func(*wechatpay.Config)
		want string
	}{
		{"ShortAPIv3Key", func(c *wechatpay.Config) { c.APIv3Key = "short" }, "WECHATPAY_APIV3_KEY must be 32 bytes"},
		{"PrivateKeyNotPEM", func(c *wechatpay.Config) { c.MerchantPrivateKey = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" }, "WECHATPAY_MERCHANT_KEY_FILE: not an RSA private key"},
		{"PublicKeyIsAPrivateKey", func(c *wechatpay.Config) { c.PublicKey = secret }, "WECHATPAY_PUBLIC_KEY_FILE: not an RSA public key"},
		{"PublicKeyWithoutID", func(c *wechatpay.Config) { c.PublicKeyID = "" }, "WECHATPAY_PUBLIC_KEY_ID is required"},
		{"CertificateIsAKey", func(c *wechatpay.Config) { c.PlatformCerts = []string{devkey.Read(t, "wechatpay_public_key.pem")} }, "WECHATPAY_PLATFORM_CERT_FILES (file 1): not a PEM certificate"},
		{"GatewayWithPath", func(c *wechatpay.Config) { c.Gateway = "http://127.0.0.1:9/wechat" }, "WECHATPAY_GATEWAY"},
		{"DevMerchantKey", func(c *wechatpay.Config) { c.Refuse = []string{devkey.Read(t, "wechatpay_merchant_public_key.pem")} }, "WECHATPAY_MERCHANT_KEY_FILE is a development key"},
		{"DevPublicKey", func(c *wechatpay.Config) { c.Refuse = []string{devkey.Read(t, "wechatpay_private_key.pem")} }, "WECHATPAY_PUBLIC_KEY_FILE is a development key"},
		{"DevCertificate", func(c *wechatpay.Config) { c.Refuse = []string{devkey.Read(t, "wechatpay_platform_cert.pem")} }, "WECHATPAY_PLATFORM_CERT_FILES (file 1) is a development certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := clientConfig(t, true, true)
			tc.edit(&cfg)
			_, err := wechatpay.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "MII") {
				t.Fatalf("the error quotes a key: %v", err)
			}
		})
	}
	t.Run("DevKeysWhenNotAsked", func(t *testing.T) {
		if _, err := wechatpay.New(clientConfig(t, true, true)); err != nil {
			t.Fatal(err)
		}
	})
}
