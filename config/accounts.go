package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Accounts is PROVIDERS_FILE: every provider account (an Alipay seller, a
// WeChat Pay merchant) and its apps. Secrets are named by file path, never
// written in it. docs/configuration.md has its reference.
type Accounts struct {
	Alipay    []AlipayAccount    `yaml:"alipay"`
	WeChatPay []WeChatPayAccount `yaml:"wechatpay"`
	// File is the path it was read from, named in every problem.
	File string `yaml:"-"`
}

// AlipayAccount is one Alipay seller (2088…) and its apps.
type AlipayAccount struct {
	SellerID   string `yaml:"seller_id"`
	Production bool   `yaml:"production"`
	// Gateway points the sandbox client elsewhere (a fake Alipay), as
	// ALIPAY_SANDBOX_GATEWAY; refused with production.
	Gateway string      `yaml:"gateway"`
	Apps    []AlipayApp `yaml:"apps"`
}

// AlipayApp is one Alipay app_id with its own key pair: Alipay's public
// key, or in certificate mode the app's certificate, Alipay's and the root.
type AlipayApp struct {
	AppID                 string   `yaml:"app_id"`
	Name                  string   `yaml:"name"`
	PrivateKeyFile        string   `yaml:"private_key_file"`
	AlipayPublicKeyFile   string   `yaml:"alipay_public_key_file"`
	AppCertFile           string   `yaml:"app_cert_file"`
	AlipayPublicCertFiles []string `yaml:"alipay_public_cert_files"`
	AlipayRootCertFile    string   `yaml:"alipay_root_cert_file"`
	// Methods limits what the app takes (page, wap, qr); empty, every
	// method Alipay has.
	Methods []string `yaml:"methods"`
}

// WeChatPayAccount is one WeChat Pay merchant (mchid): its keys, which
// every app of it shares, and its appids.
type WeChatPayAccount struct {
	MchID string `yaml:"mchid"`
	// APIv3KeyFiles: any of them decrypts a notification; the first is
	// the current one.
	APIv3KeyFiles   []string `yaml:"apiv3_key_files"`
	MerchantKeyFile string   `yaml:"merchant_key_file"`
	MerchantSerial  string   `yaml:"merchant_serial"`
	// MerchantCertFile (apiclient_cert.pem) is optional: where given,
	// wechatpay checks its serial against MerchantSerial and its key
	// against MerchantKeyFile's.
	MerchantCertFile  string         `yaml:"merchant_cert_file"`
	PublicKeyFile     string         `yaml:"public_key_file"`
	PublicKeyID       string         `yaml:"public_key_id"`
	PlatformCertFiles []string       `yaml:"platform_cert_files"`
	Gateway           string         `yaml:"gateway"`
	Apps              []WeChatPayApp `yaml:"apps"`
}

// WeChatPayApp is one appid (a mini program, an official account, a
// mobile app, a web shop) of a merchant.
type WeChatPayApp struct {
	AppID string `yaml:"appid"`
	Name  string `yaml:"name"`
	// Methods limits what the app takes (native, h5, jsapi, app); empty,
	// every method WeChat Pay has.
	Methods []string `yaml:"methods"`
}

// accountVars are the environment variables that configure an account
// (its ids, keys, gateway, production): PROVIDERS_FILE configures those,
// so one set beside it is an error. Service-wide settings
// (ALIPAY_JOBS_INTERVAL, WECHATPAY_JOBS_INTERVAL, RECON_AT, …) are not here.
var accountVars = []string{
	"ALIPAY_APP_ID", "ALIPAY_SELLER_ID", "ALIPAY_PUBLIC_KEY", "ALIPAY_PUBLIC_KEY_FILE", "ALIPAY_APP_PRIVATE_KEY",
	"ALIPAY_APP_PRIVATE_KEY_FILE", "ALIPAY_APP_CERT_FILE", "ALIPAY_PUBLIC_CERT_FILE", "ALIPAY_ROOT_CERT_FILE",
	"ALIPAY_PRODUCTION", "ALIPAY_SANDBOX_GATEWAY",
	"WECHATPAY_MCHID", "WECHATPAY_APPID", "WECHATPAY_APIV3_KEY", "WECHATPAY_APIV3_KEY_FILE", "WECHATPAY_MERCHANT_KEY_FILE",
	"WECHATPAY_MERCHANT_SERIAL", "WECHATPAY_PUBLIC_KEY_FILE", "WECHATPAY_PUBLIC_KEY_ID", "WECHATPAY_PLATFORM_CERT_FILES",
	"WECHATPAY_GATEWAY",
}

// fileConflicts names each account variable set beside PROVIDERS_FILE.
func fileConflicts(vars map[string]string) []string {
	var problems []string
	for _, name := range accountVars {
		if _, set := vars[name]; set {
			problems = append(problems, fmt.Sprintf("%s is set beside PROVIDERS_FILE: the file configures every account (move it there, or unset PROVIDERS_FILE)", name))
		}
	}
	return problems
}

// ReadAccounts reads and checks PROVIDERS_FILE's shape: every account and
// app has its ids, no two apps share an id or a name within a provider,
// no Alipay app_id is under two sellers. The keys it names are read and
// checked by each provider's adapter (alipay.FromAccounts,
// wechatpay.FromAccounts). Each problem names the file, the account and
// the field.
func ReadAccounts(path string) (Accounts, error) {
	a := Accounts{File: path}
	b, err := os.ReadFile(path)
	if err != nil {
		return a, &Error{Problems: []string{fmt.Sprintf("PROVIDERS_FILE: %v", err)}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true) // a misspelt field is refused, never ignored
	if err := dec.Decode(&a); err != nil && !errors.Is(err, io.EOF) {
		return a, &Error{Problems: []string{fmt.Sprintf("%s: %v", path, err)}}
	}
	a.File = path
	if problems := a.check(); len(problems) > 0 {
		return a, &Error{Problems: problems}
	}
	return a, nil
}

// check names every problem of the file's shape.
func (a Accounts) check() []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, a.File+": "+fmt.Sprintf(format, args...))
	}
	if len(a.Alipay) == 0 && len(a.WeChatPay) == 0 {
		add("no account: list alipay sellers, wechatpay merchants, or both")
	}
	ids, names, sellers := map[string]string{}, map[string]string{}, map[string]bool{}
	for i, acc := range a.Alipay {
		where := fmt.Sprintf("alipay[%d] (seller_id %q)", i, acc.SellerID)
		switch {
		case acc.SellerID == "":
			add("alipay[%d]: seller_id is required", i)
		case !strings.HasPrefix(acc.SellerID, "2088"):
			add("%s: seller_id: an Alipay seller id starts with 2088", where)
		case sellers[acc.SellerID]:
			add("%s: seller_id: listed twice", where)
		}
		sellers[acc.SellerID] = true
		if acc.Production && acc.Gateway != "" {
			add("%s: gateway: a fake's gateway is for the sandbox, not with production: true", where)
		}
		if len(acc.Apps) == 0 {
			add("%s: apps: at least one app is required", where)
		}
		for j, app := range acc.Apps {
			at := fmt.Sprintf("%s apps[%d] (app_id %q)", where, j, app.AppID)
			if app.AppID == "" {
				add("%s apps[%d]: app_id is required", where, j)
			} else if other, dup := ids[app.AppID]; dup {
				add("%s: app_id: also under %s (an Alipay app belongs to one seller)", at, other)
			} else {
				ids[app.AppID] = fmt.Sprintf("seller_id %q", acc.SellerID)
			}
			if app.Name != "" {
				if other, dup := names[app.Name]; dup {
					add("%s: name %q: also the name of app_id %q", at, app.Name, other)
				} else {
					names[app.Name] = app.AppID
				}
			}
			if app.PrivateKeyFile == "" {
				add("%s: private_key_file is required", at)
			}
			certMode := app.AppCertFile != "" || len(app.AlipayPublicCertFiles) > 0 || app.AlipayRootCertFile != ""
			// alipay_public_key_file beside the certificates verifies too,
			// while the app moves to certificate mode.
			switch {
			case certMode && (app.AppCertFile == "" || len(app.AlipayPublicCertFiles) == 0 || app.AlipayRootCertFile == ""):
				add("%s: certificate mode needs app_cert_file, alipay_public_cert_files and alipay_root_cert_file", at)
			case !certMode && app.AlipayPublicKeyFile == "":
				add("%s: alipay_public_key_file (or the certificates) is required", at)
			}
			problems = append(problems, a.methods(at, app.Methods, "page", "wap", "qr")...)
		}
	}
	names = map[string]string{}
	merchants := map[string]bool{}
	for i, acc := range a.WeChatPay {
		where := fmt.Sprintf("wechatpay[%d] (mchid %q)", i, acc.MchID)
		switch {
		case acc.MchID == "":
			add("wechatpay[%d]: mchid is required", i)
		case merchants[acc.MchID]:
			add("%s: mchid: listed twice", where)
		}
		merchants[acc.MchID] = true
		for field, v := range map[string]string{"merchant_key_file": acc.MerchantKeyFile, "merchant_serial": acc.MerchantSerial} {
			if v == "" {
				add("%s: %s is required", where, field)
			}
		}
		if len(acc.APIv3KeyFiles) == 0 {
			add("%s: apiv3_key_files is required (one file, or the new key's then the old one's while it is reset)", where)
		}
		if acc.PublicKeyFile == "" && len(acc.PlatformCertFiles) == 0 {
			add("%s: public_key_file (with public_key_id) or platform_cert_files is required", where)
		}
		if (acc.PublicKeyFile == "") != (acc.PublicKeyID == "") {
			add("%s: public_key_file and public_key_id go together", where)
		}
		if len(acc.Apps) == 0 {
			add("%s: apps: at least one appid is required", where)
		}
		// An appid may be bound to several merchants (routing is by mchid
		// and appid together), but not twice to one; a name is one app's.
		seen := map[string]bool{}
		for j, app := range acc.Apps {
			at := fmt.Sprintf("%s apps[%d] (appid %q)", where, j, app.AppID)
			switch {
			case app.AppID == "":
				add("%s apps[%d]: appid is required", where, j)
			case seen[app.AppID]:
				add("%s: appid: listed twice under this merchant", at)
			}
			seen[app.AppID] = true
			if app.Name != "" {
				key := app.Name
				if other, dup := names[key]; dup && other != acc.MchID+"/"+app.AppID {
					add("%s: name %q: also the name of %s", at, app.Name, other)
				} else {
					names[key] = acc.MchID + "/" + app.AppID
				}
			}
			problems = append(problems, a.methods(at, app.Methods, "native", "h5", "jsapi", "app")...)
		}
	}
	return problems
}

