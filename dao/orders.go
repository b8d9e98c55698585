package dao

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// Trades is what a group of notifications needs before its transaction,
// read without locking (TradesLookup). Rows are never deleted, so what it
// finds stays found.
type Trades struct {
	// Payments are the payments already recorded, by trade_no.
	Payments map[string]model.Payment
	// Attempts are the payment attempts named by out_trade_no, and Orders
	// the order ids by order_sn, for the trades' out_trade_nos.
	Attempts map[string]model.PayAttempt
	Orders   map[string]int64
}

// TradesLookup is TradeLookup for many notifications at once, and resolves
// the out_trade_nos that are order numbers to order ids as well, without a
// lock, with one statement: the payments of the trades, and the attempts
// and orders their out_trade_nos name. A group of first notices pays for
// one round trip before its transaction, not two; a group of duplicates
// reads a few index entries more than it needs, but the duplicate cache
// answers most of those before any group.
func (s *Store) TradesLookup(ctx context.Context, provider model.Provider, tradeNos, outTradeNos []string) (Trades, error) {
	t := Trades{Payments: map[string]model.Payment{}, Attempts: map[string]model.PayAttempt{}, Orders: map[string]int64{}}
	var sns []string // the out_trade_nos, once each
	for _, sn := range outTradeNos {
		if !slices.Contains(sns, sn) {
			sns = append(sns, sn)
		}
	}
	var q strings.Builder
	q.WriteString("SELECT 'p' AS src, trade_no AS k, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, 0 AS attempt_id, 0 AS attempt_no, provider, account, app FROM oms_order_payment WHERE provider = ? AND trade_no IN ")
	placeholders(&q, len(tradeNos))
	q.WriteString(" UNION ALL SELECT 'a', out_trade_no, order_id, out_trade_no, amount, state, '', '', NULL, id, attempt_no, provider, account, app FROM oms_pay_attempt WHERE out_trade_no IN ")
	placeholders(&q, len(sns))
	q.WriteString(" UNION ALL SELECT 'o', order_sn, id, order_sn, pay_amount, '', '', '', NULL, 0, 0, '', '', '' FROM oms_order WHERE order_sn IN ")
	placeholders(&q, len(sns))
	args := make([]any, 0, 1+len(tradeNos)+2*len(sns))
	args = append(args, string(provider))
	for _, tn := range tradeNos {
		args = append(args, tn)
	}
	for range 2 {
		for _, sn := range sns {
			args = append(args, sn)
		}
	}
	return t, s.scanTrades(ctx, &t, provider, q.String(), args...)
}

// scanTrades runs TradesLookup's statement into t.
func (s *Store) scanTrades(ctx context.Context, t *Trades, provider model.Provider, query string, args ...any) error {
	rows, err := s.query(ctx, query, args...)
	if matchesNothing(err) {
		return nil
	}
	if err != nil {
		return mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			src, k, out, state, reason, notifyID string
			prov, account, app                   string
			orderID                              sql.NullInt64 // NULL: an UNMATCHED payment
			attemptID                            int64
			attemptNo                            int
			amount                               decimal.Decimal
			paidAt                               *time.Time
		)
		if err := rows.Scan(&src, &k, &orderID, &out, &amount, &state, &reason, &notifyID, &paidAt, &attemptID, &attemptNo,
			&prov, &account, &app); err != nil {
			return mapErr(err)
		}
		switch src {
		case "p":
			t.Payments[k] = model.Payment{Provider: provider, Account: account, App: app, TradeNo: k, OrderID: orderID.Int64,
				OutTradeNo: out, Amount: amount, State: model.PaymentState(state), Reason: model.RefundReason(reason),
				NotifyID: notifyID, PaidAt: paidAt}
		case "a":
			t.Attempts[k] = model.PayAttempt{ID: attemptID, OrderID: orderID.Int64, AttemptNo: attemptNo,
				Provider: model.Provider(prov), Account: account, App: app, OutTradeNo: out, Amount: amount,
				State: model.AttemptState(state)}
		default:
			t.Orders[k] = orderID.Int64
		}
	}
	return mapErr(rows.Err())
}

