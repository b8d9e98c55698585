package dao

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"paynotify/model"
)

const sessionTable = "console_session"

// sessionRecord is a row of console_session.
type sessionRecord struct {
	TokenHash  string `gorm:"primaryKey"`
	Operator   string
	CSRFToken  string `gorm:"column:csrf_token"`
	TimeZone   string
	ExpiresAt  time.Time
	CreateTime time.Time
}

func (sessionRecord) TableName() string { return sessionTable }

// insertSession records a signed-in operator's session (by the hash of its
// token) and drops sessions that have expired.
func (s *Store) insertSession(ctx context.Context, ses model.Session) error {
	now := time.Now().UTC()
	if err := s.db.WithContext(ctx).Where("expires_at < ?", now).Delete(&sessionRecord{}).Error; err != nil {
		return mapErr(err)
	}
	return mapErr(s.db.WithContext(ctx).Create(&sessionRecord{
		TokenHash: ses.TokenHash, Operator: ses.Operator, CSRFToken: ses.CSRFToken, TimeZone: ses.TimeZone,
		ExpiresAt: ses.ExpiresAt.UTC(), CreateTime: now,
	}).Error)
}

// Session reads an unexpired session by the hash of its token.
func (s *Store) Session(ctx context.Context, tokenHash string, now time.Time) (model.Session, error) {
	var r sessionRecord
	err := s.db.WithContext(ctx).Where("token_hash = ? AND expires_at > ?", tokenHash, now.UTC()).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.Session{}, model.ErrNoSession
	}
	return model.Session{TokenHash: r.TokenHash, Operator: r.Operator, CSRFToken: r.CSRFToken, TimeZone: r.TimeZone,
		ExpiresAt: r.ExpiresAt, CreateTime: r.CreateTime}, mapErr(err)
}

// deleteSession ends a session.
func (s *Store) deleteSession(ctx context.Context, tokenHash string) error {
	return mapErr(s.db.WithContext(ctx).Where("token_hash = ?", tokenHash).Delete(&sessionRecord{}).Error)
}

// SetSessionZone stores the time zone a session shows times in.
func (s *Store) SetSessionZone(ctx context.Context, tokenHash, zone string) error {
	return mapErr(s.db.WithContext(ctx).Model(&sessionRecord{}).Where("token_hash = ?", tokenHash).
		Update("time_zone", zone).Error)
}

// UpdateSession runs fn in one transaction over console sessions and the
// audit trail: it locks no order. Deadlocks retry as in UpdateOrder.
func (s *Store) UpdateSession(ctx context.Context, fn func(ctx context.Context, tx *SessionTx) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		return fn(ctx, &SessionTx{s: tx})
	})
}

// SessionTx is a transaction over console sessions and admin_audit only.
type SessionTx struct{ s *Store }

// InsertSession records a signed-in operator's session (by the hash of its
// token) and drops sessions that have expired.
func (tx *SessionTx) InsertSession(ctx context.Context, ses model.Session) error {
	return tx.s.insertSession(ctx, ses)
}

// DeleteSession ends a session.
func (tx *SessionTx) DeleteSession(ctx context.Context, tokenHash string) error {
	return tx.s.deleteSession(ctx, tokenHash)
}

// InsertAudit records the operator action this transaction does, with it.
func (tx *SessionTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}
