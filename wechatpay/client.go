// Package wechatpay is paynotify's one package for the WeChat Pay API v3
// dependency (直连商户): it verifies and decrypts WeChat Pay's
// notifications, and makes the outbound calls (pay, query, close, refund,
// refund query, the trade bill) through the official SDK,
// github.com/wechatpay-apiv3/wechatpay-go, which signs each request and
// verifies each answer. It translates only: what to do with a payment is
// decided above it. Nothing else imports the SDK.
package wechatpay

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"

	"paynotify/internal/netguard"
	"paynotify/internal/sha256rsa"
)

// DefaultGateway is WeChat Pay's API host. WeChat Pay v3 has no sandbox:
// tests and dev point Config.Gateway at a fake.
const DefaultGateway = "https://api.mch.weixin.qq.com"

// httpTimeout bounds every outbound call.
const httpTimeout = 10 * time.Second

// Settings as the environment names them, so an error says what to fix.
const (
	envMchID          = "WECHATPAY_MCHID"
	envAppID          = "WECHATPAY_APPID"
	envAPIv3Key       = "WECHATPAY_APIV3_KEY"
	envMerchantKey    = "WECHATPAY_MERCHANT_KEY_FILE"
	envMerchantSerial = "WECHATPAY_MERCHANT_SERIAL"
	envPublicKey      = "WECHATPAY_PUBLIC_KEY_FILE"
	envPublicKeyID    = "WECHATPAY_PUBLIC_KEY_ID"
	envPlatformCerts  = "WECHATPAY_PLATFORM_CERT_FILES"
	envGateway        = "WECHATPAY_GATEWAY"
)

// Config says which merchant we are and which keys prove it and WeChat
// Pay. Keys are PEM contents, not paths.
type Config struct {
	// MchID and AppID are ours: a notification naming others is refused
	// even when validly signed. AppIDs are the merchant's other appids
	// (PROVIDERS_FILE): the merchant's keys serve every one; AppID is the
	// first, a payment's default.
	MchID, AppID string
	AppIDs       []string
	// APIv3Key (32 bytes) decrypts notifications' resources; OldAPIv3Keys
	// are keys that decrypt too while the APIv3 key is reset (the AEAD tag
	// tells which opened a resource).
	APIv3Key     string
	OldAPIv3Keys []string
	// MerchantPrivateKey (apiclient_key.pem) signs our requests;
	// MerchantSerial is its certificate's serial, named in each request.
	MerchantPrivateKey, MerchantSerial string
	// PublicKey and PublicKeyID (PUB_KEY_ID_…) are the WeChat Pay public
	// key. PlatformCerts are platform certificates (PEM, one or more per
	// entry). At least one of the two must be set; with both, a signature
	// by either is accepted, as WeChat Pay signs with either at random
	// while a merchant moves from certificates to the public key.
	PublicKey, PublicKeyID string
	PlatformCerts          []string
	// Gateway replaces DefaultGateway for every call ("" means it): a
	// scheme and host, no path.
	Gateway string
	// Refuse lists keys (PEM) the client must not be built with: the
	// development keys, which are public.
	Refuse []string
	// HTTPClient makes the calls; nil means one with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock notifications' timestamps and certificates'
	// validity are judged by; nil means time.Now.
	Now func() time.Time
}

// Client verifies notifications for one merchant and makes its calls. It
// is safe for concurrent use.
type Client struct {
	mchID, appID string
	// appIDs are every appid of the merchant, appID among them; appList
	// the same in order, appID first.
	appIDs  map[string]bool
	appList []string
	// aeads open a resource: the current APIv3 key's first.
	aeads    []cipher.AEAD
	keys     *keyring
	verifier auth.Verifier
	sdk      *core.Client
	// download is sdk with BillDownloadTimeout instead of httpTimeout:
	// a big day's bill takes longer than any API call.
	download *core.Client
	gateway  *url.URL
	now      func() time.Time
}

