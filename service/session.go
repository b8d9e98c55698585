package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Sessions signs console operators in and out. Who an operator is, and
// their password, the console checks; this keeps the sessions, and records
// every sign-in and sign-out in admin_audit with the session's change.
type Sessions struct {
	store *dao.Store
	// TTL is how long a session lasts from sign-in.
	TTL time.Duration
	now func() time.Time
}

// DefaultZone is the zone the console shows times in until an operator
// picks another.
const DefaultZone = "Asia/Shanghai"

// NewSessions returns the session store over store.
func NewSessions(store *dao.Store, ttl time.Duration) *Sessions {
	return &Sessions{store: store, TTL: ttl, now: time.Now}
}

// SignIn opens a session for an operator whose password the caller has
// checked, and returns the token for the cookie (only its hash is stored).
func (s *Sessions) SignIn(ctx context.Context, operator string) (string, model.Session, error) {
	token, err := randomHex(32)
	if err != nil {
		return "", model.Session{}, err
	}
	csrf, err := randomHex(32)
	if err != nil {
		return "", model.Session{}, err
	}
	key, err := randomHex(16)
	if err != nil {
		return "", model.Session{}, err
	}
	ses := model.Session{TokenHash: TokenHash(token), Operator: operator, CSRFToken: csrf, TimeZone: DefaultZone,
		ExpiresAt: s.now().Add(s.TTL).UTC()}
	err = s.store.UpdateSession(ctx, func(ctx context.Context, tx *dao.SessionTx) error {
		if err := tx.InsertSession(ctx, ses); err != nil {
			return err
		}
		return tx.InsertAudit(ctx, model.Audit{Key: "signin-" + key, Operator: operator, Action: model.AuditSignIn,
			TargetKind: model.TargetSession, After: "signed in until " + ses.ExpiresAt.Format(time.RFC3339)})
	})
	return token, ses, err
}

// Session finds the unexpired session of a cookie's token.
func (s *Sessions) Session(ctx context.Context, token string) (model.Session, error) {
	if len(token) != 64 {
		return model.Session{}, model.ErrNoSession
	}
	return s.store.Session(ctx, TokenHash(token), s.now())
}

// SignOut ends a session.
func (s *Sessions) SignOut(ctx context.Context, ses model.Session) error {
	key, err := randomHex(16)
	if err != nil {
		return err
	}
	return s.store.UpdateSession(ctx, func(ctx context.Context, tx *dao.SessionTx) error {
		if err := tx.DeleteSession(ctx, ses.TokenHash); err != nil {
			return err
		}
		return tx.InsertAudit(ctx, model.Audit{Key: "signout-" + key, Operator: ses.Operator, Action: model.AuditSignOut,
			TargetKind: model.TargetSession, Before: "signed in"})
	})
}

// SetZone stores the time zone a session shows times in; the caller has
// checked that it loads.
func (s *Sessions) SetZone(ctx context.Context, ses model.Session, zone string) error {
	return s.store.SetSessionZone(ctx, ses.TokenHash, zone)
}

// TokenHash is what is stored of a session token.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
