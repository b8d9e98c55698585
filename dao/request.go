package dao

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

const requestTable = "oms_order_request"

var requestColumns = []string{"member_id", "idempotency_key", "request_hash", "order_id", "state", "response_status", "response"}

// insertRequest records a client request under its (member, key) unless
// one exists, and reports whether it inserted. The key is the lock: while
// the inserting transaction is open, another insert of the same key waits
// for it, then finds the committed row (or, if it rolled back, inserts).
func (s *Store) insertRequest(ctx context.Context, r model.OrderRequest) (bool, error) {
	now := time.Now().UTC()
	return s.insertOrKeep(ctx, requestTable, []string{"member_id", "idempotency_key"}, map[string]any{
		"member_id": r.MemberID, "idempotency_key": r.IdempotencyKey, "request_hash": r.RequestHash,
		"state": model.RequestProcessing, "create_time": now, "update_time": now,
	})
}

// completeRequest saves the answer of a request (PROCESSING → SUCCESS).
func (s *Store) completeRequest(ctx context.Context, r model.OrderRequest) error {
	res := s.db.WithContext(ctx).Table(requestTable).
		Where("member_id = ? AND idempotency_key = ? AND state = ?", r.MemberID, r.IdempotencyKey, model.RequestProcessing).
		Updates(map[string]any{
			"state": model.RequestSuccess, "order_id": r.OrderID, "response_status": r.ResponseStatus,
			"response": string(r.Response), "update_time": time.Now().UTC(),
		})
	if res.Error != nil {
		return mapErr(res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("%w: request %d/%q is not processing", model.ErrStateChanged, r.MemberID, r.IdempotencyKey)
	}
	return nil
}

// Request reads a request without locking.
func (s *Store) Request(ctx context.Context, memberID int64, key string) (model.OrderRequest, error) {
	return s.request(ctx, s.db, memberID, key)
}

// RequestForUpdateNoWait reads a request and locks it, in a transaction
// of its own that ends at once, failing with model.ErrRetryable if another
// transaction holds the key — which is how a request still in flight shows
// itself (MySQL 8 / MariaDB 10.3+; SQLite, with one writer, never has one
// in flight to see). It is not retried: a held key is the answer.
func (s *Store) RequestForUpdateNoWait(ctx context.Context, memberID int64, key string) (model.OrderRequest, error) {
	var r model.OrderRequest
	err := s.transact(ctx, 1, func(ctx context.Context, tx *Store) error {
		var err error
		r, err = tx.request(ctx, tx.db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsNoWait}), memberID, key)
		return err
	})
	return r, err
}

func (s *Store) request(ctx context.Context, db *gorm.DB, memberID int64, key string) (model.OrderRequest, error) {
	var row struct {
		MemberID       int64
		IdempotencyKey string
		RequestHash    string
		OrderID        *int64
		State          model.RequestState
		ResponseStatus int
		Response       *string
	}
	err := db.WithContext(ctx).Table(requestTable).Select(requestColumns).
		Where("member_id = ? AND idempotency_key = ?", memberID, key).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.OrderRequest{}, model.ErrRequestNotFound
	}
	if err != nil {
		return model.OrderRequest{}, mapErr(err)
	}
	r := model.OrderRequest{
		MemberID: row.MemberID, IdempotencyKey: row.IdempotencyKey, RequestHash: row.RequestHash,
		OrderID: row.OrderID, State: row.State, ResponseStatus: row.ResponseStatus,
	}
	if row.Response != nil {
		r.Response = []byte(*row.Response)
	}
	return r, nil
}

// insertOrKeep inserts row unless its unique key (keyCols) exists, and
// reports whether it inserted. A duplicate neither errors nor aborts the
// transaction: MySQL's ON DUPLICATE KEY UPDATE with a no-op (0 rows
// affected), SQLite's ON CONFLICT DO NOTHING. Every other error returns.
//
// The statement is the one GORM's Create(row) with that clause renders
// (columns in name order), written here: Create of a map first tries to
// parse the map as a model and formats the whole map into the error it
// then ignores, about 30 allocations of every payment's insert. Values
// must be scalars: Exec spreads a slice (a []byte too) that follows "(".
func (s *Store) insertOrKeep(ctx context.Context, table string, keyCols []string, row map[string]any) (bool, error) {
	cols := slices.Sorted(maps.Keys(row))
	args := make([]any, len(cols))
	var b strings.Builder
	b.Grow(96 + len(table) + 20*len(cols))
	b.WriteString("INSERT INTO `" + table + "` (")
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("`" + c + "`")
		args[i] = row[c]
	}
	b.WriteString(") VALUES ")
	placeholders(&b, len(cols))
	if s.driver == DriverMySQL {
		b.WriteString(" ON DUPLICATE KEY UPDATE `" + keyCols[0] + "`=`" + keyCols[0] + "`")
	} else {
		b.WriteString(" ON CONFLICT (`" + strings.Join(keyCols, "`,`") + "`) DO NOTHING")
	}
	res := s.db.WithContext(ctx).Exec(b.String(), args...)
	if res.Error != nil {
		return false, mapErr(res.Error)
	}
	return res.RowsAffected == 1, nil
}
