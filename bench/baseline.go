package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The seed design's notify transaction in plain database/sql, statement by
// statement. Lock order: order row, then payment row.
const (
	baseLockOrder = "SELECT id, pay_amount, status FROM oms_order WHERE order_sn = ? FOR UPDATE"
	baseInsertPay = "INSERT INTO oms_order_payment (provider, trade_no, order_id, out_trade_no, amount, state, notify_id, paid_at)" +
		" VALUES (?, ?, ?, ?, ?, 'RECEIVED', ?, ?)"
	baseLockPay   = "SELECT order_id, amount, state FROM oms_order_payment WHERE provider = ? AND trade_no = ? FOR UPDATE"
	basePayOrder  = "UPDATE oms_order SET status = 1, pay_type = 1, payment_time = ? WHERE id = ? AND status = 0"
	baseApplyPay  = "UPDATE oms_order_payment SET state = 'APPLIED' WHERE provider = ? AND trade_no = ?"
	baseProvider  = "alipay"
	baseNotifyFmt = "2026113000222%09d"
)

// openBaseline opens a pool the size of the service's.
func openBaseline(ctx context.Context, dsn string, pool int) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	db.SetConnMaxLifetime(30 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// payTx applies one payment to its order the way the seed design does:
// BEGIN; lock the order; insert the payment RECEIVED; lock the payment;
// move the order 0→1; mark the payment APPLIED; COMMIT. With the driver's
// defaults every statement with arguments is a server-side prepare, an
// execute and a close (two round trips); with interpolateParams=true it is
// one text query (one round trip). The code is the same for both.
func payTx(ctx context.Context, db *sql.DB, o order, seq int) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var (
		orderID   int64
		payAmount string
		status    int
	)
	if err := tx.QueryRowContext(ctx, baseLockOrder, o.sn).Scan(&orderID, &payAmount, &status); err != nil {
		return fmt.Errorf("lock order: %w", err)
	}
	if status != 0 || payAmount != o.amount {
		return fmt.Errorf("order %s: status %d amount %s, want awaiting payment of %s", o.sn, status, payAmount, o.amount)
	}
	paidAt := time.Now().UTC().Truncate(time.Second)
	if _, err := tx.ExecContext(ctx, baseInsertPay, baseProvider, o.tradeNo, orderID, o.sn, o.amount,
		fmt.Sprintf(baseNotifyFmt, seq), paidAt); err != nil {
		return fmt.Errorf("insert payment: %w", err)
	}
	var (
		payOrderID int64
		amount     string
		state      string
	)
	if err := tx.QueryRowContext(ctx, baseLockPay, baseProvider, o.tradeNo).Scan(&payOrderID, &amount, &state); err != nil {
		return fmt.Errorf("lock payment: %w", err)
	}
	res, err := tx.ExecContext(ctx, basePayOrder, paidAt, orderID)
	if err != nil {
		return fmt.Errorf("pay order: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("pay order %s: %d rows, %v", o.sn, n, err)
	}
	if _, err := tx.ExecContext(ctx, baseApplyPay, baseProvider, o.tradeNo); err != nil {
		return fmt.Errorf("apply payment: %w", err)
	}
	return tx.Commit()
}

// baselineOps makes workers that run payTx for orders[i].
func baselineOps(db *sql.DB, orders []order) func() (op, func(), error) {
	return func() (op, func(), error) {
		return func(ctx context.Context, i int) error { return payTx(ctx, db, orders[i], i) }, func() {}, nil
	}
}
