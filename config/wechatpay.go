package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"paynotify/wechatpay"
)

// WechatpayVars are WeChat Pay's settings (API v3, 直连商户). WeChat Pay is
// on when any of them but WECHATPAY_GATEWAY and WECHATPAY_JOBS_INTERVAL
// is set; Wechatpay then checks the rest.
type WechatpayVars struct {
	MchID          string `env:"WECHATPAY_MCHID"`
	AppID          string `env:"WECHATPAY_APPID"`
	APIv3Key       string `env:"WECHATPAY_APIV3_KEY"`
	APIv3KeyFile   string `env:"WECHATPAY_APIV3_KEY_FILE"`
	MerchantKey    string `env:"WECHATPAY_MERCHANT_KEY_FILE"`
	MerchantSerial string `env:"WECHATPAY_MERCHANT_SERIAL"`
	PublicKeyFile  string `env:"WECHATPAY_PUBLIC_KEY_FILE"`
	PublicKeyID    string `env:"WECHATPAY_PUBLIC_KEY_ID"`
	// PlatformCertFiles is comma-separated PEM files.
	PlatformCertFiles string `env:"WECHATPAY_PLATFORM_CERT_FILES"`
	// Gateway replaces https://api.mch.weixin.qq.com for every call (tests,
	// the fake; WeChat Pay v3 has no sandbox).
	Gateway string `env:"WECHATPAY_GATEWAY"`
	// JobsInterval is how often the query, close and refund jobs ask WeChat
	// Pay; 0 (unset) means ALIPAY_JOBS_INTERVAL's.
	JobsInterval time.Duration `env:"WECHATPAY_JOBS_INTERVAL"`
}

// WechatpayOn reports whether WeChat Pay's variables are set.
func (c Config) WechatpayOn() bool {
	w := c.WechatpayVars
	return w.MchID != "" || w.AppID != "" || w.APIv3Key != "" || w.APIv3KeyFile != "" || w.MerchantKey != "" ||
		w.MerchantSerial != "" || w.PublicKeyFile != "" || w.PublicKeyID != "" || w.PlatformCertFiles != ""
}

// AlipayOn reports whether Alipay's variables are set (any ALIPAY_* that
// names the merchant or a key).
func (c Config) AlipayOn() bool {
	return c.AppID != "" || c.SellerID != "" || c.AlipayPublicKey != "" || c.AlipayPublicKeyFile != "" || c.AppPrivateKey != "" ||
		c.AppPrivateKeyFile != "" || c.AppCertFile != "" || c.AlipayPublicCertFile != "" || c.AlipayRootCertFile != ""
}

// WechatpayJobsInterval is how often the jobs ask WeChat Pay:
// WECHATPAY_JOBS_INTERVAL, else ALIPAY_JOBS_INTERVAL.
func (c Config) WechatpayJobsInterval() time.Duration {
	if c.WechatpayVars.JobsInterval > 0 {
		return c.WechatpayVars.JobsInterval
	}
	return c.AlipayJobsInterval
}

// Providers checks that at least one provider is configured: a merchant
// may take Alipay, WeChat Pay or both, but not neither.
func (c Config) Providers() error {
	if c.AlipayOn() || c.WechatpayOn() {
		return nil
	}
	return &Error{Problems: []string{"no payment provider: set the ALIPAY_* variables, the WECHATPAY_* variables, or both"}}
}

