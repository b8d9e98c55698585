package fakealipay

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"strings"

	"paynotify/internal/rsakey"
)

// Key errors are fixed phrases: they never quote what they were given.
var (
	errNotPrivateKey = errors.New("not an RSA private key in PEM (PKCS#1 or PKCS#8)")
	errNotPublicKey  = errors.New("not an RSA public key in PEM (PKIX or PKCS#1)")
)

// firstBlock is the DER of s's first PEM block, or nil.
func firstBlock(s string) []byte {
	if blocks := rsakey.Blocks(s); len(blocks) > 0 {
		return blocks[0].Bytes
	}
	return nil
}

// parsePrivateKey reads an RSA private key in PEM.
func parsePrivateKey(s string) (*rsa.PrivateKey, error) {
	key, err := rsakey.Private(firstBlock(s))
	if err != nil {
		return nil, errNotPrivateKey
	}
	return key, nil
}

// parsePublicKey reads an RSA public key in PEM.
func parsePublicKey(s string) (*rsa.PublicKey, error) {
	key, err := rsakey.Public(firstBlock(s))
	if err != nil {
		return nil, errNotPublicKey
	}
	return key, nil
}

// sign is RSA2 (SHA256withRSA, PKCS#1 v1.5) over data, base64-encoded: how
// Alipay signs the exact bytes of an answer's "..._response" object.
func (s *Server) sign(data []byte) (string, error) {
	digest := sha256.Sum256(data)
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// verifyCall checks a call's RSA2 signature with the calling app's key.
func verifyCall(key *rsa.PublicKey, form url.Values) bool {
	sig, err := base64.StdEncoding.DecodeString(form.Get("sign"))
	if err != nil || len(sig) == 0 {
		return false
	}
	digest := sha256.Sum256([]byte(callContent(form)))
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig) == nil
}

// callContent is what a call's signature covers: every non-empty parameter
// but sign, sorted by key, as raw "k=v" joined by "&". Unlike a
// notification's, it includes sign_type.
func callContent(form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		if k != "sign" && form.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k + "=" + form.Get(k))
	}
	return b.String()
}
