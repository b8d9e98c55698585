package service

import (
	"errors"
	"testing"
	"time"

	"paynotify/model"
)

// An issued key is its member's until it expires: then, or for another
// member, or altered, Check refuses it; a client's own key passes.
func TestIdempotencyKeysCheck(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	k := NewIdempotencyKeys([]byte("secret-0123456789abcdef-0123456789"))
	k.now = func() time.Time { return now }
	key, exp, err := k.Issue(7)
	if err != nil || !exp.Equal(now.Add(24*time.Hour)) || !model.ValidIdempotencyKey(key) {
		t.Fatalf("Issue = %q, %v, %v", key, exp, err)
	}
	if err := k.Check(7, key); err != nil {
		t.Fatalf("its member's key refused: %v", err)
	}
	if err := k.Check(7, "order-2026-0001"); err != nil {
		t.Fatalf("a key of the client's own refused: %v", err)
	}
	other := NewIdempotencyKeys([]byte("another-secret-0123456789abcdef-01"))
	for name, check := range map[string]func() error{
		"AnotherMember": func() error { return k.Check(8, key) },
		"AnotherSecret": func() error { return other.Check(7, key) },
		"Altered":       func() error { return k.Check(7, key[:len(IssuedKeyPrefix)]+"z"+key[len(IssuedKeyPrefix)+1:]) },
		"NoMAC":         func() error { return k.Check(7, IssuedKeyPrefix+"abc") },
		"Expired": func() error {
			k.now = func() time.Time { return exp }
			defer func() { k.now = func() time.Time { return now } }()
			return k.Check(7, key)
		},
	} {
		if err := check(); !errors.Is(err, model.ErrInvalidRequest) {
			t.Errorf("%s: Check = %v, want ErrInvalidRequest", name, err)
		}
	}
}