// New checks cfg, naming every missing or malformed setting in one error
// (by its environment variable), and builds the client. It makes no call.
func New(cfg Config) (*Client, error) {
	var errs []error
	missing := func(name string) { errs = append(errs, fmt.Errorf("%s is required", name)) }
	if cfg.MchID == "" {
		missing(envMchID)
	}
	if cfg.AppID == "" {
		missing(envAppID)
	}
	for _, id := range cfg.AppIDs {
		if id == "" {
			missing("an appid")
		}
	}
	var aeads []cipher.AEAD
	if cfg.APIv3Key == "" {
		missing(envAPIv3Key + " or " + envAPIv3Key + "_FILE")
	}
	for i, key := range append([]string{cfg.APIv3Key}, cfg.OldAPIv3Keys...) {
		name := envAPIv3Key
		if i > 0 {
			name = fmt.Sprintf("APIv3 key %d", i+1)
		}
		switch {
		case key == "":
		case len(key) != 32:
			errs = append(errs, fmt.Errorf("%s must be 32 bytes, is %d", name, len(key)))
		default:
			block, _ := aes.NewCipher([]byte(key))
			aead, _ := cipher.NewGCM(block) // cannot fail for a 32-byte key
			aeads = append(aeads, aead)
		}
	}
	var priv *rsa.PrivateKey
	if cfg.MerchantPrivateKey == "" {
		missing(envMerchantKey)
	} else {
		var err error
		if priv, err = ParsePrivateKey(cfg.MerchantPrivateKey); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envMerchantKey, err))
		} else if isOneOf(&priv.PublicKey, cfg.Refuse) {
			errs = append(errs, fmt.Errorf("%s is a development key from testdata/: use it with `paynotify dev` only", envMerchantKey))
		}
	}
	if cfg.MerchantSerial == "" {
		missing(envMerchantSerial)
	}
	keys, kerrs := newKeyring(cfg)
	errs = append(errs, kerrs...)
	gw, err := parseGateway(cfg.Gateway)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	c := &Client{mchID: cfg.MchID, appID: cfg.AppID, appIDs: map[string]bool{cfg.AppID: true}, appList: []string{cfg.AppID},
		aeads: aeads, keys: keys, gateway: gw, now: cfg.Now}
	for _, id := range cfg.AppIDs {
		if !c.appIDs[id] {
			c.appList = append(c.appList, id)
		}
		c.appIDs[id] = true
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.verifier = keys.verifier(c.now)
	hc := cfg.HTTPClient
	if hc == nil {
		// WeChat Pay's own gateway names the host of each bill's
		// download_url, and the SDK dials it: public addresses only. A
		// configured gateway (a fake, in development) takes every request,
		// download included, so it may be on loopback.
		policy := netguard.PublicOnly
		if gw.String() != DefaultGateway {
			policy = netguard.AnyAddress
		}
		hc = netguard.Client(policy, httpTimeout)
	}
	if gw.String() != DefaultGateway {
		hc = redirected(hc, gw)
	}
	sdk := func(hc *http.Client) (*core.Client, error) {
		return core.NewClient(context.Background(),
			option.WithMerchantCredential(cfg.MchID, cfg.MerchantSerial, priv),
			option.WithVerifier(c.verifier),
			option.WithHTTPClient(hc),
		)
	}
	if c.sdk, err = sdk(hc); err != nil {
		return nil, fmt.Errorf("wechatpay: %w", err)
	}
	long := *hc
	long.Timeout = max(hc.Timeout, BillDownloadTimeout)
	if hc.Timeout == 0 {
		long.Timeout = 0 // no limit of its own: DownloadBill's context bounds it
	}
	if c.download, err = sdk(&long); err != nil {
		return nil, fmt.Errorf("wechatpay: %w", err)
	}
	return c, nil
}

// parseGateway reads Config.Gateway: a scheme and a host, nothing else,
// because the SDK writes WeChat Pay's own host into every URL and only the
// path and query are signed — a path here would be lost or break the
// signature.
func parseGateway(s string) (*url.URL, error) {
	if s == "" {
		s = DefaultGateway
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("%s %q: want a scheme and a host, such as %s", envGateway, s, DefaultGateway)
	}
	u.Path = ""
	return u, nil
}

// redirected returns a copy of hc whose requests go to gw instead of the
// host the SDK names: the SDK has WeChat Pay's host built into every call
// and no option to change it.
func redirected(hc *http.Client, gw *url.URL) *http.Client {
	c := *hc
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = rewrite{next: next, gw: gw}
	return &c
}

// rewrite sends each request to gw, keeping its path and query.
type rewrite struct {
	next http.RoundTripper
	gw   *url.URL
}

// RoundTrip implements http.RoundTripper.
func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = r.gw.Scheme, r.gw.Host, r.gw.Host
	return r.next.RoundTrip(req)
}

// keyring holds what verifies WeChat Pay: the public key, the platform
// certificates, or both.
type keyring struct {
	publicKey   *rsa.PublicKey
	publicKeyID string
	certs       map[string]*x509.Certificate // by serial
	// prepared holds each key above, by its serial, ready to verify a
	// notification's signature (sha256rsa: prepared once, not per call as
	// the SDK's verifiers do). The public key wins a serial it shares with
	// a certificate, as the SDK's combined verifier picks it.
	prepared map[string]*sha256rsa.Verifier
}

