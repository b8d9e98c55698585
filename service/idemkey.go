package service

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"paynotify/model"
)

// IssuedKeyPrefix starts every idempotency key IdempotencyKeys issues; a
// key without it is the client's own, taken as it is.
const IssuedKeyPrefix = "ik1."

// IdempotencyKeys issues idempotency keys to clients that cannot make their
// own (a plain HTML form, a mini-program page): a key is bound to one
// member and expires. It is stateless — the key carries its member's
// binding and its expiry under an HMAC — so issuing one writes nothing;
// the order and pay routes then take it as Idempotency-Key like any other,
// once Check says it is this member's and unexpired.
type IdempotencyKeys struct {
	secret []byte
	// TTL is how long an issued key may be used.
	TTL time.Duration
	now func() time.Time
}

// NewIdempotencyKeys returns the issuer, signing with secret (the member
// tokens' API_JWT_SECRET).
func NewIdempotencyKeys(secret []byte) *IdempotencyKeys {
	return &IdempotencyKeys{secret: secret, TTL: 24 * time.Hour, now: time.Now}
}

// Issue makes a new key for member, and says until when it may be used.
func (k *IdempotencyKeys) Issue(member int64) (string, time.Time, error) {
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return "", time.Time{}, err
	}
	exp := k.now().Add(k.TTL).Truncate(time.Second)
	body := IssuedKeyPrefix + strconv.FormatInt(exp.Unix(), 36) + "." + base64.RawURLEncoding.EncodeToString(nonce)
	return body + "." + k.mac(member, body), exp, nil
}

// Check refuses, as model.ErrInvalidRequest, an issued key (one with
// IssuedKeyPrefix) that is not member's, was not issued here, or has
// expired. A key of the client's own passes unchecked.
func (k *IdempotencyKeys) Check(member int64, key string) error {
	if !strings.HasPrefix(key, IssuedKeyPrefix) {
		return nil
	}
	body, mac, ok := cutLast(key, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(k.mac(member, body))) {
		return fmt.Errorf("%w: Idempotency-Key was not issued to this member (POST /api/v1/idempotency-keys issues one)", model.ErrInvalidRequest)
	}
	expPart, _, _ := strings.Cut(strings.TrimPrefix(body, IssuedKeyPrefix), ".")
	exp, err := strconv.ParseInt(expPart, 36, 64)
	if err != nil || !k.now().Before(time.Unix(exp, 0)) {
		return fmt.Errorf("%w: Idempotency-Key has expired (POST /api/v1/idempotency-keys issues a new one)", model.ErrInvalidRequest)
	}
	return nil
}

// mac binds body to member: 16 bytes of HMAC-SHA256, base64url.
func (k *IdempotencyKeys) mac(member int64, body string) string {
	h := hmac.New(sha256.New, k.secret)
	fmt.Fprintf(h, "idempotency-key\x00%d\x00%s", member, body)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
