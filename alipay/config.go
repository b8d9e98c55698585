package alipay

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"strings"

	"paynotify/config"
	"paynotify/model"
)

// FromConfig resolves the Alipay settings of c (values or files) into a
// client configuration, parsing the keys and certificates itself. It names
// every missing or malformed variable in one error (a *config.Error, to
// join with Load's), and refuses any key in devKeys (the development keys
// from testdata/, which are public).
func FromConfig(c config.Config, devKeys []string) (Config, error) {
	if c.Accounts != nil {
		return fromFile(*c.Accounts, devKeys)
	}
	var errs []error
	missing := func(name string) { errs = append(errs, fmt.Errorf("%s is required", name)) }
	ac := Config{AppID: c.AppID, SellerID: c.SellerID, Production: c.Production, SandboxGateway: c.AlipaySandboxGateway}
	if c.AppID == "" {
		missing("ALIPAY_APP_ID")
	}
	if c.SellerID == "" {
		missing("ALIPAY_SELLER_ID")
	} else if !strings.HasPrefix(c.SellerID, "2088") {
		errs = append(errs, fmt.Errorf("ALIPAY_SELLER_ID %q: an Alipay seller id starts with 2088", c.SellerID))
	}

	errs = append(errs, readKeys(c, &ac)...)

	for _, k := range []struct{ name, key string }{
		{"ALIPAY_APP_PRIVATE_KEY", ac.AppPrivateKey},
		{"ALIPAY_PUBLIC_KEY", ac.AlipayPublicKey},
		{"ALIPAY_PUBLIC_CERT_FILE", ac.AlipayPublicCert},
	} {
		if isDevKey(k.key, devKeys) {
			errs = append(errs, fmt.Errorf("%s is a development key from testdata/: use it with `paynotify dev` only", k.name))
		}
	}
	for _, cert := range ac.OtherAlipayPublicCerts {
		if isDevKey(cert, devKeys) {
			errs = append(errs, errors.New("ALIPAY_PUBLIC_CERT_FILE names a certificate of a development key from testdata/: use it with `paynotify dev` only"))
		}
	}
	if len(errs) > 0 {
		return ac, config.Join(errs...)
	}
	return ac, nil
}

// readKeys reads the app's private key and Alipay's public key — or, in
// certificate mode, the three certificates — into ac, and parses them:
// a problem for each missing or malformed one.
func readKeys(c config.Config, ac *Config) []error {
	var errs []error
	missing := func(name string) { errs = append(errs, fmt.Errorf("%s is required", name)) }
	var err error
	if ac.AppPrivateKey, err = config.ValueOrFile("ALIPAY_APP_PRIVATE_KEY", c.AppPrivateKey, c.AppPrivateKeyFile); err != nil {
		errs = append(errs, err)
	} else if ac.AppPrivateKey == "" {
		missing("ALIPAY_APP_PRIVATE_KEY or ALIPAY_APP_PRIVATE_KEY_FILE")
	} else if err := CheckPrivateKey(ac.AppPrivateKey); err != nil {
		errs = append(errs, fmt.Errorf("ALIPAY_APP_PRIVATE_KEY: %w", err))
	}

	certMode := c.AppCertFile != "" || c.AlipayPublicCertFile != "" || c.AlipayRootCertFile != ""
	if certMode {
		// ALIPAY_PUBLIC_CERT_FILE may list several files (comma-separated):
		// the current certificate's first, then those that verify too while
		// Alipay renews its certificate.
		var certFiles []string
		for _, f := range strings.Split(c.AlipayPublicCertFile, ",") {
			if f = strings.TrimSpace(f); f != "" {
				certFiles = append(certFiles, f)
			}
		}
		var others []string
		for _, f := range []struct {
			name, path string
			dst        *string
		}{
			{"ALIPAY_APP_CERT_FILE", c.AppCertFile, &ac.AppCert},
			{"ALIPAY_PUBLIC_CERT_FILE", first(certFiles), &ac.AlipayPublicCert},
			{"ALIPAY_ROOT_CERT_FILE", c.AlipayRootCertFile, &ac.AlipayRootCert},
		} {
			if f.path == "" {
				missing(f.name + " (certificate mode needs all three certificate files)")
				continue
			}
			b, err := os.ReadFile(f.path)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
				continue
			}
			*f.dst = string(b)
		}
		for i, path := range certFiles[min(1, len(certFiles)):] {
			b, err := os.ReadFile(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("ALIPAY_PUBLIC_CERT_FILE (certificate %d): %w", i+2, err))
				continue
			}
			if err := CheckCertificate(string(b)); err != nil {
				errs = append(errs, fmt.Errorf("ALIPAY_PUBLIC_CERT_FILE (certificate %d) %s: %w", i+2, path, err))
			}
			others = append(others, string(b))
		}
		ac.OtherAlipayPublicCerts = others
		if ac.AlipayPublicCert != "" {
			if err := CheckCertificate(ac.AlipayPublicCert); err != nil {
				errs = append(errs, fmt.Errorf("ALIPAY_PUBLIC_CERT_FILE: %w", err))
			}
		}
		// Alipay's public key beside the certificates verifies too, while
		// the app moves to certificate mode.
		if ac.AlipayPublicKey, err = config.ValueOrFile("ALIPAY_PUBLIC_KEY", c.AlipayPublicKey, c.AlipayPublicKeyFile); err != nil {
			errs = append(errs, err)
		} else if ac.AlipayPublicKey != "" {
			if err := CheckPublicKey(ac.AlipayPublicKey); err != nil {
				errs = append(errs, fmt.Errorf("ALIPAY_PUBLIC_KEY: %w", err))
			}
		}
	} else {
		if ac.AlipayPublicKey, err = config.ValueOrFile("ALIPAY_PUBLIC_KEY", c.AlipayPublicKey, c.AlipayPublicKeyFile); err != nil {
			errs = append(errs, err)
		} else if ac.AlipayPublicKey == "" {
			missing("ALIPAY_PUBLIC_KEY or ALIPAY_PUBLIC_KEY_FILE (or the three certificate files)")
		} else if err := CheckPublicKey(ac.AlipayPublicKey); err != nil {
			errs = append(errs, fmt.Errorf("ALIPAY_PUBLIC_KEY: %w", err))
		}
	}
	return errs
}

