package alipay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paynotify/alipay"
	"paynotify/config"
	"paynotify/internal/devkey"
)

// serve refuses the development keys (their private halves are in the
// repository) in whatever form they are written: a key is compared by
// its public half, not its text.
func TestFromConfigRefusesDevKeysInEveryForm(t *testing.T) {
	devKeys := []string{devkey.Read(t, "alipay_public_key.pem"), devkey.Read(t, "app_private_key.pem")}
	fresh, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	freshPrivate := pemOf("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(fresh)))
	freshPublic := pemOf("PUBLIC KEY", must(x509.MarshalPKIXPublicKey(&fresh.PublicKey)))
	devAlipay := parsePublic(t, devKeys[0])
	devApp := parsePrivate(t, devKeys[1])

	forms := func(key any) map[string]string {
		var pkix, pkcs1 []byte
		switch k := key.(type) {
		case *rsa.PublicKey:
			pkix, pkcs1 = must(x509.MarshalPKIXPublicKey(k)), x509.MarshalPKCS1PublicKey(k)
			p := pemOf("PUBLIC KEY", pkix)
			return map[string]string{"PEM": p, "EscapedNewlines": strings.ReplaceAll(p, "\n", `\n`),
				"BareBase64": bare(p), "PKCS1": pemOf("RSA PUBLIC KEY", pkcs1)}
		case *rsa.PrivateKey:
			p := pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k))
			return map[string]string{"PKCS1": p, "EscapedNewlines": strings.ReplaceAll(p, "\n", `\n`),
				"BareBase64": bare(p), "PKCS8": pemOf("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(k)))}
		}
		panic("no key")
	}
	base := config.Config{AppID: "2021000000000001", SellerID: "2088000000000001", AppPrivateKey: freshPrivate, AlipayPublicKey: freshPublic}
	if _, err := alipay.FromConfig(base, devKeys); err != nil {
		t.Fatalf("fresh keys refused: %v", err)
	}
	for form, key := range forms(&devAlipay) {
		t.Run("AlipayPublicKey"+form, func(t *testing.T) {
			c := base
			c.AlipayPublicKey = key
			_, err := alipay.FromConfig(c, devKeys)
			if err == nil || !strings.Contains(err.Error(), "ALIPAY_PUBLIC_KEY is a development key") {
				t.Errorf("the development Alipay public key as %s: %v", form, err)
			}
		})
	}
	for form, key := range forms(devApp) {
		t.Run("AppPrivateKey"+form, func(t *testing.T) {
			c := base
			c.AppPrivateKey = key
			_, err := alipay.FromConfig(c, devKeys)
			if err == nil || !strings.Contains(err.Error(), "ALIPAY_APP_PRIVATE_KEY is a development key") {
				t.Errorf("the development app private key as %s: %v", form, err)
			}
		})
	}
	t.Run("AlipayPublicCert", func(t *testing.T) {
		// A certificate of the development Alipay key, in certificate mode.
		dir := t.TempDir()
		write := func(name, s string) string {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
		c := base
		c.AlipayPublicKey = ""
		c.AppCertFile = write("app.crt", certOf(t, &fresh.PublicKey, fresh))
		c.AlipayPublicCertFile = write("alipay.crt", certOf(t, &devAlipay, fresh))
		c.AlipayRootCertFile = write("root.crt", certOf(t, &fresh.PublicKey, fresh))
		_, err := alipay.FromConfig(c, devKeys)
		if err == nil || !strings.Contains(err.Error(), "ALIPAY_PUBLIC_CERT_FILE is a development key") {
			t.Errorf("a certificate of the development Alipay key: %v", err)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// bare is a PEM's base64 without its armour, as Alipay's console shows keys.
func bare(p string) string {
	var b strings.Builder
	for _, line := range strings.Split(p, "\n") {
		if !strings.HasPrefix(line, "-----") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func parsePublic(t *testing.T, s string) rsa.PublicKey {
	t.Helper()
	block, _ := pem.Decode([]byte(s))
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return *k.(*rsa.PublicKey)
}

func parsePrivate(t *testing.T, s string) *rsa.PrivateKey {
	t.Helper()
	block, _ := pem.Decode([]byte(s))
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(*rsa.PrivateKey)
}

// certOf is a certificate of pub, signed by signer.
func certOf(t *testing.T, pub *rsa.PublicKey, signer *rsa.PrivateKey) string {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("CERTIFICATE", der)
}
