package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"

	"paynotify/model"
)

const paymentTable = "oms_order_payment"

var paymentColumns = []string{"provider", "account", "app", "trade_no", "order_id", "out_trade_no", "amount", "state", "reason", "notify_id", "paid_at", "create_time", "update_time"}

// insertPayment records a payment unless one with the same (provider,
// trade_no) exists, and reports whether it inserted; a duplicate is not an
// error (see insertOrKeep). On MySQL the statement leaves an existing row
// locked, as the caller's PaymentForUpdate would.
func (s *Store) insertPayment(ctx context.Context, p model.Payment) (bool, error) {
	now := time.Now().UTC()
	row := map[string]any{
		"provider": p.Provider, "account": p.Account, "app": p.App, "trade_no": p.TradeNo, "order_id": p.OrderID,
		"out_trade_no": p.OutTradeNo, "amount": p.Amount.StringFixed(2),
		"state": p.State, "reason": p.Reason, "notify_id": p.NotifyID,
		"paid_at": p.PaidAt, "create_time": now, "update_time": now,
	}
	return s.insertOrKeep(ctx, paymentTable, []string{"provider", "trade_no"}, row)
}

// Payment reads a payment without locking. Rows are never deleted, so a
// payment found here stays found.
func (s *Store) Payment(ctx context.Context, provider model.Provider, tradeNo string) (model.Payment, error) {
	return s.payment(ctx, s.db, provider, tradeNo)
}

func (s *Store) payment(ctx context.Context, db *gorm.DB, provider model.Provider, tradeNo string) (model.Payment, error) {
	var p model.Payment
	err := db.WithContext(ctx).Table(paymentTable).Select(paymentColumns).
		Where("provider = ? AND trade_no = ?", provider, tradeNo).Take(&p).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || matchesNothing(err) {
		return p, fmt.Errorf("%w: %s %q", model.ErrPaymentNotFound, provider, tradeNo)
	}
	return p, mapErr(err)
}

// PaymentsByOrder lists an order's payments, oldest first.
func (s *Store) PaymentsByOrder(ctx context.Context, orderID int64) ([]model.Payment, error) {
	var ps []model.Payment
	err := s.db.WithContext(ctx).Table(paymentTable).Select(paymentColumns).
		Where("order_id = ?", orderID).Order("create_time, trade_no").Find(&ps).Error
	return ps, mapErr(err)
}

// TradeLookup reads, in one round trip and without locking, what a
// notification for (provider, tradeNo, outTradeNo) needs before its
// transaction: the payment already recorded under the trade, if any, and
// the payment attempt named by out_trade_no (with the provider, account
// and app its trade is open in), if any. Both are nil when
// absent. Rows are never deleted, so what it finds stays found.
func (s *Store) TradeLookup(ctx context.Context, provider model.Provider, tradeNo, outTradeNo string) (*model.Payment, *model.PayAttempt, error) {
	rows, err := s.db.WithContext(ctx).Raw(`
SELECT 'p' AS src, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, 0 AS attempt_id, 0 AS attempt_no,
       provider, account, app
  FROM oms_order_payment WHERE provider = ? AND trade_no = ?
UNION ALL
SELECT 'a', order_id, out_trade_no, amount, state, '', '', NULL, id, attempt_no, provider, account, app
  FROM oms_pay_attempt WHERE out_trade_no = ?`, provider, tradeNo, outTradeNo).Rows()
	if matchesNothing(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, mapErr(err)
	}
	defer rows.Close()
	var pay *model.Payment
	var attempt *model.PayAttempt
	for rows.Next() {
		var (
			src, out, state, reason, notifyID string
			prov, account, app                string
			orderID                           sql.NullInt64 // NULL: an UNMATCHED payment
			attemptID                         int64
			attemptNo                         int
			amount                            decimal.Decimal
			paidAt                            *time.Time
		)
		if err := rows.Scan(&src, &orderID, &out, &amount, &state, &reason, &notifyID, &paidAt, &attemptID, &attemptNo,
			&prov, &account, &app); err != nil {
			return nil, nil, mapErr(err)
		}
		if src == "p" {
			pay = &model.Payment{Provider: provider, Account: account, App: app, TradeNo: tradeNo, OrderID: orderID.Int64,
				OutTradeNo: out, Amount: amount, State: model.PaymentState(state), Reason: model.RefundReason(reason),
				NotifyID: notifyID, PaidAt: paidAt}
		} else {
			attempt = &model.PayAttempt{ID: attemptID, OrderID: orderID.Int64, AttemptNo: attemptNo,
				Provider: model.Provider(prov), Account: account, App: app, OutTradeNo: out, Amount: amount,
				State: model.AttemptState(state)}
		}
	}
	return pay, attempt, mapErr(rows.Err())
}
