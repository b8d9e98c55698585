package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// secretPrefix starts every signing secret, as Standard Webhooks has it.
const secretPrefix = "whsec_"

// secretBytes is how many random bytes a new secret has (the
// specification allows 24 to 64).
const secretBytes = 32

// NewSecret is a new signing secret: whsec_ and base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on a supported platform
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Keyring seals signing secrets for the database under the key of
// WEBHOOK_SECRET_KEY (AES-256-GCM, a fresh nonce each), so that a dump
// of the database alone signs nothing.
type Keyring struct {
	aead cipher.AEAD
}

// ErrBadKey: WEBHOOK_SECRET_KEY is not base64 of 32 bytes.
var ErrBadKey = errors.New("want base64 of 32 random bytes (openssl rand -base64 32)")

// NewKeyring reads a key given as base64 of 32 bytes.
func NewKeyring(key string) (*Keyring, error) {
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 32 {
		return nil, ErrBadKey
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Keyring{aead: aead}, nil
}

// sealedAAD binds a sealed value to what it is.
var sealedAAD = []byte("paynotify webhook signing secret")

// Seal encrypts a secret for storage: base64 of nonce and ciphertext.
func (k *Keyring) Seal(secret string) string {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(k.aead.Seal(nonce, nonce, []byte(secret), sealedAAD))
}

// Open decrypts what Seal sealed; another key's seal is an error.
func (k *Keyring) Open(sealed string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < k.aead.NonceSize() {
		return "", errors.New("sealed webhook secret: not ours")
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, raw[:n], raw[n:], sealedAAD)
	if err != nil {
		return "", fmt.Errorf("sealed webhook secret: %w (was WEBHOOK_SECRET_KEY changed?)", err)
	}
	return string(plain), nil
}
