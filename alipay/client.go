// Package alipay is paynotify's one package for the Alipay dependency: it
// verifies Alipay's asynchronous notifications by Alipay's own signing rule,
// signs forms the same way (for QA, tests and a fake Alipay), and holds the
// smartwalle SDK client for outbound calls. Nothing else imports smartwalle.
package alipay

import (
	"crypto/md5"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/internal/netguard"
	"paynotify/internal/sha256rsa"
	"paynotify/model"
)

// Settings as the environment names them, so an error says what to fix.
const (
	envAppID            = "ALIPAY_APP_ID"
	envSellerID         = "ALIPAY_SELLER_ID"
	envAppPrivateKey    = "ALIPAY_APP_PRIVATE_KEY"
	envAlipayPublicKey  = "ALIPAY_PUBLIC_KEY"
	envAppCert          = "ALIPAY_APP_CERT"
	envAlipayPublicCert = "ALIPAY_PUBLIC_CERT"
	envAlipayRootCert   = "ALIPAY_ROOT_CERT"
)

// httpTimeout bounds every outbound call; smartwalle's default client has
// none, and a stalled gateway must not hold a request forever.
const httpTimeout = 10 * time.Second

// Config says which merchant we are and which keys prove it. Keys may be
// PEM or the bare base64 the Alipay console shows; the private key may be
// PKCS#1 or PKCS#8.
type Config struct {
	// AppID and SellerID identify us; a notification naming another app or
	// seller is refused even when validly signed.
	AppID, SellerID string
	// AppPrivateKey signs our outbound calls.
	AppPrivateKey string
	// AlipayPublicKey verifies Alipay in public-key mode.
	AlipayPublicKey string
	// AppCert, AlipayPublicCert and AlipayRootCert (PEM contents) are for
	// certificate mode. AlipayPublicCert, if set, is the current Alipay
	// certificate (what an answer naming no alipay_cert_sn is checked
	// with); AppCert and AlipayRootCert are loaded if set because outbound
	// calls in certificate mode must name their serials.
	AppCert, AlipayPublicCert, AlipayRootCert string
	// OtherAlipayPublicCerts are Alipay certificates that verify too
	// while Alipay renews its certificate (the old one, or the new one
	// before it is current). AlipayPublicKey beside AlipayPublicCert
	// verifies too, while the app moves from public-key mode to
	// certificate mode.
	OtherAlipayPublicCerts []string
	// Production selects Alipay's production gateway; false is the sandbox.
	Production bool
	// SandboxGateway, if set and not Production, replaces the sandbox URL
	// (to point outbound calls at a fake Alipay). It is the development
	// setting that also lets a bill download reach loopback and private
	// addresses, where the fake serves its bills; without it every download
	// URL must resolve to a public address.
	SandboxGateway string
}

// Client verifies notifications for one merchant and makes outbound calls
// through smartwalle. It is safe for concurrent use.
type Client struct {
	sdk *smartwalle.Client
	// alipayKeys verify notifications: Alipay's public key, or the keys of
	// its certificates, the current one first; bySN are the certificates'
	// by their alipay_cert_sn. smartwalle holds them too, for its answers
	// to our calls.
	alipayKeys []*sha256rsa.Verifier
	bySN       map[string]*sha256rsa.Verifier
	appID      string
	sellerID   string
	production bool
	// billFetch is the addresses a bill download may reach: public ones
	// only, unless the gateway is a fake (SandboxGateway), which serves its
	// bills from loopback.
	billFetch netguard.Policy
}

