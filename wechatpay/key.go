package wechatpay

import (
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"paynotify/internal/rsakey"
)

// Every parse error below is a fixed phrase: keys are secrets (or look like
// them), so no error ever quotes a byte of what it was given.
var (
	errNotPrivateKey = errors.New("not an RSA private key in PEM (PKCS#8, as apiclient_key.pem, or PKCS#1)")
	errNotPublicKey  = errors.New("not an RSA public key in PEM (PKIX, as pub_key.pem, or PKCS#1)")
	errNotCert       = errors.New("not a PEM certificate with an RSA key")
)

// onlyBlock is the DER of s's one PEM block, or nil.
func onlyBlock(s string) []byte {
	blocks := rsakey.Blocks(s)
	if len(blocks) != 1 {
		return nil
	}
	return blocks[0].Bytes
}

// ParsePrivateKey reads an RSA private key in PEM: the merchant's
// apiclient_key.pem (PKCS#8) or PKCS#1.
func ParsePrivateKey(s string) (*rsa.PrivateKey, error) {
	key, err := rsakey.Private(onlyBlock(s))
	if err != nil {
		return nil, rsakey.Wrap(errNotPrivateKey, err)
	}
	return key, nil
}

// ParsePublicKey reads an RSA public key in PEM: the WeChat Pay public key
// (pub_key.pem, PKIX) or PKCS#1.
func ParsePublicKey(s string) (*rsa.PublicKey, error) {
	key, err := rsakey.Public(onlyBlock(s))
	if err != nil {
		return nil, rsakey.Wrap(errNotPublicKey, err)
	}
	return key, nil
}

// ParseCertificates reads every certificate of a PEM file (a platform
// certificate file may hold more than one). Each must carry an RSA key:
// the SDK's verifier would panic on any other.
func ParseCertificates(s string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for _, b := range rsakey.Blocks(s) {
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, errNotCert
		}
		if _, ok := cert.PublicKey.(*rsa.PublicKey); !ok {
			return nil, errNotCert
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errNotCert
	}
	return certs, nil
}

// Serial is a certificate's serial as WeChat Pay writes it — a platform
// certificate's in Wechatpay-Serial (and as the SDK keys its
// certificates), the merchant's in the merchant platform and as `openssl
// x509 -serial` prints it: the serial's bytes in upper-case hexadecimal,
// two digits a byte, so a leading zero of the first byte is written.
func Serial(cert *x509.Certificate) string {
	return fmt.Sprintf("%X", cert.SerialNumber.Bytes())
}

// checkMerchantCert checks the merchant's certificate (apiclient_cert.pem,
// PEM contents certPEM, read from path) against what signs our calls: its
// serial must be serial (case aside) and its key the public half of
// keyPEM. A key that does not parse is left to New, which names it. Each
// problem names the field; the caller adds the file and the account.
func checkMerchantCert(path, certPEM, keyPEM, serial string) []error {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return []error{fmt.Errorf("merchant_cert_file %s: %w", path, err)}
	}
	cert := certs[0]
	var errs []error
	// WeChat Pay looks the serial a call names up as written: the
	// certificate's own serial is the one to name.
	if got := Serial(cert); !strings.EqualFold(got, serial) {
		errs = append(errs, fmt.Errorf("merchant_serial %q is not the serial of merchant_cert_file %s, which is %s", serial, path, got))
	}
	if key, err := ParsePrivateKey(keyPEM); err == nil && !key.PublicKey.Equal(cert.PublicKey) {
		errs = append(errs, fmt.Errorf("merchant_cert_file %s is the certificate of another key than merchant_key_file's", path))
	}
	return errs
}

// publicKeyOf returns the RSA public key in any of the PEM forms above
// (private key, public key or certificate), or nil: what the refusal of
// development keys compares.
func publicKeyOf(s string) *rsa.PublicKey {
	if k, err := ParsePrivateKey(s); err == nil {
		return &k.PublicKey
	}
	if k, err := ParsePublicKey(s); err == nil {
		return k
	}
	if certs, err := ParseCertificates(s); err == nil {
		return certs[0].PublicKey.(*rsa.PublicKey)
	}
	return nil
}

// isOneOf reports whether key is the key of any PEM in pems.
func isOneOf(key *rsa.PublicKey, pems []string) bool {
	for _, p := range pems {
		if k := publicKeyOf(p); k != nil && k.Equal(key) {
			return true
		}
	}
	return false
}