// UpdateOrders is UpdateOrder for a group of orders, for the notify path's
// group apply. In one transaction it locks the order rows with one
// statement, in ascending id (SELECT … WHERE id IN (…) ORDER BY id FOR
// UPDATE), and runs fn with the orders found (ascending id; absent ids are
// left out) and an OrdersTx that reaches only those orders' payments and
// attempts, then their SKU rows once, in ascending id, and the outbox.
// fn's error rolls everything back.
//
// Unlike UpdateOrder it does not retry: a deadlock or lock-wait timeout is
// model.ErrRetryable at once, and the caller applies the group's members
// one by one instead, each with its own retries.
func (s *Store) UpdateOrders(ctx context.Context, ids []int64, fn func(ctx context.Context, tx *OrdersTx, orders []model.Order) error) error {
	return s.transact(ctx, 1, func(ctx context.Context, tx *Store) error {
		orders, err := tx.ordersForUpdate(ctx, ids)
		if err != nil {
			return err
		}
		otx := &OrdersTx{s: tx, orders: map[int64]model.Order{}}
		for _, o := range orders {
			otx.orders[o.ID] = o
		}
		return fn(ctx, otx, orders)
	})
}

// ordersForUpdate reads the orders with these ids and locks their rows, in
// ascending id, with one statement (SQLite locks the whole database at
// BEGIN IMMEDIATE instead).
func (s *Store) ordersForUpdate(ctx context.Context, ids []int64) ([]model.Order, error) {
	var q strings.Builder
	q.WriteString("SELECT " + orderSelectList + " FROM `" + orderTable + "` WHERE id IN ")
	placeholders(&q, len(ids))
	q.WriteString(" ORDER BY id")
	if s.driver == DriverMySQL {
		q.WriteString(" FOR UPDATE")
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := s.query(ctx, q.String(), args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	orders := make([]model.Order, 0, len(ids))
	for rows.Next() {
		var o model.Order
		if err := rows.Scan(&o.ID, &o.OrderSN, &o.MemberID, &o.PayAmount, &o.Status, &o.PayType, &o.PaymentTime,
			&o.TotalAmount, &o.CouponID, &o.CouponAmount, &o.Integration, &o.IntegrationAmount, &o.StockReservation,
			&o.CreateTime, &o.ModifyTime); err != nil {
			return nil, mapErr(err)
		}
		orders = append(orders, o)
	}
	return orders, mapErr(rows.Err())
}

// orderSelectList is orderColumns as a select list.
var orderSelectList = selectList(orderColumns)

// OrdersTx is a transaction that holds the row locks of a group of
// orders. Like OrderTx it reaches their payments and attempts, then SKU
// rows (once, in ascending id), in that order — a step back is
// ErrLockOrder — and the outbox; nothing on it locks another order. It is
// valid only inside the UpdateOrders callback that received it.
type OrdersTx struct {
	s      *Store
	orders map[int64]model.Order
	sold   bool
	lockOrder
}

// own refuses a row that names an order this transaction does not hold.
func (tx *OrdersTx) own(orderID int64) error {
	if _, ok := tx.orders[orderID]; !ok {
		return fmt.Errorf("%w: a row of order %d in a transaction that does not hold it", ErrLockOrder, orderID)
	}
	return nil
}

// InsertPayments records payments of the held orders with one multi-row
// insert, each unless one with the same (provider, trade_no) exists, and
// reports how many it inserted: fewer than len(ps) means some trade was
// recorded meanwhile, and the caller should roll back.
func (tx *OrdersTx) InsertPayments(ctx context.Context, ps []model.Payment) (int, error) {
	if err := tx.step(rankOrderRows); err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	var q strings.Builder
	q.WriteString("INSERT INTO `" + paymentTable + "` (`account`,`amount`,`app`,`create_time`,`notify_id`,`order_id`,`out_trade_no`,`paid_at`,`provider`,`reason`,`state`,`trade_no`,`update_time`) VALUES ")
	valuesList(&q, len(ps), 13)
	if tx.s.driver == DriverMySQL {
		// A no-op update: 0 rows affected for a trade that exists.
		q.WriteString(" ON DUPLICATE KEY UPDATE `provider`=`provider`")
	} else {
		q.WriteString(" ON CONFLICT (`provider`,`trade_no`) DO NOTHING")
	}
	args := make([]any, 0, 13*len(ps))
	for _, p := range ps {
		if err := tx.own(p.OrderID); err != nil {
			return 0, err
		}
		var paidAt any // NULL
		if p.PaidAt != nil {
			paidAt = *p.PaidAt
		}
		args = append(args, p.Account, p.Amount.StringFixed(2), p.App, now, p.NotifyID, p.OrderID, p.OutTradeNo, paidAt,
			string(p.Provider), string(p.Reason), string(p.State), p.TradeNo, now)
	}
	n, err := tx.s.exec(ctx, q.String(), args...)
	return int(n), err
}

// MarkAttemptsPaid moves the held orders' attempts with these
// out_trade_nos to PAID (from OPEN or CLOSED), with one statement.
func (tx *OrdersTx) MarkAttemptsPaid(ctx context.Context, outTradeNos []string) error {
	if err := tx.step(rankOrderRows); err != nil {
		return err
	}
	ids := tx.ids()
	var q strings.Builder
	q.WriteString("UPDATE `" + attemptTable + "` SET `state`=?,`update_time`=? WHERE out_trade_no IN ")
	placeholders(&q, len(outTradeNos))
	q.WriteString(" AND order_id IN ")
	placeholders(&q, len(ids))
	q.WriteString(" AND state IN (?,?)")
	args := make([]any, 0, 4+len(outTradeNos)+len(ids))
	args = append(args, string(model.AttemptPaid), time.Now().UTC())
	for _, o := range outTradeNos {
		args = append(args, o)
	}
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, string(model.AttemptOpen), string(model.AttemptClosed))
	_, err := tx.s.exec(ctx, q.String(), args...)
	return err
}

// MarkOrdersPaid moves held orders from awaiting payment to paid with
// payType (compare-and-set 0→1), each with its payment time, with one
// statement. Finding any of them in another state is model.ErrStateChanged.
func (tx *OrdersTx) MarkOrdersPaid(ctx context.Context, payType model.PayType, paidAt map[int64]time.Time) error {
	ids := make([]int64, 0, len(paidAt))
	for id := range paidAt {
		if err := tx.own(id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var q strings.Builder
	q.WriteString("UPDATE `" + orderTable + "` SET `modify_time`=?,`pay_type`=?,`payment_time`=")
	caseID(&q, len(ids))
	q.WriteString(",`status`=? WHERE id IN ")
	placeholders(&q, len(ids))
	q.WriteString(" AND status = ?")
	args := make([]any, 0, 4+3*len(ids))
	args = append(args, time.Now().UTC(), int64(payType))
	for _, id := range ids {
		args = append(args, id, paidAt[id].UTC())
	}
	args = append(args, int64(model.OrderPaid))
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, int64(model.OrderAwaitingPayment))
	affected, err := tx.s.exec(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	if int(affected) != len(ids) {
		return fmt.Errorf("%w: %d of %d orders were awaiting payment", model.ErrStateChanged, affected, len(ids))
	}
	return nil
}

// SellReservations turns the stock reservations of the held orders named
// into sales, summed per SKU, with one statement that locks the SKU rows in
// ascending id. Call it once, after MarkOrdersPaid moved those orders.
func (tx *OrdersTx) SellReservations(ctx context.Context, orderIDs []int64) error {
	if tx.sold {
		return fmt.Errorf("%w: SKUs are locked once", ErrLockOrder)
	}
	if err := tx.step(rankSKU); err != nil {
		return err
	}
	tx.sold = true
	qty := map[int64]int{}
	for _, id := range orderIDs {
		if err := tx.own(id); err != nil {
			return err
		}
		items, err := model.ParseReservation(tx.orders[id].StockReservation)
		if err != nil {
			return err
		}
		for _, it := range items {
			qty[it.SKUID] += it.Quantity
		}
	}
	items := make([]model.ItemRequest, 0, len(qty))
	for sku, q := range qty {
		items = append(items, model.ItemRequest{SKUID: sku, Quantity: q})
	}
	slices.SortFunc(items, func(a, b model.ItemRequest) int { return int(a.SKUID - b.SKUID) })
	return tx.s.adjustStock(ctx, items, true, fmt.Sprintf("%d orders", len(orderIDs)))
}

// InsertEvents writes events to the outbox, with one multi-row insert.
func (tx *OrdersTx) InsertEvents(ctx context.Context, events ...model.Event) error {
	return tx.s.insertEvents(ctx, events...)
}

func (tx *OrdersTx) ids() []int64 {
	ids := make([]int64, 0, len(tx.orders))
	for id := range tx.orders {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
