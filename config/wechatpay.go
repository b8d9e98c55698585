package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"paynotify/wechatpay"
)

// WeChatPay is the WeChat Pay settings (直连商户). WeChat Pay is on when
// any of them is set; then every one it needs must be.
type WeChatPay struct {
	MchID        string `env:"WECHATPAY_MCHID"`
	AppID        string `env:"WECHATPAY_APPID"`
	APIv3Key     string `env:"WECHATPAY_APIV3_KEY"`
	APIv3KeyFile string `env:"WECHATPAY_APIV3_KEY_FILE"`
	// MerchantKeyFile is apiclient_key.pem; MerchantSerial its
	// certificate's serial.
	MerchantKeyFile string `env:"WECHATPAY_MERCHANT_KEY_FILE"`
	MerchantSerial  string `env:"WECHATPAY_MERCHANT_SERIAL"`
	// PublicKeyFile and PublicKeyID are the WeChat Pay public key;
	// PlatformCertFiles (comma-separated PEM files) the platform
	// certificates. Either, or both while moving to the public key.
	PublicKeyFile     string `env:"WECHATPAY_PUBLIC_KEY_FILE"`
	PublicKeyID       string `env:"WECHATPAY_PUBLIC_KEY_ID"`
	PlatformCertFiles string `env:"WECHATPAY_PLATFORM_CERT_FILES"`
	// Gateway replaces https://api.mch.weixin.qq.com (a fake in tests).
	Gateway string `env:"WECHATPAY_GATEWAY"`
	// JobsInterval is how often the query, close and refund jobs ask
	// WeChat Pay; 0 means ALIPAY_JOBS_INTERVAL's.
	JobsInterval time.Duration `env:"WECHATPAY_JOBS_INTERVAL"`
}

// On reports whether any WeChat Pay setting is set.
func (w WeChatPay) On() bool {
	return w != (WeChatPay{})
}

// WeChatPayClient resolves the WeChat Pay settings (values or files) into
// a client configuration. It names every missing or malformed variable in
// one error (wechatpay.New names the rest), and refuses any key in
// devKeys. ok is false, with no error, when WeChat Pay is off.
func (c Config) WeChatPayClient(devKeys []string) (cfg wechatpay.Config, ok bool, err error) {
	w := c.WeChatPay
	if !w.On() {
		return wechatpay.Config{}, false, nil
	}
	var errs []error
	cfg = wechatpay.Config{MchID: w.MchID, AppID: w.AppID, MerchantSerial: w.MerchantSerial,
		PublicKeyID: w.PublicKeyID, Gateway: w.Gateway, Refuse: devKeys}
	if cfg.APIv3Key, err = valueOrFile("WECHATPAY_APIV3_KEY", w.APIv3Key, w.APIv3KeyFile); err != nil {
		errs = append(errs, err)
	}
	read := func(name, path string) string {
		if path == "" {
			return ""
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return ""
		}
		return string(b)
	}
	cfg.MerchantPrivateKey = read("WECHATPAY_MERCHANT_KEY_FILE", w.MerchantKeyFile)
	cfg.PublicKey = read("WECHATPAY_PUBLIC_KEY_FILE", w.PublicKeyFile)
	for _, f := range strings.Split(w.PlatformCertFiles, ",") {
		if f = strings.TrimSpace(f); f != "" {
			if pem := read("WECHATPAY_PLATFORM_CERT_FILES", f); pem != "" {
				cfg.PlatformCerts = append(cfg.PlatformCerts, pem)
			}
		}
	}
	if len(errs) == 0 {
		// wechatpay.New checks every value and names what is wrong.
		if _, err := wechatpay.New(cfg); err != nil {
			if joined, ok := err.(interface{ Unwrap() []error }); ok {
				errs = append(errs, joined.Unwrap()...)
			} else {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return cfg, true, Join(errs...)
	}
	return cfg, true, nil
}