// New checks cfg and loads its keys. Errors name the setting at fault and
// never quote key material.
func New(cfg Config) (*Client, error) {
	if cfg.AppID == "" {
		return nil, fmt.Errorf("%s: empty", envAppID)
	}
	// An empty seller would accept any notification that omits seller_id.
	if cfg.SellerID == "" {
		return nil, fmt.Errorf("%s: empty", envSellerID)
	}
	if cfg.AlipayPublicKey == "" && cfg.AlipayPublicCert == "" || len(cfg.OtherAlipayPublicCerts) > 0 && cfg.AlipayPublicCert == "" {
		return nil, fmt.Errorf("%s or %s: one is needed to verify Alipay", envAlipayPublicKey, envAlipayPublicCert)
	}
	priv, err := parsePrivateKey(cfg.AppPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envAppPrivateKey, err)
	}

	opts := []smartwalle.OptionFunc{
		smartwalle.WithHTTPClient(&http.Client{Timeout: httpTimeout}),
		// Alipay reads the timestamp of a call as Beijing time; smartwalle
		// would write the server's local zone.
		smartwalle.WithTimeLocation(model.Beijing),
	}
	if cfg.SandboxGateway != "" && !cfg.Production {
		opts = append(opts, smartwalle.WithSandboxGateway(cfg.SandboxGateway))
	}
	// Hand smartwalle a normalised PEM: it cannot read keys with leading
	// blanks or escaped newlines, which parsePrivateKey accepts.
	sdk, err := smartwalle.New(cfg.AppID, pemPKCS1(priv), cfg.Production, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: rejected by the Alipay SDK", envAppPrivateKey)
	}

	keys, bySN, err := loadVerifiers(sdk, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.AppCert != "" {
		if err := loadAppCert(sdk, cfg.AppCert, priv); err != nil {
			return nil, err
		}
	}
	if cfg.AlipayRootCert != "" {
		if err := loadRootCert(sdk, cfg.AlipayRootCert); err != nil {
			return nil, err
		}
	}
	billFetch := netguard.PublicOnly
	if cfg.SandboxGateway != "" && !cfg.Production {
		billFetch = netguard.AnyAddress
	}
	return &Client{sdk: sdk, alipayKeys: keys, bySN: bySN, appID: cfg.AppID, sellerID: cfg.SellerID, production: cfg.Production, billFetch: billFetch}, nil
}

// AppID is the app the client speaks for: the ledger's app.
func (c *Client) AppID() string { return c.appID }

// SellerID is the seller the app belongs to: the ledger's account.
func (c *Client) SellerID() string { return c.sellerID }

// SDK returns the smartwalle client, configured and keyed, for outbound
// calls. Verify notifications with VerifyNotification, not with the SDK.
func (c *Client) SDK() *smartwalle.Client { return c.sdk }

// loadVerifiers gives sdk the keys notifications are checked with and
// returns them, prepared, for VerifyNotification, the current one first:
// in public-key mode Alipay's public key; in certificate mode each
// Alipay certificate's key (also by its alipay_cert_sn), and the public
// key if one is configured beside them.
func loadVerifiers(sdk *smartwalle.Client, cfg Config) ([]*sha256rsa.Verifier, map[string]*sha256rsa.Verifier, error) {
	var keys []*sha256rsa.Verifier
	bySN := map[string]*sha256rsa.Verifier{}
	if cfg.AlipayPublicCert != "" {
		// smartwalle checks an answer naming no SN with the certificate it
		// loaded last: the current one goes last.
		certs := append(slices.Clone(cfg.OtherAlipayPublicCerts), cfg.AlipayPublicCert)
		loaded := make([]*sha256rsa.Verifier, len(certs))
		for i, pemCerts := range certs {
			name := envAlipayPublicCert
			if i < len(certs)-1 {
				name = fmt.Sprintf("%s (certificate %d)", envAlipayPublicCert, i+2)
			}
			v, sn, err := loadCert(sdk, name, pemCerts)
			if err != nil {
				return nil, nil, err
			}
			if _, dup := bySN[sn]; dup {
				return nil, nil, fmt.Errorf("%s: the same certificate (alipay_cert_sn %s) listed twice", name, sn)
			}
			bySN[sn], loaded[i] = v, v
		}
		keys = append(loaded[len(loaded)-1:], loaded[:len(loaded)-1]...) // the current one first
	}
	if cfg.AlipayPublicKey == "" {
		return keys, bySN, nil
	}
	pub, err := parsePublicKey(cfg.AlipayPublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", envAlipayPublicKey, err)
	}
	v, err := sha256rsa.New(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", envAlipayPublicKey, err)
	}
	if cfg.AlipayPublicCert == "" {
		s, err := pemPKIX(pub)
		if err == nil {
			err = sdk.LoadAliPayPublicKey(s)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: rejected by the Alipay SDK", envAlipayPublicKey)
		}
	}
	return append(keys, v), bySN, nil
}

