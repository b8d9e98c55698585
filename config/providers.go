package config

import "time"

// AlipayOn reports whether Alipay's variables are set (any ALIPAY_* that
// names the merchant or a key): Alipay is on, and Config.Alipay must then
// find all it needs.
func (c Config) AlipayOn() bool {
	return c.AppID != "" || c.SellerID != "" || c.AlipayPublicKey != "" || c.AlipayPublicKeyFile != "" || c.AppPrivateKey != "" ||
		c.AppPrivateKeyFile != "" || c.AppCertFile != "" || c.AlipayPublicCertFile != "" || c.AlipayRootCertFile != ""
}

// Providers checks that at least one provider is configured: a merchant
// may take Alipay, WeChat Pay or both, but not neither.
func (c Config) Providers() error {
	if c.AlipayOn() || c.WeChatPay.On() || c.ProvidersFile != "" {
		return nil
	}
	return &Error{Problems: []string{"no payment provider: set PROVIDERS_FILE, or the ALIPAY_* variables, the WECHATPAY_* variables, or both"}}
}

// WeChatPayJobsInterval is how often the jobs ask WeChat Pay:
// WECHATPAY_JOBS_INTERVAL, else ALIPAY_JOBS_INTERVAL.
func (c Config) WeChatPayJobsInterval() time.Duration {
	if c.WeChatPay.JobsInterval > 0 {
		return c.WeChatPay.JobsInterval
	}
	return c.AlipayJobsInterval
}