// Wechatpay resolves WeChat Pay's settings (values or files) into the
// adapter's configuration. It names every missing or malformed variable
// in one error; what the keys and certificates are is the adapter's to
// check (wechatpay.New), which refuses devKeys.
func (c Config) Wechatpay(devKeys []string) (wechatpay.Config, error) {
	w := c.WechatpayVars
	var errs []error
	missing := func(name string) { errs = append(errs, fmt.Errorf("%s is required", name)) }
	wc := wechatpay.Config{MchID: w.MchID, AppID: w.AppID, MerchantSerial: w.MerchantSerial, PublicKeyID: w.PublicKeyID,
		Gateway: w.Gateway, Refuse: devKeys}
	switch {
	case w.MchID == "":
		missing("WECHATPAY_MCHID")
	case !allDigits(w.MchID) || len(w.MchID) > 32:
		errs = append(errs, fmt.Errorf("WECHATPAY_MCHID=%q: want the merchant number, 1 to 32 digits", clipped(w.MchID)))
	}
	switch {
	case w.AppID == "":
		missing("WECHATPAY_APPID")
	case !strings.HasPrefix(w.AppID, "wx") || len(w.AppID) > 32 || !alnum(w.AppID):
		errs = append(errs, fmt.Errorf("WECHATPAY_APPID=%q: want an app id (appid) such as wxd678efh567hg6787", clipped(w.AppID)))
	}
	key, err := valueOrFile("WECHATPAY_APIV3_KEY", w.APIv3Key, w.APIv3KeyFile)
	switch {
	case err != nil:
		errs = append(errs, err)
	case key == "":
		missing("WECHATPAY_APIV3_KEY or WECHATPAY_APIV3_KEY_FILE")
	case len(key) != 32:
		errs = append(errs, fmt.Errorf("WECHATPAY_APIV3_KEY: want 32 bytes, have %d", len(key)))
	}
	wc.APIv3Key = key
	if w.MerchantKey == "" {
		missing("WECHATPAY_MERCHANT_KEY_FILE (apiclient_key.pem)")
	} else if b, err := os.ReadFile(w.MerchantKey); err != nil {
		errs = append(errs, fmt.Errorf("WECHATPAY_MERCHANT_KEY_FILE: %w", err))
	} else {
		wc.MerchantPrivateKey = string(b)
	}
	switch {
	case w.MerchantSerial == "":
		missing("WECHATPAY_MERCHANT_SERIAL")
	case len(w.MerchantSerial) > 64 || !hex(w.MerchantSerial):
		errs = append(errs, fmt.Errorf("WECHATPAY_MERCHANT_SERIAL=%q: want the certificate's serial number in hex", clipped(w.MerchantSerial)))
	}
	switch {
	case (w.PublicKeyFile == "") != (w.PublicKeyID == ""):
		errs = append(errs, errors.New("WECHATPAY_PUBLIC_KEY_FILE and WECHATPAY_PUBLIC_KEY_ID go together: set both or neither"))
	case w.PublicKeyFile != "":
		if !strings.HasPrefix(w.PublicKeyID, "PUB_KEY_ID_") {
			errs = append(errs, fmt.Errorf("WECHATPAY_PUBLIC_KEY_ID=%q: want PUB_KEY_ID_…", clipped(w.PublicKeyID)))
		}
		if b, err := os.ReadFile(w.PublicKeyFile); err != nil {
			errs = append(errs, fmt.Errorf("WECHATPAY_PUBLIC_KEY_FILE: %w", err))
		} else {
			wc.PublicKey = string(b)
		}
	}
	for _, f := range strings.Split(w.PlatformCertFiles, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("WECHATPAY_PLATFORM_CERT_FILES: %w", err))
			continue
		}
		wc.PlatformCerts = append(wc.PlatformCerts, string(b))
	}
	if w.PublicKeyFile == "" && strings.TrimSpace(strings.ReplaceAll(w.PlatformCertFiles, ",", "")) == "" {
		missing("WECHATPAY_PUBLIC_KEY_FILE with WECHATPAY_PUBLIC_KEY_ID, or WECHATPAY_PLATFORM_CERT_FILES (or both, while moving to the public key)")
	}
	if w.Gateway != "" {
		if u, err := url.Parse(w.Gateway); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("WECHATPAY_GATEWAY=%q: want an http(s) URL such as https://api.mch.weixin.qq.com", clipped(w.Gateway)))
		}
	}
	if c.WechatpayVars.JobsInterval < 0 {
		errs = append(errs, fmt.Errorf("WECHATPAY_JOBS_INTERVAL=%s: want more than zero", c.WechatpayVars.JobsInterval))
	}
	if len(errs) > 0 {
		return wc, Join(errs...)
	}
	return wc, nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func alnum(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func hex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return s != ""
}

// clipped keeps a shown value short.
func clipped(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
