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

const orderTable = "oms_order"

// orderColumns are the columns model.Order maps.
var orderColumns = []string{"id", "order_sn", "member_id", "pay_amount", "status", "pay_type", "payment_time", "create_time", "modify_time"}

// OrderForUpdate reads an order by order_sn and locks its row until the
// transaction ends (SELECT … FOR UPDATE; SQLite locks the whole database at
// BEGIN IMMEDIATE instead). It is the first lock every path takes.
func (s *Store) OrderForUpdate(ctx context.Context, sn string) (model.Order, error) {
	return s.order(ctx, s.db.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}), sn)
}

// Order reads an order by order_sn without locking.
func (s *Store) Order(ctx context.Context, sn string) (model.Order, error) {
	return s.order(ctx, s.db, sn)
}

func (s *Store) order(ctx context.Context, db *gorm.DB, sn string) (model.Order, error) {
	var o model.Order
	err := db.WithContext(ctx).Table(orderTable).Select(orderColumns).Where("order_sn = ?", sn).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return o, fmt.Errorf("%w: %q", model.ErrOrderNotFound, sn)
	}
	return o, mapErr(err)
}

// MarkOrderPaid moves an order from awaiting payment to paid by Alipay
// (compare-and-set 0→1). The caller holds the order lock, so finding it in
// another state is model.ErrStateChanged.
func (s *Store) MarkOrderPaid(ctx context.Context, id int64, paidAt time.Time) error {
	res := s.db.WithContext(ctx).Table(orderTable).
		Where("id = ? AND status = ?", id, model.OrderAwaitingPayment).
		Updates(map[string]any{
			"status":       model.OrderPaid,
			"pay_type":     model.PayTypeAlipay,
			"payment_time": paidAt.UTC(),
			"modify_time":  time.Now().UTC(),
		})
	if res.Error != nil {
		return mapErr(res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("%w: order %d is not awaiting payment", model.ErrStateChanged, id)
	}
	return nil
}

// CloseOrder moves an order from awaiting payment to closed (compare-and-set
// 0→4). It reports whether it did; an order in any other state is left as
// it is.
func (s *Store) CloseOrder(ctx context.Context, id int64) (bool, error) {
	res := s.db.WithContext(ctx).Table(orderTable).
		Where("id = ? AND status = ?", id, model.OrderAwaitingPayment).
		Updates(map[string]any{"status": model.OrderClosed, "modify_time": time.Now().UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// CreateOrder inserts an order awaiting payment and returns it with its id.
func (s *Store) CreateOrder(ctx context.Context, sn string, memberID int64, amount decimal.Decimal) (model.Order, error) {
	now := time.Now().UTC()
	row := map[string]any{
		"order_sn": sn, "member_id": memberID, "pay_amount": amount.StringFixed(2),
		"status": model.OrderAwaitingPayment, "create_time": now, "modify_time": now,
	}
	if err := s.db.WithContext(ctx).Table(orderTable).Create(row).Error; err != nil {
		return model.Order{}, mapErr(err)
	}
	return s.Order(ctx, sn)
}
