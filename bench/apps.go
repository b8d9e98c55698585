package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// targetApps: throughput with several apps configured is within 10 % of
// one app's, measured in the same run (issue 24: routing must not cost a
// lookup per key).
const targetApps = 0.90

// benchApp is one Alipay app a service is configured with, and what signs
// its notices.
type benchApp struct {
	id            string
	appPrivate    string // its private_key_file
	alipayPrivate string // "Alipay's" key for this app: signs its notices
	alipayPublic  string // its alipay_public_key_file
}

// mainApps is the one app of the main set of processes (ALIPAY_*).
func (b *bench) mainApps() []benchApp {
	return []benchApp{{id: benchAppID, appPrivate: b.keys.appPrivate, alipayPrivate: b.keys.alipayPrivate, alipayPublic: b.keys.alipayPublic}}
}

// newApps generates n apps under benchSellerID, each with its own key
// pair and its own Alipay key, as Alipay hands every app_id its own; the
// first has benchAppID.
func newApps(ctx context.Context, n int) ([]benchApp, error) {
	return onEveryCore(ctx, "generate app keys", n, func(i int) (benchApp, error) {
		k, err := newKeys()
		if err != nil {
			return benchApp{}, err
		}
		return benchApp{id: fmt.Sprintf("202100410000%04d", 42+i), appPrivate: k.appPrivate,
			alipayPrivate: k.alipayPrivate, alipayPublic: k.alipayPublic}, nil
	})
}

// writeProvidersFile writes a PROVIDERS_FILE listing apps under
// benchSellerID, with their key files, into dir, and returns its path.
func writeProvidersFile(dir string, apps []benchApp) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var y strings.Builder
	fmt.Fprintf(&y, "alipay:\n  - seller_id: %q\n    apps:\n", benchSellerID)
	for i, app := range apps {
		key, public := filepath.Join(dir, app.id+"-key.pem"), filepath.Join(dir, app.id+"-alipay-public.pem")
		for path, pem := range map[string]string{key: app.appPrivate, public: app.alipayPublic} {
			if err := os.WriteFile(path, []byte(pem), 0o600); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(&y, "      - app_id: %q\n        name: app%d\n        private_key_file: %s\n        alipay_public_key_file: %s\n",
			app.id, i+1, key, public)
	}
	path := filepath.Join(dir, "providers.yaml")
	return path, os.WriteFile(path, []byte(y.String()), 0o600)
}

// appsEnv is the environment of the -apps processes: the main set's, with
// PROVIDERS_FILE instead of the ALIPAY_* account variables (the service
// refuses both at once).
func (b *bench) appsEnv(addr string) []string {
	var env []string
	for _, kv := range b.serviceEnv(addr) {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "ALIPAY_APP_ID", "ALIPAY_SELLER_ID", "ALIPAY_APP_PRIVATE_KEY", "ALIPAY_PUBLIC_KEY":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PROVIDERS_FILE="+b.providersFile)
}
