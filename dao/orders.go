package dao

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

// Trades is what a group of notifications needs before its transaction,
// read without locking (TradesLookup). Rows are never deleted, so what it
// finds stays found.
type Trades struct {
	// Payments are the payments already recorded, by trade_no.
	Payments map[string]model.Payment
	// Attempts are the payment attempts named by out_trade_no, and Orders
	// the order ids by order_sn, for the out_trade_nos of the trades not
	// recorded yet.
	Attempts map[string]model.PayAttempt
	Orders   map[string]int64
}

// TradesLookup is TradeLookup for many notifications at once, and resolves
// the out_trade_nos that are order numbers to order ids as well, without a
// lock: one statement reads the payments, and a second, only if some trade
// is not recorded yet, reads those trades' attempts and orders. A group of
// duplicates — a resent storm — costs one statement on one table.
func (s *Store) TradesLookup(ctx context.Context, provider model.Provider, tradeNos, outTradeNos []string) (Trades, error) {
	t := Trades{Payments: map[string]model.Payment{}, Attempts: map[string]model.PayAttempt{}, Orders: map[string]int64{}}
	err := s.scanTrades(ctx, &t, provider, `
SELECT 'p' AS src, trade_no AS k, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, 0 AS attempt_id, 0 AS attempt_no
  FROM oms_order_payment WHERE provider = ? AND trade_no IN ?`, provider, tradeNos)
	if err != nil {
		return t, err
	}
	var missing []string
	for i, tn := range tradeNos {
		if _, ok := t.Payments[tn]; !ok && !slices.Contains(missing, outTradeNos[i]) {
			missing = append(missing, outTradeNos[i])
		}
	}
	if len(missing) == 0 {
		return t, nil
	}
	err = s.scanTrades(ctx, &t, provider, `
SELECT 'a' AS src, out_trade_no AS k, order_id, out_trade_no, amount, state, '' AS reason, '' AS notify_id, NULL AS paid_at, id AS attempt_id, attempt_no
  FROM oms_pay_attempt WHERE out_trade_no IN ?
UNION ALL
SELECT 'o', order_sn, id, order_sn, pay_amount, '', '', '', NULL, 0, 0
  FROM oms_order WHERE order_sn IN ?`, missing, missing)
	return t, err
}

// scanTrades runs one of TradesLookup's statements into t.
func (s *Store) scanTrades(ctx context.Context, t *Trades, provider model.Provider, query string, args ...any) error {
	rows, err := s.db.WithContext(ctx).Raw(query, args...).Rows()
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
			orderID                              sql.NullInt64 // NULL: an UNMATCHED payment
			attemptID                            int64
			attemptNo                            int
			amount                               decimal.Decimal
			paidAt                               *time.Time
		)
		if err := rows.Scan(&src, &k, &orderID, &out, &amount, &state, &reason, &notifyID, &paidAt, &attemptID, &attemptNo); err != nil {
			return mapErr(err)
		}
		switch src {
		case "p":
			t.Payments[k] = model.Payment{Provider: provider, TradeNo: k, OrderID: orderID.Int64, OutTradeNo: out, Amount: amount,
				State: model.PaymentState(state), Reason: model.RefundReason(reason), NotifyID: notifyID, PaidAt: paidAt}
		case "a":
			t.Attempts[k] = model.PayAttempt{ID: attemptID, OrderID: orderID.Int64, AttemptNo: attemptNo, OutTradeNo: out,
				Amount: amount, State: model.AttemptState(state)}
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
		var orders []model.Order
		err := tx.db.WithContext(ctx).Table(orderTable).Select(orderColumns).
			Where("id IN ?", ids).Order("id").
			Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Find(&orders).Error
		if err != nil {
			return mapErr(err)
		}
		otx := &OrdersTx{s: tx, orders: map[int64]model.Order{}}
		for _, o := range orders {
			otx.orders[o.ID] = o
		}
		return fn(ctx, otx, orders)
	})
}

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
	rows := make([]map[string]any, len(ps))
	for i, p := range ps {
		if err := tx.own(p.OrderID); err != nil {
			return 0, err
		}
		rows[i] = map[string]any{
			"provider": p.Provider, "trade_no": p.TradeNo, "order_id": p.OrderID,
			"out_trade_no": p.OutTradeNo, "amount": p.Amount.StringFixed(2),
			"state": p.State, "reason": p.Reason, "notify_id": p.NotifyID,
			"paid_at": p.PaidAt, "create_time": now, "update_time": now,
		}
	}
	conflict := clause.OnConflict{Columns: []clause.Column{{Name: "provider"}, {Name: "trade_no"}}, DoNothing: true}
	if tx.s.driver == DriverMySQL {
		conflict = clause.OnConflict{DoUpdates: clause.Set{{Column: clause.Column{Name: "provider"}, Value: clause.Column{Name: "provider"}}}}
	}
	res := tx.s.db.WithContext(ctx).Table(paymentTable).Clauses(conflict).Create(rows)
	return int(res.RowsAffected), mapErr(res.Error)
}

// MarkAttemptsPaid moves the held orders' attempts with these
// out_trade_nos to PAID (from OPEN or CLOSED), with one statement.
func (tx *OrdersTx) MarkAttemptsPaid(ctx context.Context, outTradeNos []string) error {
	if err := tx.step(rankOrderRows); err != nil {
		return err
	}
	return mapErr(tx.s.db.WithContext(ctx).Model(&attemptRecord{}).
		Where("out_trade_no IN ? AND order_id IN ? AND state IN ?", outTradeNos, tx.ids(), []model.AttemptState{model.AttemptOpen, model.AttemptClosed}).
		Updates(map[string]any{"state": model.AttemptPaid, "update_time": time.Now().UTC()}).Error)
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
	var when strings.Builder
	args := make([]any, 0, 2*len(ids))
	when.WriteString("CASE id")
	for _, id := range ids {
		when.WriteString(" WHEN ? THEN ?")
		args = append(args, id, paidAt[id].UTC())
	}
	when.WriteString(" END")
	res := tx.s.db.WithContext(ctx).Table(orderTable).
		Where("id IN ? AND status = ?", ids, model.OrderAwaitingPayment).
		Updates(map[string]any{
			"status":       model.OrderPaid,
			"pay_type":     payType,
			"payment_time": gorm.Expr(when.String(), args...),
			"modify_time":  time.Now().UTC(),
		})
	if res.Error != nil {
		return mapErr(res.Error)
	}
	if int(res.RowsAffected) != len(ids) {
		return fmt.Errorf("%w: %d of %d orders were awaiting payment", model.ErrStateChanged, res.RowsAffected, len(ids))
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
