package wechatpay_test

import (
	"context"
	"testing"
	"time"
)

// BenchmarkVerifyNotification is one first notice's adapter work: the
// signature by the public key, the decryption and the checks.
func BenchmarkVerifyNotification(b *testing.B) {
	c := newClient(b, clientConfig(b, true, true))
	h, body := build(b, spec{at: time.Now()})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.VerifyNotification(ctx, h, body); err != nil {
			b.Fatal(err)
		}
	}
}
