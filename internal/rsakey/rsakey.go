// Package rsakey reads the RSA keys providers hand out, once for every
// provider and fake: PEM blocks as secret stores write them, private keys
// in PKCS#1 or PKCS#8, public keys in PKIX or PKCS#1. Its errors never
// quote a byte of what they were given: keys are secrets, or look like
// them. Each provider wraps them with the forms its own console offers.
package rsakey

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ErrNotKey: the DER is no key of the kind asked for, in any form read here.
var ErrNotKey = errors.New("no key in a form read here")

// Unescape undoes "\n" written as two characters, as env files and secret
// stores often carry it: neither PEM nor base64 ever holds a backslash,
// so it is safe.
func Unescape(s string) string { return strings.ReplaceAll(s, `\n`, "\n") }

// Blocks returns the PEM blocks of s (Unescape'd), in order.
func Blocks(s string) []*pem.Block {
	rest := []byte(strings.TrimSpace(Unescape(s)))
	var blocks []*pem.Block
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return blocks
		}
		blocks = append(blocks, b)
	}
}

// Private reads an RSA private key from DER, PKCS#1 or PKCS#8: ErrNotKey,
// or an error naming the other kind of key the DER holds.
func Private(der []byte) (*rsa.PrivateKey, error) {
	if key, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return key, nil
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, ErrNotKey
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("holds a %T", key)
	}
	return rsaKey, nil
}

// Public reads an RSA public key from DER, PKIX or PKCS#1: ErrNotKey, or
// an error naming the other kind of key the DER holds.
func Public(der []byte) (*rsa.PublicKey, error) {
	if key, err := x509.ParsePKCS1PublicKey(der); err == nil {
		return key, nil
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, ErrNotKey
	}
	rsaKey, ok := key.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("holds a %T", key)
	}
	return rsaKey, nil
}

// Wrap is err (from Private or Public) under the caller's phrase for the
// key it wanted: notKey itself when the DER held no key, notKey with the
// kind it held otherwise.
func Wrap(notKey, err error) error {
	if errors.Is(err, ErrNotKey) {
		return notKey
	}
	return fmt.Errorf("%w: %v", notKey, err)
}
