package dao

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// The notify path's hot statements — the group lookup and the group
// transaction's few statements (UpdateOrders and OrdersTx) — run through
// database/sql on the store's own connection or transaction, with their
// SQL built here, not by GORM: no reflection, no callbacks, one round trip
// each (the MySQL DSN interpolates parameters client-side, so nothing is
// prepared on the server). They render the SQL GORM rendered, so the
// statements tests pin are the same. GORM stays everywhere else.

// conn is what s runs raw statements on: its transaction inside one, its
// pool outside. Used with the context of a transaction it is not bound
// to, it refuses, as every GORM statement does (refuseInTx).
func (s *Store) conn(ctx context.Context) (gorm.ConnPool, error) {
	pool := s.db.Statement.ConnPool
	if inTx(ctx) {
		if _, onTx := pool.(*sql.Tx); !onTx {
			if _, committer := pool.(gorm.TxCommitter); !committer {
				return nil, ErrInTx
			}
		}
	}
	return pool, nil
}

// exec runs one raw statement and says how many rows it changed.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return 0, err
	}
	s.traced(query)
	res, err := c.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n, mapErr(err)
}

// query runs one raw query.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	s.traced(query)
	return c.QueryContext(ctx, query, args...)
}

// placeholders writes "(?,?,…)" with n marks.
func placeholders(b *strings.Builder, n int) {
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
	}
	b.WriteByte(')')
}

// valuesList writes rows tuples of cols marks each: "(?,?),(?,?)".
func valuesList(b *strings.Builder, rows, cols int) {
	for r := range rows {
		if r > 0 {
			b.WriteByte(',')
		}
		placeholders(b, cols)
	}
}

// caseID writes "CASE id WHEN ? THEN ? … END" for n ids.
func caseID(b *strings.Builder, n int) {
	b.WriteString("CASE id")
	for range n {
		b.WriteString(" WHEN ? THEN ?")
	}
	b.WriteString(" END")
}

// selectList is "`a`,`b`,…" for cols.
func selectList(cols []string) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "`%s`", c)
	}
	return b.String()
}
