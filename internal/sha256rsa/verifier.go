// Package sha256rsa verifies SHA256withRSA (RSASSA-PKCS1-v1_5 with
// SHA-256) signatures with a public key prepared once: Alipay's RSA2 and
// WeChat Pay's WECHATPAY2-SHA256-RSA2048 are both this scheme, and every
// notification of either pays for one verification.
package sha256rsa

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"

	"filippo.io/bigmod"
)

// Verifier checks SHA256withRSA (PKCS #1 v1.5) signatures with one public
// key. It is safe for concurrent use. It does what crypto/rsa.VerifyPKCS1v15 does, step
// for step (RFC 8017 §8.2.2), but prepares the key's modulus once, at
// start: crypto/rsa prepares it again on every call (bigmod.NewModulus, a
// third of its cost), and every notification pays for a verification. The
// arithmetic is filippo.io/bigmod, the standard library's own
// crypto/internal/fips140/bigmod exported by its author.
// TestVerifierMatchesCryptoRSA and FuzzVerifier hold it to crypto/rsa.
type Verifier struct {
	n *bigmod.Modulus
	e uint
	// padding is what every encoded message holds before the digest
	// (encodeSHA256's bytes but the last sha256.Size), made once.
	padding []byte
}

// sha256DigestInfo is the DER prefix of SHA-256's DigestInfo (RFC 8017
// §9.2, note 1).
var sha256DigestInfo = []byte{0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20}

// New prepares pub, which must be a key crypto/rsa verifies with and of
// 2048 bits or more, as Alipay's RSA2 and WeChat Pay's RSA2048 keys are.
func New(pub *rsa.PublicKey) (*Verifier, error) {
	switch {
	case pub == nil || pub.N == nil:
		return nil, errors.New("RSA key has no modulus")
	case pub.N.Bit(0) == 0:
		return nil, errors.New("RSA modulus is even")
	case pub.N.BitLen() < 2048:
		return nil, fmt.Errorf("RSA key has %d bits; SHA256withRSA keys here have at least 2048", pub.N.BitLen())
	case pub.E < 3 || pub.E&1 == 0 || pub.E > 1<<31-1:
		return nil, fmt.Errorf("RSA public exponent %d is not an odd number from 3 to 2³¹-1", pub.E)
	}
	n, err := bigmod.NewModulus(pub.N.Bytes())
	if err != nil {
		return nil, fmt.Errorf("RSA modulus: %w", err)
	}
	return &Verifier{n: n, e: uint(pub.E), padding: encodeSHA256(n.Size(), new([sha256.Size]byte))[:n.Size()-sha256.Size]}, nil
}

// Verify checks sig over a SHA-256 digest. Its only error is
// rsa.ErrVerification, as crypto/rsa's.
func (v *Verifier) Verify(digest *[sha256.Size]byte, sig []byte) error {
	k := v.n.Size()
	if len(sig) != k {
		return rsa.ErrVerification
	}
	s, err := bigmod.NewNat().SetBytes(sig, v.n) // refuses s ≥ n
	if err != nil {
		return rsa.ErrVerification
	}
	em := bigmod.NewNat().ExpShortVarTime(s, v.e, v.n).Bytes(v.n) // k bytes
	if !bytes.Equal(em[:len(v.padding)], v.padding) || !bytes.Equal(em[len(v.padding):], digest[:]) {
		return rsa.ErrVerification
	}
	return nil
}

// encodeSHA256 is EMSA-PKCS1-v1_5 (RFC 8017 §9.2) of a SHA-256 digest for
// a k-byte modulus: 0x00 0x01, 0xff padding, 0x00, DigestInfo, digest.
func encodeSHA256(k int, digest *[sha256.Size]byte) []byte {
	em := make([]byte, k)
	em[1] = 1
	t := k - len(sha256DigestInfo) - len(digest)
	for i := 2; i < t-1; i++ {
		em[i] = 0xff
	}
	copy(em[t:], sha256DigestInfo)
	copy(em[k-len(digest):], digest[:])
	return em
}
