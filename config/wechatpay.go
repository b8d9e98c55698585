package config

import (
	"time"
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
