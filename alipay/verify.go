package alipay

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"paynotify/model"
)

// Form fields the verification rule treats specially.
const (
	fieldSign     = "sign"
	fieldSignType = "sign_type"
	fieldCertSN   = "alipay_cert_sn"
	fieldAppID    = "app_id"
	fieldSellerID = "seller_id"
	signTypeRSA2  = "RSA2"
)

// VerifyNotification checks that form is a notification Alipay signed with
// RSA2 for this app and seller. Errors wrap model.ErrBadSignature or
// model.ErrWrongMerchant. It never goes to the network.
func (c *Client) VerifyNotification(ctx context.Context, form url.Values) error {
	for k, vs := range form {
		// The signature would cover every value while readers (Get) take
		// the first: a second value could ride along unsigned.
		if len(vs) > 1 {
			return fmt.Errorf("%w: repeated parameter %q", model.ErrBadSignature, clip(k))
		}
	}
	if form.Get(fieldSign) == "" {
		return fmt.Errorf("%w: no sign", model.ErrBadSignature)
	}
	if st := form.Get(fieldSignType); st != signTypeRSA2 {
		return fmt.Errorf("%w: sign_type %q, want RSA2", model.ErrBadSignature, clip(st))
	}
	if err := c.sdk.VerifySign(ctx, signedPart(form, false)); err != nil {
		// Alipay's Java SDK counts whitespace-only values as empty too.
		// Either content is Alipay's to sign, so either verifying is proof.
		if !hasBlank(form) || c.sdk.VerifySign(ctx, signedPart(form, true)) != nil {
			return fmt.Errorf("%w: RSA2 signature does not verify (%v)", model.ErrBadSignature, err)
		}
	}
	if got := form.Get(fieldAppID); got != c.appID {
		return fmt.Errorf("%w: app_id %q is not ours", model.ErrWrongMerchant, clip(got))
	}
	if got := form.Get(fieldSellerID); got != c.sellerID {
		return fmt.Errorf("%w: seller_id %q is not ours", model.ErrWrongMerchant, clip(got))
	}
	return nil
}

// signedPart is the copy of form that smartwalle's VerifySign must see for
// it to check Alipay's rule rather than its own.
//
// Alipay's SDKs leave empty values (and empty keys) out of the signed
// content, while smartwalle signs "k=" for them: a notification with an
// empty refund_fee or body would otherwise never verify.
//
// alipay_cert_sn goes too. Given an SN it has no key for, smartwalle in
// production mode downloads a certificate while holding the client's one
// lock, so a forged SN per request would stall every verification.
// Notifications carry no SN; the key loaded at start is the one to use.
//
// With dropBlank, whitespace-only values go too, as Alipay's Java SDK
// (StringUtils.isEmpty) leaves them out.
//
// One difference remains: smartwalle sorts "k=v" strings where Alipay sorts
// keys. They disagree only when a key is a prefix of another followed by a
// byte below '=' (a digit, '-', '.'), which no Alipay field name has.
func signedPart(form url.Values, dropBlank bool) url.Values {
	part := make(url.Values, len(form))
	for k, vs := range form {
		if k == "" || k == fieldCertSN || len(vs) == 0 || vs[0] == "" || (dropBlank && strings.TrimSpace(vs[0]) == "") {
			continue
		}
		part[k] = vs
	}
	return part
}

// hasBlank reports whether some value is whitespace only (but not empty).
func hasBlank(form url.Values) bool {
	for _, vs := range form {
		if len(vs) > 0 && vs[0] != "" && strings.TrimSpace(vs[0]) == "" {
			return true
		}
	}
	return false
}

// clip keeps what a client sent short enough for an error message.
func clip(s string) string {
	const limit = 64
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
