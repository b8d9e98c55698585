package dao

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

const refundTable = "oms_refund"

type refundRecord struct {
	OutRequestNo   string `gorm:"primaryKey"`
	Kind           string
	Provider       string
	Account        string
	App            string
	TradeNo        string
	OutTradeNo     string
	OrderID        int64
	Amount         string
	Reason         string
	State          string
	Attempts       int
	NextAttemptAt  time.Time
	LastError      string
	IdempotencyKey *string
	CreateTime     time.Time
	UpdateTime     time.Time
	ResolvedBy     *string
	ResolvedTime   *time.Time
	Resolution     string
}

func (refundRecord) TableName() string { return refundTable }

func (r refundRecord) refund() model.Refund {
	f := model.Refund{
		OutRequestNo: r.OutRequestNo, Kind: model.RefundKind(r.Kind), Provider: model.Provider(r.Provider),
		Account: r.Account, App: r.App, TradeNo: r.TradeNo, OutTradeNo: r.OutTradeNo, OrderID: r.OrderID, Reason: r.Reason,
		State: model.RefundState(r.State), Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt,
		LastError: r.LastError, CreateTime: r.CreateTime, UpdateTime: r.UpdateTime,
		ResolvedTime: r.ResolvedTime, Resolution: r.Resolution,
	}
	if r.ResolvedBy != nil {
		f.ResolvedBy = *r.ResolvedBy
	}
	// A stored amount is read as stored, whatever rule it entered under.
	f.Amount, _ = decimal.NewFromString(r.Amount)
	if r.IdempotencyKey != nil {
		f.IdempotencyKey = *r.IdempotencyKey
	}
	return f
}

// insertRefund records a refund unless its out_request_no exists, and
// reports whether it did.
func (s *Store) insertRefund(ctx context.Context, f model.Refund) (bool, error) {
	now := time.Now().UTC()
	row := map[string]any{
		"out_request_no": f.OutRequestNo, "kind": string(f.Kind), "provider": string(f.Provider),
		"account": f.Account, "app": f.App, "trade_no": f.TradeNo, "out_trade_no": f.OutTradeNo, "order_id": f.OrderID,
		"amount": f.Amount.StringFixed(2), "reason": f.Reason, "state": model.RefundRefunding,
		"next_attempt_at": now, "create_time": now, "update_time": now,
	}
	if f.IdempotencyKey != "" {
		row["idempotency_key"] = f.IdempotencyKey
	}
	return s.insertRefundRow(ctx, f.OutRequestNo, row, "", "", now)
}

// insertRefundRow inserts a refund unless its out_request_no exists and,
// when it did, records its first state (row["state"]) as a change.
func (s *Store) insertRefundRow(ctx context.Context, outRequestNo string, row map[string]any, by, note string, now time.Time) (bool, error) {
	inserted, err := s.insertOrKeep(ctx, refundTable, []string{"out_request_no"}, row)
	if err != nil || !inserted {
		return inserted, err
	}
	return true, s.insertRefundChange(ctx, outRequestNo, "", row["state"].(model.RefundState), by, note, now)
}

// Refund reads a refund without locking.
func (s *Store) Refund(ctx context.Context, outRequestNo string) (model.Refund, error) {
	var r refundRecord
	err := s.db.WithContext(ctx).Where("out_request_no = ?", outRequestNo).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || matchesNothing(err) {
		return model.Refund{}, fmt.Errorf("%w: %q", model.ErrRefundNotFound, outRequestNo)
	}
	return r.refund(), mapErr(err)
}

// RefundsByOrder lists an order's refunds, oldest first.
func (s *Store) RefundsByOrder(ctx context.Context, orderID int64) ([]model.Refund, error) {
	var recs []refundRecord
	if err := s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("create_time, out_request_no").Find(&recs).Error; err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.Refund, len(recs))
	for i, r := range recs {
		out[i] = r.refund()
	}
	return out, nil
}

// ClaimRefunds claims up to limit refunds in progress that are due,
// pushing their next attempt past lease and counting the attempt, so no
// other instance takes them meanwhile. It is a short transaction of its
// own (FOR UPDATE SKIP LOCKED, then the lease), locking no order; the
// caller then talks to Alipay outside any transaction.
func (s *Store) ClaimRefunds(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]model.Refund, error) {
	var out []model.Refund
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		var err error
		out, err = tx.claimRefunds(ctx, now, lease, limit)
		return err
	})
	return out, err
}

