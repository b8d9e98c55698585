package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// kindCeiling is the database-only group ceiling: the service's group
// transactions, formed as the service forms them, from a plain
// database/sql client — no HTTP, no signature, no ORM. What the service's
// first notices can approach on this machine.
const kindCeiling = "database-only group"

// ceilingMaxGroup is the service's largest group (defaultGroupLimits).
const ceilingMaxGroup = 64

// groupClient applies payments as the service's group apply does: one
// transaction in flight; what arrives meanwhile queues, and when the
// transaction ends the queue (up to ceilingMaxGroup) is the next group,
// led by its first member. Unlike the service, a lone payment runs the
// group statements too (the service runs its one-by-one path), so this is
// a ceiling, not a model.
type groupClient struct {
	db *sql.DB

	mu    sync.Mutex
	busy  bool
	queue []*groupJob
}

type groupJob struct {
	o    order
	seq  int
	lead chan []*groupJob
	done chan error
}

func (g *groupClient) pay(ctx context.Context, o order, seq int) error {
	j := &groupJob{o: o, seq: seq, lead: make(chan []*groupJob, 1), done: make(chan error, 1)}
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return g.run(ctx, j, []*groupJob{j})
	}
	g.queue = append(g.queue, j)
	g.mu.Unlock()
	select {
	case group := <-j.lead:
		return g.run(ctx, j, group)
	case err := <-j.done:
		return err
	}
}

// run applies group, hands the queue on, and answers the members.
func (g *groupClient) run(ctx context.Context, self *groupJob, group []*groupJob) error {
	err := groupTx(ctx, g.db, group)
	g.mu.Lock()
	next := g.queue[:min(len(g.queue), ceilingMaxGroup)]
	g.queue = append([]*groupJob(nil), g.queue[len(next):]...)
	if len(next) == 0 {
		g.busy = false
	}
	g.mu.Unlock()
	if len(next) > 0 {
		next[0].lead <- next
	}
	for _, j := range group {
		if j != self {
			j.done <- err
		}
	}
	return err
}

// The group's statements, as the service renders them for MySQL
// (TestCeilingSendsTheServiceStatements holds them to the service's).
const (
	ceilLookup    = "SELECT 'p' AS src, trade_no AS k, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, 0 AS attempt_id, 0 AS attempt_no, provider, account, app FROM oms_order_payment WHERE provider = ? AND trade_no IN %s UNION ALL SELECT 'a', out_trade_no, order_id, out_trade_no, amount, state, '', '', NULL, id, attempt_no, provider, account, app FROM oms_pay_attempt WHERE out_trade_no IN %s UNION ALL SELECT 'o', order_sn, id, order_sn, pay_amount, '', '', '', NULL, 0, 0, '', '', '' FROM oms_order WHERE order_sn IN %s"
	ceilLock      = "SELECT `id`,`order_sn`,`member_id`,`pay_amount`,`status`,`pay_type`,`payment_time`,`total_amount`,`coupon_id`,`coupon_amount`,`integration`,`integration_amount`,`stock_reservation`,`create_time`,`modify_time` FROM `oms_order` WHERE id IN %s ORDER BY id FOR UPDATE"
	ceilInsertPay = "INSERT INTO `oms_order_payment` (`account`,`amount`,`app`,`create_time`,`notify_id`,`order_id`,`out_trade_no`,`paid_at`,`provider`,`reason`,`state`,`trade_no`,`update_time`) VALUES %s ON DUPLICATE KEY UPDATE `provider`=`provider`"
	ceilPayOrders = "UPDATE `oms_order` SET `modify_time`=?,`pay_type`=?,`payment_time`=%s,`status`=? WHERE id IN %s AND status = ?"
	ceilInsertOut = "INSERT INTO `outbox` (`event_id`,`aggregate_id`,`event_type`,`payload`,`state`,`attempts`,`next_attempt_at`,`last_error`,`create_time`,`sent_time`) VALUES %s"
)

// marks is "(?,?,…)" with n marks; rows repeats it.
func marks(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")" }
func rows(r, n int) string {
	return strings.TrimSuffix(strings.Repeat(marks(n)+",", r), ",")
}

// ceilingSQL is the group's statements for n members, as groupTx sends
// them.
type ceilingSQL struct{ lookup, lock, insertPay, payOrders, insertOut string }

func ceilingStatements(n int) ceilingSQL {
	when := "CASE id" + strings.Repeat(" WHEN ? THEN ?", n) + " END"
	return ceilingSQL{
		lookup:    fmt.Sprintf(ceilLookup, marks(n), marks(n), marks(n)),
		lock:      fmt.Sprintf(ceilLock, marks(n)),
		insertPay: fmt.Sprintf(ceilInsertPay, rows(n, 13)),
		payOrders: fmt.Sprintf(ceilPayOrders, when, marks(n)),
		insertOut: fmt.Sprintf(ceilInsertOut, rows(n, 10)),
	}
}