// newKeyring reads the public key and the platform certificates of cfg.
func newKeyring(cfg Config) (*keyring, []error) {
	var errs []error
	k := &keyring{publicKeyID: cfg.PublicKeyID, certs: make(map[string]*x509.Certificate), prepared: make(map[string]*sha256rsa.Verifier)}
	var publicKey *sha256rsa.Verifier
	if cfg.PublicKey != "" {
		key, err := ParsePublicKey(cfg.PublicKey)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", envPublicKey, err))
		case isOneOf(key, cfg.Refuse):
			errs = append(errs, fmt.Errorf("%s is a development key from testdata/: use it with `paynotify dev` only", envPublicKey))
		default:
			if publicKey, err = sha256rsa.New(key); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envPublicKey, err))
			} else {
				k.publicKey = key
			}
		}
		if cfg.PublicKeyID == "" {
			errs = append(errs, fmt.Errorf("%s is required with %s", envPublicKeyID, envPublicKey))
		}
	} else if cfg.PublicKeyID != "" {
		errs = append(errs, fmt.Errorf("%s is set without %s", envPublicKeyID, envPublicKey))
	}
	for i, p := range cfg.PlatformCerts {
		certs, err := ParseCertificates(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (file %d): %w", envPlatformCerts, i+1, err))
			continue
		}
		for _, cert := range certs {
			if isOneOf(cert.PublicKey.(*rsa.PublicKey), cfg.Refuse) {
				errs = append(errs, fmt.Errorf("%s (file %d) is a development certificate from testdata/: use it with `paynotify dev` only", envPlatformCerts, i+1))
				continue
			}
			v, err := sha256rsa.New(cert.PublicKey.(*rsa.PublicKey))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (file %d): %w", envPlatformCerts, i+1, err))
				continue
			}
			k.certs[Serial(cert)] = cert
			k.prepared[Serial(cert)] = v
		}
	}
	if publicKey != nil {
		k.prepared[cfg.PublicKeyID] = publicKey // after the certificates: it wins their serial
	}
	if cfg.PublicKey == "" && len(cfg.PlatformCerts) == 0 {
		errs = append(errs, fmt.Errorf("%s with %s, or %s, is required (both while moving from certificates to the public key)", envPublicKey, envPublicKeyID, envPlatformCerts))
	}
	return k, errs
}

// verifier is the SDK's verifier for what the keyring holds: the public
// key's, the certificates', or both combined (the serial picks which).
// Certificates are looked up through a getter that hides expired ones.
func (k *keyring) verifier(now func() time.Time) auth.Verifier {
	certs := validCerts{certs: k.certs, now: now}
	switch {
	case k.publicKey != nil && len(k.certs) > 0:
		return verifiers.NewSHA256WithRSACombinedVerifier(certs, k.publicKeyID, *k.publicKey)
	case k.publicKey != nil:
		return verifiers.NewSHA256WithRSAPubkeyVerifier(k.publicKeyID, *k.publicKey)
	default:
		return verifiers.NewSHA256WithRSAVerifier(certs)
	}
}

// key returns the prepared key serial names: the public key, or a
// certificate valid at t; nil if neither.
func (k *keyring) key(serial string, t time.Time) *sha256rsa.Verifier {
	if k.publicKey != nil && serial == k.publicKeyID {
		return k.prepared[serial]
	}
	if cert, ok := k.certs[serial]; !ok || !valid(cert, t) {
		return nil
	}
	return k.prepared[serial]
}

// validCerts is a core.CertificateGetter of the certificates valid now.
// The SDK's own map hands out a certificate past its NotAfter, so a
// signature by a platform key WeChat Pay has retired would still pass.
type validCerts struct {
	certs map[string]*x509.Certificate
	now   func() time.Time
}

// Get implements core.CertificateGetter.
func (v validCerts) Get(_ context.Context, serial string) (*x509.Certificate, bool) {
	cert, ok := v.certs[serial]
	if !ok || !valid(cert, v.now()) {
		return nil, false
	}
	return cert, true
}

// GetAll implements core.CertificateGetter.
func (v validCerts) GetAll(context.Context) map[string]*x509.Certificate {
	out := make(map[string]*x509.Certificate)
	now := v.now()
	for s, c := range v.certs {
		if valid(c, now) {
			out[s] = c
		}
	}
	return out
}

// GetNewestSerial implements core.CertificateGetter: the valid certificate
// that expires last.
func (v validCerts) GetNewestSerial(context.Context) string {
	var newest *x509.Certificate
	now := v.now()
	for _, c := range v.certs {
		if valid(c, now) && (newest == nil || c.NotAfter.After(newest.NotAfter)) {
			newest = c
		}
	}
	if newest == nil {
		return ""
	}
	return Serial(newest)
}

// valid reports whether cert is within its validity at t.
func valid(cert *x509.Certificate, t time.Time) bool {
	return !t.Before(cert.NotBefore) && !t.After(cert.NotAfter)
}

// AppIDs are every appid of the merchant, Config.AppID first.
func (c *Client) AppIDs() []string { return slices.Clone(c.appList) }
