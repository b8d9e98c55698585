package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// seedBatch is how many orders one INSERT carries.
const seedBatch = 1000

// dsnFor returns server's DSN with database name set; tweak may adjust
// driver options (nil leaves the driver's defaults).
func dsnFor(server *mysql.Config, name string, tweak func(*mysql.Config)) string {
	c := server.Clone()
	c.DBName = name
	if tweak != nil {
		tweak(c)
	}
	return c.FormatDSN()
}

// createDatabase makes an empty database, replacing a leftover of the same
// name from an interrupted run.
func createDatabase(ctx context.Context, admin *sql.DB, name string) error {
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return err
	}
	_, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4")
	return err
}

func dropDatabase(ctx context.Context, admin *sql.DB, name string) error {
	_, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	return err
}

// seedOrders inserts orders awaiting payment with plain SQL, in batches.
func seedOrders(ctx context.Context, db *sql.DB, orders []order) error {
	for start := 0; start < len(orders); start += seedBatch {
		batch := orders[start:min(start+seedBatch, len(orders))]
		var q strings.Builder
		q.WriteString("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES ")
		args := make([]any, 0, 3*len(batch))
		for i, o := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?)")
			args = append(args, o.sn, o.memberID, o.amount)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("seed orders: %w", err)
		}
	}
	return nil
}

// serverCounters reads the server-wide statement counters, so a cell can
// report how many statements (and how many server-side prepares) one
// request cost. Other clients of the same server would inflate them.
func serverCounters(ctx context.Context, admin *sql.DB) (questions, prepares int64, err error) {
	rows, err := admin.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_stmt_prepare')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, 0, err
		}
		switch name {
		case "Questions":
			questions = v
		case "Com_stmt_prepare":
			prepares = v
		}
	}
	return questions, prepares, rows.Err()
}

// checkApplied verifies the invariant the service promises: each order sent
// has exactly one APPLIED payment and is paid, and nothing else was
// recorded. It returns a description of any violation.
func checkApplied(ctx context.Context, db *sql.DB, sent int) (string, error) {
	var payments, applied, paid int
	err := db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM oms_order_payment),
		(SELECT COUNT(*) FROM oms_order_payment WHERE state = 'APPLIED'),
		(SELECT COUNT(*) FROM oms_order WHERE status = 1)`).Scan(&payments, &applied, &paid)
	if err != nil {
		return "", err
	}
	if payments != sent || applied != sent || paid != sent {
		return fmt.Sprintf("%d distinct notices sent, but %d payments recorded, %d APPLIED, %d orders paid", sent, payments, applied, paid), nil
	}
	return "", nil
}
