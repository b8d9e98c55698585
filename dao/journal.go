package dao

import (
	"context"
	"sort"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// recordOnce inserts a business key into idempotent_log and reports
// whether it was new. A consumer calls it in the transaction that does the
// work: a second delivery finds the key and does nothing.
func (s *Store) recordOnce(ctx context.Context, businessKey string) (bool, error) {
	return s.insertOrKeep(ctx, "idempotent_log", []string{"business_key"}, map[string]any{
		"business_key": businessKey, "create_time": time.Now().UTC(),
	})
}

// insertJournal writes journal lines.
func (s *Store) insertJournal(ctx context.Context, lines []model.JournalLine) error {
	rows := make([]map[string]any, len(lines))
	now := time.Now().UTC()
	for i, l := range lines {
		rows[i] = map[string]any{
			"event_id": l.EventID, "event_type": string(l.EventType), "order_id": l.OrderID, "order_sn": l.OrderSN,
			"account": l.Account, "debit": l.Debit.StringFixed(2), "credit": l.Credit.StringFixed(2), "create_time": now,
		}
	}
	return mapErr(s.db.WithContext(ctx).Table("journal_entry").Create(rows).Error)
}

// JournalLines lists the journal lines of one order (or all, for orderID 0).
func (s *Store) JournalLines(ctx context.Context, orderID int64) ([]model.JournalLine, error) {
	var lines []model.JournalLine
	q := s.db.WithContext(ctx).Table("journal_entry").
		Select("event_id", "event_type", "order_id", "order_sn", "account", "debit", "credit").Order("id")
	if orderID != 0 {
		q = q.Where("order_id = ?", orderID)
	}
	return lines, mapErr(q.Find(&lines).Error)
}

// JournalTotals sums debits and credits per account. It adds in Go, with
// decimals: SQLite would sum its text amounts as floats.
func (s *Store) JournalTotals(ctx context.Context) ([]model.AccountTotal, error) {
	rows, err := s.db.WithContext(ctx).Table("journal_entry").Select("account", "debit", "credit").Rows()
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	by := map[string]*model.AccountTotal{}
	for rows.Next() {
		var account string
		var debit, credit decimal.Decimal
		if err := rows.Scan(&account, &debit, &credit); err != nil {
			return nil, mapErr(err)
		}
		t := by[account]
		if t == nil {
			t = &model.AccountTotal{Account: account}
			by[account] = t
		}
		t.Debit, t.Credit = t.Debit.Add(debit), t.Credit.Add(credit)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.AccountTotal, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out, nil
}

// UpdateJournal runs fn in one transaction over the consumer's
// de-duplication log and the journal: it locks no order. Deadlocks retry
// as in UpdateOrder.
func (s *Store) UpdateJournal(ctx context.Context, fn func(ctx context.Context, tx *JournalTx) error) error {
	return s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		return fn(ctx, &JournalTx{s: tx})
	})
}

// JournalTx is a transaction over idempotent_log and journal_entry only.
type JournalTx struct{ s *Store }

// RecordOnce inserts a business key into idempotent_log and reports
// whether it was new: a second delivery finds the key and does nothing.
func (tx *JournalTx) RecordOnce(ctx context.Context, businessKey string) (bool, error) {
	return tx.s.recordOnce(ctx, businessKey)
}

// InsertJournal writes journal lines.
func (tx *JournalTx) InsertJournal(ctx context.Context, lines []model.JournalLine) error {
	return tx.s.insertJournal(ctx, lines)
}
