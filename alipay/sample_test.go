package alipay

import (
	"bufio"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"paynotify/internal/devkey"
)

// sample is one notification Alipay's servers really signed, from
// testdata/alipay-real-samples (each file names its origin on line 1).
type sample struct {
	name      string
	form      url.Values
	publicKey string // Alipay's public key, PKIX PEM
	// certs are the PEM blocks of [alipay_public_cert]: Alipay's own
	// certificate first, then an intermediate. Empty in public-key mode.
	certs []string
}

// loadSamples reads every sample file.
func loadSamples(tb testing.TB) []sample {
	tb.Helper()
	paths, err := filepath.Glob("../testdata/alipay-real-samples/*.txt")
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no samples found: %v", err)
	}
	samples := make([]sample, 0, len(paths))
	for _, p := range paths {
		samples = append(samples, readSample(tb, p))
	}
	return samples
}

// readSample parses the sample format: "#" comment lines, then sections
// [params] (key=value split at the first "="), [public_key] and
// [alipay_public_cert] (PEM).
func readSample(tb testing.TB, path string) sample {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()

	s := sample{name: strings.TrimSuffix(filepath.Base(path), ".txt"), form: url.Values{}}
	var section string
	var key, cert strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#") || line == "":
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line
		case section == "[params]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				tb.Fatalf("%s: param line without '=': %q", path, line)
			}
			s.form.Add(k, v)
		case section == "[public_key]":
			key.WriteString(line + "\n")
		case section == "[alipay_public_cert]":
			cert.WriteString(line + "\n")
		default:
			tb.Fatalf("%s: line outside a known section: %q", path, line)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	s.publicKey = key.String()
	rest := []byte(cert.String())
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		s.certs = append(s.certs, string(pem.EncodeToMemory(block)))
	}
	if len(s.form) == 0 || s.publicKey == "" {
		tb.Fatalf("%s: no params or no public key", path)
	}
	return s
}

// clone copies a form so a test case can alter it.
func clone(form url.Values) url.Values {
	c := make(url.Values, len(form))
	for k, vs := range form {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// mustNew builds a Client or stops the test.
func mustNew(tb testing.TB, cfg Config) *Client {
	tb.Helper()
	c, err := New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return c
}

// sampleConfig is the Config of the merchant a sample was sent to, in
// production mode so that any attempt to download a certificate would be
// made (and fail: tests have no network).
func sampleConfig(tb testing.TB, s sample) Config {
	tb.Helper()
	return Config{
		AppID:           s.form.Get("app_id"),
		SellerID:        s.form.Get("seller_id"),
		AppPrivateKey:   devkey.Read(tb, "app_private_key.pem"),
		AlipayPublicKey: s.publicKey,
		Production:      true,
	}
}