func (s *Store) claimRefunds(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]model.Refund, error) {
	var recs []refundRecord
	err := s.db.WithContext(ctx).Where("state = ? AND next_attempt_at <= ?", model.RefundRefunding, now.UTC()).
		Order("next_attempt_at, out_request_no").Limit(limit).
		Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked}).
		Find(&recs).Error
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.Refund, len(recs))
	for i, r := range recs {
		if err := s.db.WithContext(ctx).Model(&refundRecord{}).Where("out_request_no = ?", r.OutRequestNo).
			Updates(map[string]any{"attempts": gorm.Expr("attempts + 1"), "next_attempt_at": now.Add(lease).UTC()}).Error; err != nil {
			return nil, mapErr(err)
		}
		r.Attempts++
		out[i] = r.refund()
	}
	return out, nil
}

// finishRefund moves an order's refund from REFUNDING to its end state
// (compare-and-set) and reports whether it did.
func (s *Store) finishRefund(ctx context.Context, orderID int64, outRequestNo string, to model.RefundState, lastError string) (bool, error) {
	now := time.Now().UTC()
	res := s.db.WithContext(ctx).Model(&refundRecord{}).
		Where("out_request_no = ? AND order_id = ? AND state = ?", outRequestNo, orderID, model.RefundRefunding).
		Updates(map[string]any{"state": to, "last_error": model.Truncate(lastError, 500), "update_time": now})
	return s.changed(ctx, res, outRequestNo, model.RefundRefunding, to, "", lastError, now)
}

// changed records a refund's state change when the compare-and-set res
// made it, and reports whether it did.
func (s *Store) changed(ctx context.Context, res *gorm.DB, outRequestNo string, from, to model.RefundState, by, note string, now time.Time) (bool, error) {
	if res.Error != nil || res.RowsAffected != 1 {
		return false, mapErr(res.Error)
	}
	return true, s.insertRefundChange(ctx, outRequestNo, from, to, by, note, now)
}

// RetryRefundAt schedules the next attempt of a refund in progress, and
// records the retry with its cause as a change (REFUNDING → REFUNDING), in
// one transaction.
func (s *Store) RetryRefundAt(ctx context.Context, outRequestNo string, at time.Time, lastError string) error {
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		res := tx.db.WithContext(ctx).Model(&refundRecord{}).
			Where("out_request_no = ? AND state = ?", outRequestNo, model.RefundRefunding).
			Updates(map[string]any{"next_attempt_at": at.UTC(), "last_error": model.Truncate(lastError, 500)})
		_, err := tx.changed(ctx, res, outRequestNo, model.RefundRefunding, model.RefundRefunding, "", lastError, time.Now())
		return err
	})
	if matchesNothing(err) {
		return nil // names no refund of ours
	}
	return err
}

// PaymentsToRefund lists up to limit REFUND_PENDING payments, leaving out
// those postponed past now (PostponeRefundEnqueue) (plain read: the caller
// locks each, order first).
func (s *Store) PaymentsToRefund(ctx context.Context, now time.Time, limit int) ([]model.Payment, error) {
	var ps []model.Payment
	cond, args := notPostponed(backoffRefundEnqueue, "0", paymentTable+".trade_no", now)
	err := s.db.WithContext(ctx).Table(paymentTable).Select(paymentColumns).
		Where("state = ?", model.PaymentRefundPending).Where(cond, args...).Order("create_time").Limit(limit).Find(&ps).Error
	return ps, mapErr(err)
}

// setPaymentState moves an order's payment between states
// (compare-and-set) and reports whether it did.
func (s *Store) setPaymentState(ctx context.Context, orderID int64, provider model.Provider, tradeNo string, from, to model.PaymentState) (bool, error) {
	res := s.db.WithContext(ctx).Table(paymentTable).
		Where("provider = ? AND trade_no = ? AND order_id = ? AND state = ?", provider, tradeNo, orderID, from).
		Updates(map[string]any{"state": to, "update_time": time.Now().UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}
