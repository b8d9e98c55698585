package config_test

import (
	"testing"
	"time"

	"paynotify/config"
)

// At least one provider must be on; each is on when its variables are set.
func TestProvidersAtLeastOne(t *testing.T) {
	c, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.AlipayOn() || c.WeChatPay.On() {
		t.Fatal("a provider is on with nothing set")
	}
	checkNames(t, c.Providers(), "ALIPAY_*")
	if c, _ = config.Load([]string{"ALIPAY_APP_ID=2021000000000009"}); !c.AlipayOn() || c.Providers() != nil {
		t.Fatal("Alipay is not on with ALIPAY_APP_ID set")
	}
	if c, _ = config.Load([]string{"WECHATPAY_MCHID=1900000001"}); c.AlipayOn() || !c.WeChatPay.On() || c.Providers() != nil {
		t.Fatal("WeChat Pay alone is not a provider")
	}
}

func TestWeChatPayJobsInterval(t *testing.T) {
	c, _ := config.Load([]string{"ALIPAY_JOBS_INTERVAL=45s"})
	if got := c.WeChatPayJobsInterval(); got != 45*time.Second {
		t.Fatalf("default %v, want ALIPAY_JOBS_INTERVAL's 45s", got)
	}
	c, _ = config.Load([]string{"ALIPAY_JOBS_INTERVAL=45s", "WECHATPAY_JOBS_INTERVAL=10s"})
	if got := c.WeChatPayJobsInterval(); got != 10*time.Second {
		t.Fatalf("%v, want 10s", got)
	}
}
