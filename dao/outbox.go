package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm/clause"

	"paynotify/model"
)

const outboxTable = "outbox"

// outboxRecord is a row of the outbox table.
type outboxRecord struct {
	ID            int64 `gorm:"primaryKey"`
	EventID       string
	AggregateID   int64
	EventType     string
	Payload       string
	State         string
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreateTime    time.Time
	SentTime      *time.Time
}

func (outboxRecord) TableName() string { return outboxTable }

func (r outboxRecord) row() (model.OutboxRow, error) {
	var ev model.Event
	if err := json.Unmarshal([]byte(r.Payload), &ev); err != nil {
		return model.OutboxRow{}, fmt.Errorf("outbox row %d: %w", r.ID, err)
	}
	return model.OutboxRow{
		Seq: r.ID, Event: ev, State: model.OutboxState(r.State), Attempts: r.Attempts,
		NextAttemptAt: r.NextAttemptAt, LastError: r.LastError, SentTime: r.SentTime,
	}, nil
}

// insertEvents writes events to the outbox, inside the transaction of the
// change they announce: they commit, or vanish, with it.
func (s *Store) insertEvents(ctx context.Context, events ...model.Event) error {
	if len(events) == 0 {
		return nil
	}
	// Raw SQL (groupsql.go): every notification's event comes through here.
	var q strings.Builder
	q.WriteString("INSERT INTO `" + outboxTable + "` (`event_id`,`aggregate_id`,`event_type`,`payload`,`state`,`attempts`,`next_attempt_at`,`last_error`,`create_time`,`sent_time`) VALUES ")
	valuesList(&q, len(events), 10)
	args := make([]any, 0, 10*len(events))
	for _, ev := range events {
		payload, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		args = append(args, ev.ID, ev.AggregateID, string(ev.Type), string(payload), string(model.OutboxPending),
			0, ev.OccurredAt, "", ev.OccurredAt, nil)
	}
	_, err := s.exec(ctx, q.String(), args...)
	return err
}

// claimEvents claims up to limit unsent events that are due, oldest first:
// it locks them, skipping rows another relay holds (FOR UPDATE SKIP LOCKED:
// MySQL 8, MariaDB 10.6+), and pushes their next attempt a lease into the
// future. The caller commits at once and publishes outside any
// transaction; a relay that dies before marking them leaves rows that are
// due again when the lease ends.
func (s *Store) claimEvents(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]model.OutboxRow, error) {
	var recs []outboxRecord
	err := s.db.WithContext(ctx).
		Where("state IN ? AND next_attempt_at <= ?", []string{string(model.OutboxPending), string(model.OutboxFailed)}, now.UTC()).
		Order("id").Limit(limit).
		Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked}).
		Find(&recs).Error
	if err != nil || len(recs) == 0 {
		return nil, mapErr(err)
	}
	ids := make([]int64, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if err := s.db.WithContext(ctx).Model(&outboxRecord{}).Where("id IN ?", ids).
		Update("next_attempt_at", now.Add(lease).UTC()).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.OutboxRow, 0, len(recs))
	for _, r := range recs {
		row, err := r.row()
		if err != nil {
			// A payload that does not parse would fail every claim that
			// includes it: mark it FAILED for an operator, publish the rest.
			if err := s.markFailed(ctx, r.ID, r.Attempts+1, now.Add(badPayloadRetry), 0, err.Error()); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, row)
	}
	return out, nil
}

// badPayloadRetry is when an outbox row that does not parse is claimed
// again (in case an operator repaired it).
const badPayloadRetry = time.Hour

// markSent records that events were published and acknowledged.
func (s *Store) markSent(ctx context.Context, seqs []int64, now time.Time) error {
	if len(seqs) == 0 {
		return nil
	}
	return mapErr(s.db.WithContext(ctx).Model(&outboxRecord{}).Where("id IN ? AND state != ?", seqs, model.OutboxSent).
		Updates(map[string]any{"state": model.OutboxSent, "sent_time": now.UTC(), "last_error": ""}).Error)
}

// markFailed records a failed publication: one more attempt, the next one
// not before next, and FAILED once attempts reach failAfter.
func (s *Store) markFailed(ctx context.Context, seq int64, attempts int, next time.Time, failAfter int, reason string) error {
	state := model.OutboxPending
	if attempts >= failAfter {
		state = model.OutboxFailed
	}
	if len(reason) > 500 {
		reason = reason[:500]
	}
	// Never over a row another relay has marked sent meanwhile (our lease
	// may have run out).
	return mapErr(s.db.WithContext(ctx).Model(&outboxRecord{}).Where("id = ? AND state != ?", seq, model.OutboxSent).
		Updates(map[string]any{"state": state, "attempts": attempts, "next_attempt_at": next.UTC(), "last_error": reason}).Error)
}

// OutboxRows lists events in a state, oldest first, for operators.
func (s *Store) OutboxRows(ctx context.Context, state model.OutboxState, limit int) ([]model.OutboxRow, error) {
	var recs []outboxRecord
	err := s.db.WithContext(ctx).Where("state = ?", state).Order("id").Limit(limit).Find(&recs).Error
	if err != nil {
		return nil, mapErr(err)
	}
	return rows(recs)
}

// OutboxCount counts events in a state.
func (s *Store) OutboxCount(ctx context.Context, state model.OutboxState) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&outboxRecord{}).Where("state = ?", state).Count(&n).Error
	return n, mapErr(err)
}

func rows(recs []outboxRecord) ([]model.OutboxRow, error) {
	out := make([]model.OutboxRow, len(recs))
	for i, r := range recs {
		row, err := r.row()
		if err != nil {
			return nil, err
		}
		out[i] = row
	}
	return out, nil
}

// UpdateOutbox runs fn in one transaction over the outbox alone (the
// relay's claims and marks): it locks no order. Deadlocks retry as in
// UpdateOrder.
func (s *Store) UpdateOutbox(ctx context.Context, fn func(ctx context.Context, tx *OutboxTx) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		return fn(ctx, &OutboxTx{s: tx})
	})
}

// OutboxTx is a transaction over outbox rows only.
type OutboxTx struct{ s *Store }

// ClaimEvents: see Store.claimEvents.
func (tx *OutboxTx) ClaimEvents(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]model.OutboxRow, error) {
	return tx.s.claimEvents(ctx, now, lease, limit)
}

// InsertEvents writes events to the outbox.
func (tx *OutboxTx) InsertEvents(ctx context.Context, events ...model.Event) error {
	return tx.s.insertEvents(ctx, events...)
}

// MarkSent records that events were published and acknowledged.
func (tx *OutboxTx) MarkSent(ctx context.Context, seqs []int64, now time.Time) error {
	return tx.s.markSent(ctx, seqs, now)
}

// MarkFailed records a failed publication: one more attempt, the next one
// not before next, and FAILED once attempts reach failAfter.
func (tx *OutboxTx) MarkFailed(ctx context.Context, seq int64, attempts int, next time.Time, failAfter int, reason string) error {
	return tx.s.markFailed(ctx, seq, attempts, next, failAfter, reason)
}

// InsertAudit records the operator action this transaction does, with it.
func (tx *OutboxTx) InsertAudit(ctx context.Context, a model.Audit) error {
	return tx.s.insertAudit(ctx, a)
}
