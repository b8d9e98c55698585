package alipay

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
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
//
// It checks the signature itself, with the key prepared at start (see
// sha256rsa.Verifier), rather than through smartwalle's VerifySign: every
// notification pays for it, and smartwalle copies the form into "k=v"
// strings, sorts those and takes its client's lock to find the key — a
// third of the CPU of a duplicate's verification. The rule is
// signContent's, Alipay's own: keys (not "k=v" strings) in byte order.
func (c *Client) VerifyNotification(ctx context.Context, form url.Values) error {
	for k, vs := range form {
		// The signature would cover every value while readers (Get) take
		// the first: a second value could ride along unsigned.
		if len(vs) > 1 {
			return fmt.Errorf("%w: repeated parameter %q", model.ErrBadSignature, model.Clip(k))
		}
	}
	sign := form.Get(fieldSign)
	if sign == "" {
		return fmt.Errorf("%w: no sign", model.ErrBadSignature)
	}
	if st := form.Get(fieldSignType); st != signTypeRSA2 {
		return fmt.Errorf("%w: sign_type %q, want RSA2", model.ErrBadSignature, model.Clip(st))
	}
	sig, err := base64.StdEncoding.DecodeString(sign)
	if err != nil {
		return fmt.Errorf("%w: sign is not base64", model.ErrBadSignature)
	}
	if err := c.verifySigned(form, sig, false); err != nil {
		// Alipay's Java SDK counts whitespace-only values as empty too.
		// Either content is Alipay's to sign, so either verifying is proof.
		if !hasBlank(form) || c.verifySigned(form, sig, true) != nil {
			return fmt.Errorf("%w: RSA2 signature does not verify (%v)", model.ErrBadSignature, err)
		}
	}
	if got := form.Get(fieldAppID); got != c.appID {
		return fmt.Errorf("%w: app_id %q (seller_id %q) is not ours", model.ErrUnknownApp, model.Clip(got), model.Clip(form.Get(fieldSellerID)))
	}
	if got := form.Get(fieldSellerID); got != c.sellerID {
		// Routing is by app_id and seller_id together: our app under
		// another seller is an app we have not configured.
		return fmt.Errorf("%w: app_id %q under seller_id %q is not ours (the app is %q's)", model.ErrUnknownApp, model.Clip(form.Get(fieldAppID)), model.Clip(got), c.sellerID)
	}
	return nil
}

// verifySigned checks sig, RSA2 (SHA256withRSA, PKCS#1 v1.5), over form's
// signed content by Alipay's rule, with Alipay's key.
//
// alipay_cert_sn is left out of the content, as smartwalle leaves it out.
// In certificate mode a form naming it is checked with that certificate
// only (an SN of none configured is refused); a form naming none, or any
// form in public-key mode, with each key configured, the current first:
// while Alipay renews its certificate both verify.
//
// With dropBlank, whitespace-only values go too, as Alipay's Java SDK
// (StringUtils.isEmpty) leaves them out.
func (c *Client) verifySigned(form url.Values, sig []byte, dropBlank bool) error {
	var buf [2048]byte // a notification's content is about 1 KB
	content := appendContent(buf[:0], form, func(k, v string) bool {
		return k == fieldCertSN || dropBlank && strings.TrimSpace(v) == ""
	})
	digest := sha256.Sum256(content)
	if sn := form.Get(fieldCertSN); sn != "" && len(c.bySN) > 0 {
		v, ok := c.bySN[sn]
		if !ok {
			return fmt.Errorf("alipay_cert_sn %q is none of the Alipay certificates configured", model.Clip(sn))
		}
		return v.Verify(&digest, sig)
	}
	var err error
	for _, v := range c.alipayKeys {
		if err = v.Verify(&digest, sig); err == nil {
			return nil
		}
	}
	return err
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
