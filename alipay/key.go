package alipay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"paynotify/internal/rsakey"
)

// Every parse error below is a fixed phrase: keys are secrets (or look like
// them), so no error ever quotes a byte of what it was given.
var (
	errNotPrivateKey = errors.New("not an RSA private key (PKCS#1 or PKCS#8, PEM or base64)")
	errNotPublicKey  = errors.New("not an RSA public key (PKIX, PEM or base64)")
	errNotCert       = errors.New("not a PEM certificate")
)

// decodeKey returns the DER inside a key written as PEM or as the bare
// base64 the Alipay console shows.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(rsakey.Unescape(s))
	if s == "" {
		return nil, errors.New("empty")
	}
	if strings.HasPrefix(s, "-----BEGIN") {
		blocks := rsakey.Blocks(s)
		if len(blocks) == 0 {
			return nil, errors.New("broken PEM")
		}
		return blocks[0].Bytes, nil
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		return nil, errors.New("neither PEM nor base64")
	}
	return der, nil
}

// parsePrivateKey reads an RSA private key, PKCS#1 or PKCS#8: Alipay's key
// tool offers both (PKCS#1 "for non-Java", PKCS#8 "for Java").
func parsePrivateKey(s string) (*rsa.PrivateKey, error) {
	der, err := decodeKey(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotPrivateKey, err)
	}
	key, err := rsakey.Private(der)
	if err != nil {
		return nil, rsakey.Wrap(errNotPrivateKey, err)
	}
	return key, nil
}

// parsePublicKey reads an RSA public key, PKIX (what Alipay hands out) or,
// leniently, PKCS#1.
func parsePublicKey(s string) (*rsa.PublicKey, error) {
	der, err := decodeKey(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotPublicKey, err)
	}
	key, err := rsakey.Public(der)
	if err != nil {
		return nil, rsakey.Wrap(errNotPublicKey, err)
	}
	return key, nil
}

// parseCerts reads every certificate in a PEM bundle, in order. Alipay's
// certificate files hold chains: alipayCertPublicKey_RSA2.crt is Alipay's
// own certificate followed by an intermediate, and the root file holds
// several roots, some (SM2) that Go cannot parse and are skipped here as
// Alipay's SDKs skip them.
func parseCerts(s string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for _, block := range rsakey.Blocks(s) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, cert)
		}
	}
	if len(certs) == 0 {
		return nil, errNotCert
	}
	return certs, nil
}

// pemPKCS1 writes key as PKCS#1 PEM, the form smartwalle.New tries first.
func pemPKCS1(key *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

// pemPKIX writes key as PKIX PEM ("PUBLIC KEY"), the form Alipay uses.
func pemPKIX(key *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// pemCert writes one certificate as PEM.
func pemCert(cert *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
}

// CheckPrivateKey reports whether s parses as an RSA private key (PKCS#1 or
// PKCS#8, PEM or bare base64), so configuration can name every bad key at
// once. The error never quotes the key.
func CheckPrivateKey(s string) error {
	_, err := parsePrivateKey(s)
	return err
}

// CheckPublicKey reports whether s parses as an RSA public key.
func CheckPublicKey(s string) error {
	_, err := parsePublicKey(s)
	return err
}

// CheckCertificate reports whether s holds at least one certificate.
func CheckCertificate(s string) error {
	_, err := parseCerts(s)
	return err
}
