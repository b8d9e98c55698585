package dao

import (
	"context"
	"errors"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

const attemptTable = "oms_pay_attempt"

type attemptRecord struct {
	ID          int64 `gorm:"primaryKey"`
	OrderID     int64
	AttemptNo   int
	Provider    string
	Account     string
	App         string
	OutTradeNo  string
	Method      string
	Amount      string
	State       string
	PayURL      *string
	Queries     int
	NextQueryAt time.Time
	ExpireAt    time.Time
	CreateTime  time.Time
	UpdateTime  time.Time
}

func (attemptRecord) TableName() string { return attemptTable }

func (r attemptRecord) attempt() model.PayAttempt {
	a := model.PayAttempt{
		ID: r.ID, OrderID: r.OrderID, AttemptNo: r.AttemptNo, Provider: model.Provider(r.Provider), Account: r.Account, App: r.App, OutTradeNo: r.OutTradeNo,
		Method: model.PayMethod(r.Method), State: model.AttemptState(r.State),
		Queries: r.Queries, NextQueryAt: r.NextQueryAt, ExpireAt: r.ExpireAt, CreateTime: r.CreateTime,
	}
	// A stored amount is read as stored, whatever rule it entered under.
	a.Amount, _ = decimal.NewFromString(r.Amount)
	if r.PayURL != nil {
		a.PayURL = *r.PayURL
	}
	return a
}

// insertAttempt records a new payment attempt and reports whether it did:
// false means (order_id, attempt_no) or out_trade_no exists — another
// request created it first.
func (s *Store) insertAttempt(ctx context.Context, a model.PayAttempt) (bool, error) {
	now := time.Now().UTC()
	row := map[string]any{
		"order_id": a.OrderID, "attempt_no": a.AttemptNo, "out_trade_no": a.OutTradeNo, "method": string(a.Method),
		"amount": a.Amount.StringFixed(2), "state": model.AttemptOpen, "next_query_at": a.NextQueryAt.UTC(),
		"expire_at": a.ExpireAt.UTC(), "account": a.Account, "app": a.App,
		"create_time": now, "update_time": now,
	}
	if a.PayURL != "" {
		row["pay_url"] = a.PayURL
	}
	if a.Provider != "" { // else the column's default: Alipay's, as every attempt before WeChat Pay
		row["provider"] = string(a.Provider)
	}
	return s.insertOrKeep(ctx, attemptTable, []string{"order_id", "attempt_no"}, row)
}

// LatestAttempt reads an order's newest attempt without locking.
func (s *Store) LatestAttempt(ctx context.Context, orderID int64) (model.PayAttempt, error) {
	var r attemptRecord
	err := s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("attempt_no DESC").Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.PayAttempt{}, model.ErrAttemptNotFound
	}
	return r.attempt(), mapErr(err)
}

// AttemptByOutTradeNo reads an attempt by its out_trade_no without locking
// (the mapping never changes once written).
func (s *Store) AttemptByOutTradeNo(ctx context.Context, outTradeNo string) (model.PayAttempt, error) {
	var r attemptRecord
	err := s.db.WithContext(ctx).Where("out_trade_no = ?", outTradeNo).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || matchesNothing(err) {
		return model.PayAttempt{}, model.ErrAttemptNotFound
	}
	return r.attempt(), mapErr(err)
}

// SetAttemptURL stores the pay URL or QR code of an attempt, unless one is
// stored already (compare-and-set on NULL), so every caller answers the
// same.
func (s *Store) SetAttemptURL(ctx context.Context, id int64, payURL string) error {
	return mapErr(s.db.WithContext(ctx).Model(&attemptRecord{}).Where("id = ? AND pay_url IS NULL", id).
		Updates(map[string]any{"pay_url": payURL, "update_time": time.Now().UTC()}).Error)
}

// SetAttemptState moves an attempt from one state to another
// (compare-and-set, one statement of its own) and reports whether it did.
// Inside an order's transaction use OrderTx.SetAttemptState.
func (s *Store) SetAttemptState(ctx context.Context, id int64, from, to model.AttemptState) (bool, error) {
	return s.setAttemptState(ctx, 0, id, from, to)
}

