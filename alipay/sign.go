package alipay

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"paynotify/model"
	"slices"
)

// SignForm returns a copy of form with sign_type=RSA2 and sign set, signed
// with privateKey (PEM or base64, PKCS#1 or PKCS#8) by Alipay's rule, as
// Alipay signs a notification. Empty values stay in the copy, unsigned, as
// Alipay sends them. It is for QA, tests and a fake Alipay.
func SignForm(privateKey string, form url.Values) (url.Values, error) {
	key, err := parsePrivateKey(privateKey)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	signed := make(url.Values, len(form)+2)
	for k, vs := range form {
		// Alipay's rule signs a map; a repeated key has no one meaning.
		if len(vs) > 1 {
			return nil, fmt.Errorf("repeated parameter %q", model.Clip(k))
		}
		signed[k] = slices.Clone(vs)
	}
	signed.Set(fieldSignType, signTypeRSA2)
	digest := sha256.Sum256([]byte(signContent(signed)))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	signed.Set(fieldSign, base64.StdEncoding.EncodeToString(sig))
	return signed, nil
}

// signContent is the string Alipay signs: keys in ascending byte order,
// without sign, sign_type and empty keys or values, as raw (not
// URL-escaped) "k=v" joined by "&".
func signContent(form url.Values) string {
	return string(appendContent(nil, form, nil))
}

// appendContent appends signContent(form) to dst, leaving out as well the
// keys whose value omit (if not nil) reports. Verifying a notification
// runs it on every request, so it allocates nothing beyond dst's growth.
func appendContent(dst []byte, form url.Values, omit func(k, v string) bool) []byte {
	var kept [40]string // a notification has about 25 fields
	keys := kept[:0]
	for k, vs := range form {
		if k == "" || k == fieldSign || k == fieldSignType || len(vs) == 0 || vs[0] == "" ||
			omit != nil && omit(k, vs[0]) {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = append(dst, k...)
		dst = append(dst, '=')
		dst = append(dst, form[k][0]...)
	}
	return dst
}

// PublicKeyOf returns the public half of privateKey as PKIX PEM, the form
// the Alipay console and Config.AlipayPublicKey use.
func PublicKeyOf(privateKey string) (string, error) {
	key, err := parsePrivateKey(privateKey)
	if err != nil {
		return "", fmt.Errorf("private key: %w", err)
	}
	return pemPKIX(&key.PublicKey)
}
