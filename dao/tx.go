package dao

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

// ErrInTx says a Store method, or a second entry point, was called with
// the context of a transaction in progress. Inside a transaction only the
// transaction's own methods may be used: the outer Store would run on
// another connection (on SQLite, waiting forever for the one the
// transaction holds) or take locks out of order.
var ErrInTx = errors.New("dao: the Store was used inside a transaction: use the transaction's own methods")

// ErrLockOrder says a transaction asked for a row out of the lock order.
var ErrLockOrder = errors.New("dao: lock order violated")

// maxTxAttempts bounds how often a deadlocked or lock-timed-out
// transaction runs inside one call before the caller is told to retry
// (model.ErrRetryable).
const maxTxAttempts = 3

// txKey marks a context as inside a transaction opened by an entry point.
type txKey struct{}

func inTx(ctx context.Context) bool { return ctx.Value(txKey{}) != nil }

// refuseInTx is a GORM callback run before every statement: a statement
// whose context is inside a transaction must run on that transaction.
// Anything else is the outer Store used from inside the callback.
func refuseInTx(db *gorm.DB) {
	if db.Statement.Context == nil || !inTx(db.Statement.Context) {
		return
	}
	if _, onTx := db.Statement.ConnPool.(gorm.TxCommitter); onTx {
		return
	}
	_ = db.AddError(ErrInTx)
}

// guardTx registers refuseInTx before every kind of statement.
func guardTx(db *gorm.DB) error {
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Query().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Update().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Delete().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Row().Before("*").Register("dao:refuse_in_tx", refuseInTx),
		cb.Raw().Before("*").Register("dao:refuse_in_tx", refuseInTx),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// transact runs fn in one transaction — again on model.ErrRetryable, up to
// tries times, never past ctx's deadline — handing it a context marked as
// inside the transaction and a Store bound to it. fn's error rolls
// everything back; so does a failed commit. It is the only place a
// transaction begins: the exported entry points below wrap it.
func (s *Store) transact(ctx context.Context, tries int, fn func(ctx context.Context, tx *Store) error) error {
	if inTx(ctx) {
		return fmt.Errorf("%w (a transaction inside a transaction)", ErrInTx)
	}
	ctx = context.WithValue(ctx, txKey{}, true)
	var err error
	for attempt := 1; attempt <= tries; attempt++ {
		s.traced("BEGIN")
		err = mapErr(s.db.WithContext(ctx).Transaction(func(db *gorm.DB) error {
			return fn(ctx, &Store{db: db, driver: s.driver, ready: s.ready, trace: s.trace})
		}))
		if err == nil {
			s.traced("COMMIT")
		} else {
			s.traced("ROLLBACK")
		}
		if !errors.Is(err, model.ErrRetryable) || attempt == tries || !retryPause(ctx, attempt) {
			return err
		}
	}
	return err
}

// retryPause waits before attempt+1 of something that collided (a short,
// growing pause lets the transaction we collided with finish), and says
// false if ctx ended first.
func retryPause(ctx context.Context, attempt int) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		return true
	}
}

// statement runs one autocommit statement (stmt on s's connection pool)
// and says how many rows it affected — again on model.ErrRetryable, up
// to maxTxAttempts times, never past ctx's deadline, as transact runs a
// transaction. A statement that lost a deadlock, or on Galera lost
// certification to another node's write of the same rows (1213, once
// the server's own wsrep_retry_autocommit is spent), was rolled back and
// changed nothing, so running it again is safe; it then finds what the
// winner left.
func (s *Store) statement(ctx context.Context, stmt func(db *gorm.DB) *gorm.DB) (int, error) {
	for attempt := 1; ; attempt++ {
		res := stmt(s.db.WithContext(ctx))
		err := mapErr(res.Error)
		if err == nil {
			return int(res.RowsAffected), nil
		}
		if !errors.Is(err, model.ErrRetryable) || attempt == maxTxAttempts || !retryPause(ctx, attempt) {
			return 0, err
		}
	}
}

func (s *Store) traced(sql string) {
	if s.trace != nil {
		s.trace(sql)
	}
}

// Lock is how an entry point locks the row it starts from.
type Lock int

const (
	// ForUpdate waits for the row (SELECT … FOR UPDATE).
	ForUpdate Lock = iota
	// ForUpdateSkipLocked takes the row only if no other transaction holds
	// it (FOR UPDATE SKIP LOCKED: MySQL 8, MariaDB 10.6+); a held row is
	// model.ErrOrderNotFound, as if absent — someone else is working on it.
	// SQLite, with one writer, never has a row held.
	ForUpdateSkipLocked
)

func (l Lock) clause() clause.Locking {
	if l == ForUpdateSkipLocked {
		return clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked}
	}
	return clause.Locking{Strength: clause.LockingStrengthUpdate}
}

// rank is a row's place in the lock order: request key → order row →
// the order's own rows (payments, attempts, refunds) → SKU rows in
// ascending id → coupon → member. Outbox rows are new rows, written at
// any point.
type rank int

const (
	rankOrderRows rank = iota
	rankSKU
	rankCoupon
	rankMember
)

var rankNames = [...]string{"the order's own rows", "SKU rows", "a coupon", "a member"}

// lockOrder refuses a step back in the lock order within one transaction.
type lockOrder struct{ at rank }

func (l *lockOrder) step(r rank) error {
	if r < l.at {
		return fmt.Errorf("%w: %s after %s", ErrLockOrder, rankNames[r], rankNames[l.at])
	}
	l.at = r
	return nil
}