// loadCert loads one Alipay certificate file into sdk and returns its
// key, prepared, and its alipay_cert_sn.
func loadCert(sdk *smartwalle.Client, name, pemCerts string) (*sha256rsa.Verifier, string, error) {
	certs, err := parseCerts(pemCerts)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	// The file Alipay issues is a chain; its first certificate is Alipay's.
	pub, ok := certs[0].PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, "", fmt.Errorf("%s: first certificate does not hold an RSA key", name)
	}
	// smartwalle returns nil without loading anything for a non-RSA
	// certificate, hence the check above.
	v, err := sha256rsa.New(pub)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	if err := sdk.LoadAlipayCertPublicKey(pemCert(certs[0])); err != nil {
		return nil, "", fmt.Errorf("%s: rejected by the Alipay SDK", name)
	}
	return v, CertSN(certs[0]), nil
}

// CertSN is a certificate's serial as Alipay names it (alipay_cert_sn,
// app_cert_sn): the MD5, in hex, of its issuer's name and its serial
// number in decimal — smartwalle's and Alipay's SDKs' rule.
func CertSN(cert *x509.Certificate) string {
	sum := md5.Sum([]byte(cert.Issuer.String() + cert.SerialNumber.String()))
	return hex.EncodeToString(sum[:])
}

// loadAppCert loads our own certificate, whose serial outbound calls carry.
func loadAppCert(sdk *smartwalle.Client, s string, priv *rsa.PrivateKey) error {
	certs, err := parseCerts(s)
	if err != nil {
		return fmt.Errorf("%s: %w", envAppCert, err)
	}
	// A certificate for another key makes every outbound call fail at
	// Alipay with an unhelpful answer; say so at start instead.
	if pub, ok := certs[0].PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(priv.Public()) {
		return fmt.Errorf("%s: not the certificate of %s", envAppCert, envAppPrivateKey)
	}
	if err := sdk.LoadAppCertPublicKey(pemCert(certs[0])); err != nil {
		return fmt.Errorf("%s: rejected by the Alipay SDK", envAppCert)
	}
	return nil
}

// loadRootCert loads Alipay's root bundle, whose serials outbound calls
// carry.
func loadRootCert(sdk *smartwalle.Client, s string) error {
	certs, err := parseCerts(s)
	if err != nil {
		return fmt.Errorf("%s: %w", envAlipayRootCert, err)
	}
	// smartwalle never fails here: it silently keeps only RSA-signed roots,
	// so a bundle without one would go unnoticed until Alipay refuses calls.
	if !hasRSASigned(certs) {
		return fmt.Errorf("%s: no RSA-signed certificate", envAlipayRootCert)
	}
	// Re-encoded, as the other keys: smartwalle cannot read escaped
	// newlines, and it would skip the certificates parseCerts skipped.
	var bundle strings.Builder
	for _, c := range certs {
		bundle.WriteString(pemCert(c))
	}
	if err := sdk.LoadAliPayRootCert(bundle.String()); err != nil {
		return fmt.Errorf("%s: rejected by the Alipay SDK", envAlipayRootCert)
	}
	return nil
}

// hasRSASigned reports whether any certificate is one smartwalle counts
// into alipay_root_cert_sn.
func hasRSASigned(certs []*x509.Certificate) bool {
	for _, c := range certs {
		if c.SignatureAlgorithm == x509.SHA256WithRSA || c.SignatureAlgorithm == x509.SHA1WithRSA {
			return true
		}
	}
	return false
}