// groupTx is one group, statement for statement the service's: the
// lookup of the trades (payments, attempts and orders in one), then
// BEGIN, lock the orders in id order, insert the payments APPLIED, pay
// the orders, insert the order.paid events, COMMIT. The orders hold no
// stock reservation, so, as in the service's run, no SKU statement.
func groupTx(ctx context.Context, db *sql.DB, group []*groupJob) (err error) {
	n := len(group)
	stmt := ceilingStatements(n)
	args := make([]any, 0, 13*n)
	args = append(args, baseProvider)
	for _, j := range group {
		args = append(args, j.o.tradeNo)
	}
	for range 2 {
		for _, j := range group {
			args = append(args, j.o.sn)
		}
	}
	ids, found, err := lookUp(ctx, db, stmt.lookup, args...)
	if err != nil {
		return fmt.Errorf("look up trades: %w", err)
	}
	if found != 0 {
		return fmt.Errorf("%d of %d trades already recorded", found, n)
	}
	if len(ids) != n {
		return fmt.Errorf("%d of %d orders found", len(ids), n)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	idArgs := make([]any, 0, n)
	for _, j := range group {
		idArgs = append(idArgs, ids[j.o.sn])
	}
	locked, err := countRows(ctx, tx, stmt.lock, idArgs...)
	if err != nil || locked != n {
		return fmt.Errorf("lock orders: %d of %d, %v", locked, n, err)
	}
	now := time.Now().UTC()
	paidAt := now.Truncate(time.Second)
	args = args[:0]
	for _, j := range group {
		args = append(args, benchSellerID, j.o.amount, benchAppID, now, fmt.Sprintf(baseNotifyFmt, j.seq), ids[j.o.sn], j.o.sn, paidAt,
			baseProvider, "", "APPLIED", j.o.tradeNo, now)
	}
	if _, err := tx.ExecContext(ctx, stmt.insertPay, args...); err != nil {
		return fmt.Errorf("insert payments: %w", err)
	}
	args = append(args[:0], now, 1)
	for _, j := range group {
		args = append(args, ids[j.o.sn], paidAt)
	}
	args = append(args, 1)
	args = append(args, idArgs...)
	args = append(args, 0)
	res, err := tx.ExecContext(ctx, stmt.payOrders, args...)
	if err != nil {
		return fmt.Errorf("pay orders: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || int(k) != n {
		return fmt.Errorf("pay orders: %d of %d, %v", k, n, err)
	}
	args = args[:0]
	for _, j := range group {
		payload, err := json.Marshal(ceilingEvent{ID: j.o.tradeNo, Type: "order.paid", OrderID: ids[j.o.sn], OrderSN: j.o.sn,
			Provider: baseProvider, TradeNo: j.o.tradeNo, Amount: j.o.amount, At: now})
		if err != nil {
			return err
		}
		args = append(args, "ceiling-"+j.o.tradeNo, ids[j.o.sn], "order.paid", string(payload), "PENDING", 0, now, "", now, nil)
	}
	if _, err := tx.ExecContext(ctx, stmt.insertOut, args...); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	return tx.Commit()
}

// ceilingEvent is an outbox payload of the size of the service's.
type ceilingEvent struct {
	ID       string    `json:"id"`
	Type     string    `json:"type"`
	OrderID  int64     `json:"order_id"`
	OrderSN  string    `json:"order_sn"`
	Provider string    `json:"provider"`
	TradeNo  string    `json:"trade_no"`
	Amount   string    `json:"amount"`
	At       time.Time `json:"occurred_at"`
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// countRows runs a query and reads (and counts) every row it returns.
func countRows(ctx context.Context, q querier, query string, args ...any) (int, error) {
	rs, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return 0, err
	}
	vals := make([]sql.RawBytes, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	n := 0
	for rs.Next() {
		if err := rs.Scan(dest...); err != nil {
			return n, err
		}
		n++
	}
	return n, rs.Err()
}

// lookUp reads the lookup: order ids by order_sn (its 'o' rows), and how
// many payments it found.
func lookUp(ctx context.Context, db *sql.DB, query string, args ...any) (ids map[string]int64, payments int, err error) {
	rs, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rs.Close()
	ids = map[string]int64{}
	for rs.Next() {
		var (
			src, k, out, amount, state, reason, notifyID string
			prov, account, app                           string
			orderID, attemptID, attemptNo                int64
			paidAt                                       sql.NullTime
		)
		if err := rs.Scan(&src, &k, &orderID, &out, &amount, &state, &reason, &notifyID, &paidAt, &attemptID, &attemptNo, &prov, &account, &app); err != nil {
			return nil, 0, err
		}
		switch src {
		case "o":
			ids[k] = orderID
		case "p":
			payments++
		}
	}
	return ids, payments, rs.Err()
}

// ceilingOps makes workers that pay orders[i] through one groupClient.
func ceilingOps(g *groupClient, orders []order) func() (op, func(), error) {
	return func() (op, func(), error) {
		return func(ctx context.Context, i int) error { return g.pay(ctx, orders[i], i) }, func() {}, nil
	}
}