// first is paths' first, or "".
func first(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	return paths[0]
}

// isDevKey reports whether s holds the key of one of devKeys, whatever
// either's armour (PEM, bare base64, escaped newlines) or form (a
// private key, PKCS#1 or PKCS#8; a public key; a certificate): their
// public halves are compared, not their text.
func isDevKey(s string, devKeys []string) bool {
	key := publicKeyOf(s)
	if key == nil {
		return false
	}
	for _, dev := range devKeys {
		if k := publicKeyOf(dev); k != nil && k.Equal(key) {
			return true
		}
	}
	return false
}

// publicKeyOf is the RSA public key in s, a private key, a public key or
// a certificate (its first), or nil.
func publicKeyOf(s string) *rsa.PublicKey {
	if s == "" {
		return nil
	}
	if k, err := parsePrivateKey(s); err == nil {
		return &k.PublicKey
	}
	if k, err := parsePublicKey(s); err == nil {
		return k
	}
	if certs, err := parseCerts(s); err == nil {
		if k, ok := certs[0].PublicKey.(*rsa.PublicKey); ok {
			return k
		}
	}
	return nil
}

// fromFile is FromConfig for PROVIDERS_FILE's first seller's first app.
func fromFile(a config.Accounts, devKeys []string) (Config, error) {
	apps, err := appsFromFile(a, devKeys)
	if len(apps) == 0 {
		return Config{}, err
	}
	return apps[0].Config, err
}

// AppConfig is one Alipay app's client configuration and what
// PROVIDERS_FILE says of it beside its keys.
type AppConfig struct {
	Config
	// Name is the app's name in the file ("" when none, and in the
	// environment form).
	Name string
	// Methods limits what the app takes; empty, every Alipay method.
	Methods []model.PayMethod
}

// FromConfigApps is FromConfig for every Alipay app configured: the
// ALIPAY_* variables' one, or every app of every seller PROVIDERS_FILE
// lists, in its order (the first is the default app). Every problem of
// the file names the file, the seller and the app.
func FromConfigApps(c config.Config, devKeys []string) ([]AppConfig, error) {
	if c.Accounts != nil {
		return appsFromFile(*c.Accounts, devKeys)
	}
	ac, err := FromConfig(c, devKeys)
	return []AppConfig{{Config: ac}}, err
}

// appsFromFile reads each app of the file as the variables would give it.
func appsFromFile(a config.Accounts, devKeys []string) ([]AppConfig, error) {
	var out []AppConfig
	var problems []string
	for i, acc := range a.Alipay {
		for j, app := range acc.Apps {
			ac, err := FromConfig(a.AlipayAppEnv(i, j), devKeys)
			methods := make([]model.PayMethod, 0, len(app.Methods))
			for _, m := range app.Methods {
				methods = append(methods, model.PayMethod(m))
			}
			out = append(out, AppConfig{Config: ac, Name: app.Name, Methods: methods})
			if err == nil {
				continue
			}
			where := fmt.Sprintf("%s apps[%d] (app_id %q)", a.Where("alipay", i, "seller_id", acc.SellerID), j, app.AppID)
			for _, p := range err.(*config.Error).Problems {
				problems = append(problems, where+": "+p)
			}
		}
	}
	if len(problems) > 0 {
		return out, &config.Error{Problems: problems}
	}
	return out, nil
}
