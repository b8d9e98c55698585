package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"paynotify/config"
)

// WeChat Pay is on when its variables are set, and its check names every
// missing or malformed one; at least one provider must be on.
func TestWechatpayNamesEveryProblem(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "apiclient_key.pem")
	if err := os.WriteFile(keyFile, []byte("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := []string{"WECHATPAY_MCHID=1230000109", "WECHATPAY_APPID=wxd678efh567hg6787",
		"WECHATPAY_APIV3_KEY=0123456789abcdef0123456789abcdef", "WECHATPAY_MERCHANT_KEY_FILE=" + keyFile,
		"WECHATPAY_MERCHANT_SERIAL=5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
		"WECHATPAY_PUBLIC_KEY_FILE=" + keyFile, "WECHATPAY_PUBLIC_KEY_ID=PUB_KEY_ID_0112345678202401010000000000000000"}
	for _, tc := range []struct {
		name    string
		environ []string
		want    []string
	}{
		{name: "Shaped", environ: good},
		{name: "OneSet", environ: []string{"WECHATPAY_MCHID=1230000109"},
			want: []string{"WECHATPAY_APPID", "WECHATPAY_APIV3_KEY", "WECHATPAY_MERCHANT_KEY_FILE", "WECHATPAY_MERCHANT_SERIAL", "WECHATPAY_PLATFORM_CERT_FILES"}},
		{name: "Malformed", environ: []string{"WECHATPAY_MCHID=12a", "WECHATPAY_APPID=app1", "WECHATPAY_APIV3_KEY=short",
			"WECHATPAY_MERCHANT_KEY_FILE=/no/such/key.pem", "WECHATPAY_MERCHANT_SERIAL=not-hex", "WECHATPAY_PUBLIC_KEY_ID=KEY1",
			"WECHATPAY_PLATFORM_CERT_FILES=/no/such/cert.pem", "WECHATPAY_GATEWAY=ftp://x"},
			want: []string{"WECHATPAY_MCHID", "WECHATPAY_APPID", "WECHATPAY_APIV3_KEY", "WECHATPAY_MERCHANT_KEY_FILE",
				"WECHATPAY_MERCHANT_SERIAL", "WECHATPAY_PUBLIC_KEY_FILE and WECHATPAY_PUBLIC_KEY_ID", "WECHATPAY_PLATFORM_CERT_FILES", "WECHATPAY_GATEWAY"}},
		{name: "KeyAndKeyFile", environ: append(good[:len(good):len(good)], "WECHATPAY_APIV3_KEY_FILE="+keyFile),
			want: []string{"WECHATPAY_APIV3_KEY or WECHATPAY_APIV3_KEY_FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(tc.environ)
			if err != nil {
				t.Fatal(err)
			}
			if !c.WechatpayOn() || c.AlipayOn() {
				t.Fatalf("on: WeChat Pay %v, Alipay %v", c.WechatpayOn(), c.AlipayOn())
			}
			if err := c.Providers(); err != nil {
				t.Fatalf("WeChat Pay alone: %v", err)
			}
			wc, err := c.Wechatpay(nil)
			if len(tc.want) == 0 {
				if err != nil || wc.MchID != "1230000109" || len(wc.APIv3Key) != 32 || wc.MerchantPrivateKey == "" || wc.PublicKey == "" {
					t.Fatalf("%+v, %v", wc, err)
				}
				return
			}
			checkNames(t, err, tc.want...)
		})
	}
}

func TestProvidersAtLeastOne(t *testing.T) {
	c, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.AlipayOn() || c.WechatpayOn() {
		t.Fatal("a provider is on with nothing set")
	}
	checkNames(t, c.Providers(), "ALIPAY_*")
	if c, _ = config.Load([]string{"ALIPAY_APP_ID=2021000000000009"}); !c.AlipayOn() || c.Providers() != nil {
		t.Fatal("Alipay is not on with ALIPAY_APP_ID set")
	}
}

func TestWechatpayJobsInterval(t *testing.T) {
	c, _ := config.Load([]string{"ALIPAY_JOBS_INTERVAL=45s"})
	if got := c.WechatpayJobsInterval(); got != 45*time.Second {
		t.Fatalf("default %v, want ALIPAY_JOBS_INTERVAL's 45s", got)
	}
	c, _ = config.Load([]string{"ALIPAY_JOBS_INTERVAL=45s", "WECHATPAY_JOBS_INTERVAL=10s"})
	if got := c.WechatpayJobsInterval(); got != 10*time.Second {
		t.Fatalf("%v, want 10s", got)
	}
}