// methods names each method of an app that its provider has not.
func (a Accounts) methods(at string, methods []string, known ...string) []string {
	var problems []string
	for _, m := range methods {
		ok := false
		for _, k := range known {
			ok = ok || m == k
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s: methods: %q is not one of %s", a.File, at, m, strings.Join(known, ", ")))
		}
	}
	return problems
}

// Where names an account of the file in a problem: "file: alipay[0]
// (seller_id "2088…")".
func (a Accounts) Where(provider string, i int, idName, id string) string {
	return fmt.Sprintf("%s: %s[%d] (%s %q)", a.File, provider, i, idName, id)
}

// AlipayEnv is the environment form of the file's first Alipay account
// and app, for the checks and the client the ALIPAY_* variables feed: its
// key files named as the variables would name them. ok is false when the
// file lists no Alipay account.
func (a Accounts) AlipayEnv() (c Config, ok bool) {
	if len(a.Alipay) == 0 || len(a.Alipay[0].Apps) == 0 {
		return c, false
	}
	return a.AlipayAppEnv(0, 0), true
}

// AlipayAppEnv is the environment form of seller i's app j, as AlipayEnv
// is of the first: what the ALIPAY_* variables would say of that app.
func (a Accounts) AlipayAppEnv(i, j int) (c Config) {
	acc, app := a.Alipay[i], a.Alipay[i].Apps[j]
	c.SellerID, c.Production, c.AlipaySandboxGateway = acc.SellerID, acc.Production, acc.Gateway
	c.AppID, c.AppPrivateKeyFile, c.AlipayPublicKeyFile = app.AppID, app.PrivateKeyFile, app.AlipayPublicKeyFile
	c.AppCertFile, c.AlipayRootCertFile = app.AppCertFile, app.AlipayRootCertFile
	c.AlipayPublicCertFile = strings.Join(app.AlipayPublicCertFiles, ",")
	return c
}

// WeChatPayEnv is the environment form of the file's first WeChat Pay
// merchant (its first appid and first APIv3 key), for the checks and the
// client the WECHATPAY_* variables feed. ok is false when the file lists
// no merchant.
func (a Accounts) WeChatPayEnv() (w WeChatPay, ok bool) { return a.WeChatPayEnvAt(0) }

// WeChatPayEnvAt is WeChatPayEnv of the file's merchant i.
func (a Accounts) WeChatPayEnvAt(i int) (w WeChatPay, ok bool) {
	if len(a.WeChatPay) <= i || len(a.WeChatPay[i].Apps) == 0 {
		return w, false
	}
	acc := a.WeChatPay[i]
	w = WeChatPay{MchID: acc.MchID, AppID: acc.Apps[0].AppID, MerchantKeyFile: acc.MerchantKeyFile,
		MerchantSerial: acc.MerchantSerial, PublicKeyFile: acc.PublicKeyFile, PublicKeyID: acc.PublicKeyID,
		PlatformCertFiles: strings.Join(acc.PlatformCertFiles, ","), Gateway: acc.Gateway}
	if len(acc.APIv3KeyFiles) > 0 {
		w.APIv3KeyFile = acc.APIv3KeyFiles[0]
	}
	return w, true
}
