package model

import (
	"errors"
	"fmt"
	"testing"
)

// TagProvider tags a gateway error once, with the provider that answered
// it, and leaves every other error (and nil) as it is; the text stays the
// wrapping site's.
func TestTagProvider(t *testing.T) {
	refused := fmt.Errorf("%w: wechatpay refund R1 is CLOSED", ErrGatewayRefused)
	err := TagProvider(ProviderWechatpay, refused)
	if ProviderOf(err) != ProviderWechatpay || !errors.Is(err, ErrGatewayRefused) || err.Error() != refused.Error() {
		t.Fatalf("tagged: %v (%q)", ProviderOf(err), err)
	}
	if again := TagProvider(ProviderAlipay, fmt.Errorf("close refused, query failed: %w", err)); ProviderOf(again) != ProviderWechatpay {
		t.Fatalf("tagged twice: %v", ProviderOf(again))
	}
	other := fmt.Errorf("%w: amount", ErrInvalidRequest)
	if got := TagProvider(ProviderWechatpay, other); got != other || ProviderOf(got) != "" {
		t.Fatalf("not a gateway error, tagged: %#v", got)
	}
	if TagProvider(ProviderWechatpay, nil) != nil {
		t.Fatal("nil tagged")
	}
}
