package rsakey

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"paynotify/internal/devkey"
)

// Every form a provider hands out reads as the same key; what is no RSA
// key is refused, naming at most the kind of key it holds and never a
// byte of the input.
func TestParse(t *testing.T) {
	blocks := Blocks(devkey.Read(t, "app_private_key.pem"))
	if len(blocks) != 1 {
		t.Fatalf("%d PEM blocks in the dev key", len(blocks))
	}
	key, err := Private(blocks[0].Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, der := range map[string][]byte{"PKCS1": x509.MarshalPKCS1PrivateKey(key), "PKCS8": pkcs8} {
		if got, err := Private(der); err != nil || !got.Equal(key) {
			t.Errorf("%s private key: %v", name, err)
		}
	}
	pkix, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, der := range map[string][]byte{"PKIX": pkix, "PKCS1": x509.MarshalPKCS1PublicKey(&key.PublicKey)} {
		if got, err := Public(der); err != nil || !got.Equal(&key.PublicKey) {
			t.Errorf("%s public key: %v", name, err)
		}
	}
	// Written with "\n" as two characters, as env files carry it.
	escaped := strings.ReplaceAll(devkey.Read(t, "app_private_key.pem"), "\n", `\n`)
	if b := Blocks(escaped); len(b) != 1 {
		t.Fatalf("escaped PEM: %d blocks", len(b))
	} else if got, err := Private(b[0].Bytes); err != nil || !got.Equal(key) {
		t.Fatalf("escaped PEM: %v", err)
	}

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	notKey := errors.New("not an RSA key")
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"GarbagePrivate", func() error { _, err := Private([]byte("secret-garbage")); return err }(), "not an RSA key"},
		{"GarbagePublic", func() error { _, err := Public([]byte("secret-garbage")); return err }(), "not an RSA key"},
		{"ECPrivate", func() error { _, err := Private(ecDER); return err }(), "not an RSA key: holds a *ecdsa.PrivateKey"},
		{"ECPublic", func() error { _, err := Public(ecPub); return err }(), "not an RSA key: holds a *ecdsa.PublicKey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Wrap(notKey, c.err)
			if !errors.Is(err, notKey) || err.Error() != c.want {
				t.Fatalf("error %q, want %q wrapping the caller's", err, c.want)
			}
		})
	}
}