// setAttemptState is SetAttemptState, limited to one order's attempts
// unless orderID is 0.
func (s *Store) setAttemptState(ctx context.Context, orderID, id int64, from, to model.AttemptState) (bool, error) {
	q := s.db.WithContext(ctx).Model(&attemptRecord{}).Where("id = ? AND state = ?", id, from)
	if orderID != 0 {
		q = q.Where("order_id = ?", orderID)
	}
	res := q.Updates(map[string]any{"state": to, "update_time": time.Now().UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// markAttemptPaid moves an order's attempt with this out_trade_no, if
// any, to PAID (from OPEN, or from CLOSED: a trade closed before the buyer
// opened it can still be paid). The notify transaction calls it after the
// payment row.
func (s *Store) markAttemptPaid(ctx context.Context, orderID int64, outTradeNo string) error {
	return mapErr(s.db.WithContext(ctx).Model(&attemptRecord{}).
		Where("out_trade_no = ? AND order_id = ? AND state IN ?", outTradeNo, orderID, []model.AttemptState{model.AttemptOpen, model.AttemptClosed}).
		Updates(map[string]any{"state": model.AttemptPaid, "update_time": time.Now().UTC()}).Error)
}

// ClaimAttemptsToQuery claims up to limit attempts whose next query is
// due — OPEN ones, and CLOSED ones that Alipay could still take payment on
// (expire_at not yet past by grace) — pushing their next query past lease
// so no other instance takes them meanwhile. It is a short transaction of
// its own (FOR UPDATE SKIP LOCKED, then the lease), locking no order.
func (s *Store) ClaimAttemptsToQuery(ctx context.Context, now time.Time, grace, lease time.Duration, limit int) ([]model.PayAttempt, error) {
	var out []model.PayAttempt
	err := s.transact(ctx, maxTxAttempts, func(ctx context.Context, tx *Store) error {
		var err error
		out, err = tx.claimAttemptsToQuery(ctx, now, grace, lease, limit)
		return err
	})
	return out, err
}

func (s *Store) claimAttemptsToQuery(ctx context.Context, now time.Time, grace, lease time.Duration, limit int) ([]model.PayAttempt, error) {
	var recs []attemptRecord
	err := s.db.WithContext(ctx).Where("next_query_at <= ? AND (state = ? OR (state = ? AND expire_at > ?))",
		now.UTC(), model.AttemptOpen, model.AttemptClosed, now.Add(-grace).UTC()).
		Order("next_query_at, id").Limit(limit).
		Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate, Options: clause.LockingOptionsSkipLocked}).
		Find(&recs).Error
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.PayAttempt, len(recs))
	for i, r := range recs {
		out[i] = r.attempt()
		if err := s.db.WithContext(ctx).Model(&attemptRecord{}).Where("id = ?", r.ID).
			Updates(map[string]any{"queries": gorm.Expr("queries + 1"), "next_query_at": now.Add(lease).UTC()}).Error; err != nil {
			return nil, mapErr(err)
		}
	}
	return out, nil
}

// ScheduleQuery sets when an attempt is next queried.
func (s *Store) ScheduleQuery(ctx context.Context, id int64, at time.Time) error {
	return mapErr(s.db.WithContext(ctx).Model(&attemptRecord{}).Where("id = ?", id).
		Update("next_query_at", at.UTC()).Error)
}

// OpenAttemptsOfSettledOrders lists OPEN attempts whose order no longer
// awaits payment (closed, or paid by another attempt): trades to close at
// Alipay before someone pays them too. Attempts whose close is postponed
// past now (PostponeTradeClose) are left out.
func (s *Store) OpenAttemptsOfSettledOrders(ctx context.Context, now time.Time, limit int) ([]model.PayAttempt, error) {
	var recs []attemptRecord
	cond, args := notPostponed(backoffTradeClose, "a.id", "''", now)
	err := s.db.WithContext(ctx).Table(attemptTable+" AS a").Select("a.*").
		Joins("JOIN "+orderTable+" o ON o.id = a.order_id").
		Where("a.state = ? AND o.status != ?", model.AttemptOpen, model.OrderAwaitingPayment).Where(cond, args...).
		Order("a.id").Limit(limit).Find(&recs).Error
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]model.PayAttempt, len(recs))
	for i, r := range recs {
		out[i] = r.attempt()
	}
	return out, nil
}
