package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paynotify/config"
)

// writeFile writes a PROVIDERS_FILE and returns its path.
func writeFile(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodFile = `
alipay:
  - seller_id: "2088000000000001"
    apps:
      - app_id: "2021000000000001"
        name: web
        private_key_file: /run/secrets/a.pem
        alipay_public_key_file: /run/secrets/b.pem
wechatpay:
  - mchid: "1900012345"
    apiv3_key_files: [/run/secrets/new, /run/secrets/old]
    merchant_key_file: /run/secrets/k.pem
    merchant_serial: "ABC"
    merchant_cert_file: /run/secrets/apiclient_cert.pem
    public_key_file: /run/secrets/p.pem
    public_key_id: PUB_KEY_ID_1
    apps:
      - { appid: wx1111111111111111, name: miniprogram }
      - { appid: wx2222222222222222, name: official }
      - { appid: wx3333333333333333, name: app }
`

func TestProvidersFile(t *testing.T) {
	p := writeFile(t, goodFile)
	c, err := config.Load([]string{"PROVIDERS_FILE=" + p})
	if err != nil {
		t.Fatal(err)
	}
	if c.Accounts == nil || len(c.Accounts.WeChatPay[0].Apps) != 3 || c.Accounts.Alipay[0].SellerID != "2088000000000001" {
		t.Fatalf("accounts = %+v", c.Accounts)
	}
	if w, ok := c.Accounts.WeChatPayEnv(); !ok || w.AppID != "wx1111111111111111" || w.APIv3KeyFile != "/run/secrets/new" {
		t.Errorf("WeChatPayEnv = %+v, %v", w, ok)
	}
	if got := c.Accounts.WeChatPay[0].MerchantCertFile; got != "/run/secrets/apiclient_cert.pem" {
		t.Errorf("merchant_cert_file = %q", got)
	}
	if c.Providers() != nil {
		t.Error("a file with accounts is a provider configured")
	}
}

// Several Alipay sellers, several apps each, and apps' methods are taken.
func TestProvidersFileSellersAndApps(t *testing.T) {
	p := writeFile(t, `
alipay:
  - seller_id: "2088000000000001"
    apps:
      - {app_id: "2021000000000001", name: web, private_key_file: a, alipay_public_key_file: b}
      - {app_id: "2021000000000002", name: mobile, private_key_file: c, alipay_public_key_file: d, methods: [wap]}
  - seller_id: "2088000000000002"
    apps:
      - {app_id: "2021000000000003", name: group, private_key_file: e, alipay_public_key_file: f}
wechatpay:
  - mchid: "1900012345"
    apiv3_key_files: [k]
    merchant_key_file: k
    merchant_serial: s
    platform_cert_files: [c]
    apps: [{appid: wx1, name: miniprogram, methods: [jsapi]}, {appid: wx2}]
`)
	c, err := config.Load([]string{"PROVIDERS_FILE=" + p})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Accounts.AlipayAppEnv(1, 0); got.SellerID != "2088000000000002" || got.AppID != "2021000000000003" || got.AppPrivateKeyFile != "e" || got.AlipayPublicKeyFile != "f" {
		t.Errorf("AlipayAppEnv(1, 0) = %+v", got)
	}
}

// Every problem names the file, the account and the field.
func TestProvidersFileProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       []string
	}{
		{"AccountVariableBeside", goodFile, []string{"ALIPAY_APP_ID=2021000000000009", "WECHATPAY_GATEWAY=http://x"},
			[]string{"ALIPAY_APP_ID is set beside PROVIDERS_FILE", "WECHATPAY_GATEWAY is set beside PROVIDERS_FILE"}},
		{"UnknownField", "alipay:\n  - seller_id: \"2088000000000001\"\n    sellr: x\n", nil, []string{"providers.yaml", "sellr"}},
		{"NoSeller", "alipay:\n  - apps: [{app_id: \"1\", private_key_file: a, alipay_public_key_file: b}]\n", nil,
			[]string{"alipay[0]: seller_id is required"}},
		{"MissingKeys", "wechatpay:\n  - mchid: \"1900000001\"\n    apps: [{appid: wx1}]\n", nil,
			[]string{`wechatpay[0] (mchid "1900000001"): merchant_key_file is required`, "merchant_serial is required", "apiv3_key_files is required", "public_key_file (with public_key_id) or platform_cert_files"}},
		{"AppUnderTwoSellers", `
alipay:
  - seller_id: "2088000000000001"
    apps: [{app_id: "2021", private_key_file: a, alipay_public_key_file: b}]
  - seller_id: "2088000000000002"
    apps: [{app_id: "2021", private_key_file: a, alipay_public_key_file: b}]
`, nil, []string{`alipay[1] (seller_id "2088000000000002") apps[0] (app_id "2021"): app_id: also under seller_id "2088000000000001"`}},
		{"TwoAppsOneName", `
wechatpay:
  - mchid: "1900000001"
    apiv3_key_files: [k]
    merchant_key_file: k
    merchant_serial: s
    platform_cert_files: [c]
    apps: [{appid: wx1, name: shop}, {appid: wx2, name: shop}, {appid: wx1}]
`, nil, []string{`apps[1] (appid "wx2"): name "shop": also the name of 1900000001/wx1`, `apps[2] (appid "wx1"): appid: listed twice`}},
		{"BadMethod", `
wechatpay:
  - mchid: "1900000001"
    apiv3_key_files: [k]
    merchant_key_file: k
    merchant_serial: s
    platform_cert_files: [c]
    apps: [{appid: wx1, methods: [page]}]
`, nil, []string{`methods: "page" is not one of native, h5, jsapi, app`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.yaml)
			_, err := config.Load(append([]string{"PROVIDERS_FILE=" + p}, tc.env...))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
