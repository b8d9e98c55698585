package config_test

import (
	"os"
	"strings"
	"testing"

	"paynotify/config"
	"paynotify/wechatpay"
)

func TestWeChatPayClient(t *testing.T) {
	devKeys := []string{}
	for _, f := range []string{"wechatpay_merchant_public_key.pem", "wechatpay_private_key.pem", "wechatpay_platform_cert.pem"} {
		b, err := os.ReadFile("../testdata/dev/" + f)
		if err != nil {
			t.Fatal(err)
		}
		devKeys = append(devKeys, string(b))
	}
	full := []string{"WECHATPAY_MCHID=1900000001", "WECHATPAY_APPID=wxd000000000000001",
		"WECHATPAY_APIV3_KEY=paynotify-dev-apiv3-key-32bytes!",
		"WECHATPAY_MERCHANT_KEY_FILE=../testdata/dev/wechatpay_merchant_private_key.pem",
		"WECHATPAY_MERCHANT_SERIAL=3775B6A45ACD588826D15E583A95F5DD4F2B1E2F",
		"WECHATPAY_PUBLIC_KEY_FILE=../testdata/dev/wechatpay_public_key.pem", "WECHATPAY_PUBLIC_KEY_ID=PUB_KEY_ID_0119000000000001",
		"WECHATPAY_PLATFORM_CERT_FILES=../testdata/dev/wechatpay_platform_cert.pem, ../testdata/dev/wechatpay_platform_cert.pem"}
	for _, tc := range []struct {
		name    string
		environ []string
		refuse  []string
		on      bool
		want    []string // in the error; none: no error
	}{
		{name: "Off", on: false},
		{name: "Full", environ: full, on: true},
		{name: "OneSet", environ: []string{"WECHATPAY_MCHID=1900000001"}, on: true,
			want: []string{"WECHATPAY_APPID is required", "WECHATPAY_APIV3_KEY", "WECHATPAY_MERCHANT_KEY_FILE", "WECHATPAY_MERCHANT_SERIAL", "WECHATPAY_PUBLIC_KEY_FILE"}},
		{name: "MissingFile", environ: append([]string{"WECHATPAY_PUBLIC_KEY_FILE=/no/such.pem"}, full[:5]...), on: true, want: []string{"WECHATPAY_PUBLIC_KEY_FILE: open /no/such.pem"}},
		{name: "KeyAndKeyFile", environ: append([]string{"WECHATPAY_APIV3_KEY_FILE=/etc/hostname"}, full...), on: true, want: []string{"set WECHATPAY_APIV3_KEY or WECHATPAY_APIV3_KEY_FILE, not both"}},
		{name: "DevelopmentKeys", environ: full, refuse: devKeys, on: true,
			want: []string{"WECHATPAY_MERCHANT_KEY_FILE is a development key", "WECHATPAY_PUBLIC_KEY_FILE is a development key", "WECHATPAY_PLATFORM_CERT_FILES (file 1) is a development certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(tc.environ)
			if err != nil {
				t.Fatal(err)
			}
			_, on, err := wechatpay.FromConfig(cfg, tc.refuse)
			if on != tc.on {
				t.Fatalf("on %v, want %v", on, tc.on)
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "paynotify-dev-apiv3") {
				t.Errorf("the error quotes the APIv3 key: %v", err)
			}
		})
	}
}
