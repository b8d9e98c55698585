package wechatpay

import (
	"context"
	"net/http"
	"strings"
)

// VerifySigned is c's check of a notification's Wechatpay-* headers.
func VerifySigned(c *Client, h http.Header, body []byte) error { return c.verifySigned(h, body) }

// SDKVerify is the SDK's verifier's answer (the one c hands the SDK) for
// the same headers and body.
func SDKVerify(c *Client, h http.Header, body []byte) error {
	msg := strings.TrimSpace(h.Get(HeaderTimestamp)) + "\n" + strings.TrimSpace(h.Get(HeaderNonce)) + "\n" + string(body) + "\n"
	return c.verifier.Verify(context.Background(), strings.TrimSpace(h.Get(HeaderSerial)), msg, strings.TrimSpace(h.Get(HeaderSignature)))
}
