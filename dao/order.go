package dao

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"

	"paynotify/model"
)

const orderTable = "oms_order"

// orderColumns are the columns model.Order maps.
var orderColumns = []string{"id", "order_sn", "member_id", "pay_amount", "status", "pay_type", "payment_time",
	"total_amount", "coupon_id", "coupon_amount", "integration", "integration_amount", "stock_reservation", "create_time", "modify_time"}

// Order reads an order by order_sn without locking.
func (s *Store) Order(ctx context.Context, sn string) (model.Order, error) {
	return s.order(ctx, s.db, sn)
}

// CountOrders is how many orders the database holds (dev says so at start).
func (s *Store) CountOrders(ctx context.Context) (int64, error) {
	var n int64
	return n, mapErr(s.db.WithContext(ctx).Table(orderTable).Count(&n).Error)
}

func (s *Store) order(ctx context.Context, db *gorm.DB, sn string) (model.Order, error) {
	var o model.Order
	err := db.WithContext(ctx).Table(orderTable).Select(orderColumns).Where("order_sn = ?", sn).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || matchesNothing(err) {
		return o, fmt.Errorf("%w: %q", model.ErrOrderNotFound, sn)
	}
	return o, mapErr(err)
}

// markOrderPaid moves an order from awaiting payment to paid with payType
// (compare-and-set 0→1). The caller holds the order lock, so finding it in
// another state is model.ErrStateChanged.
//
// The statement is the one GORM's Updates of a map renders, written here
// (see insertOrKeep: GORM formats the map into an error it ignores).
func (s *Store) markOrderPaid(ctx context.Context, id int64, payType model.PayType, paidAt time.Time) error {
	res := s.db.WithContext(ctx).Exec("UPDATE `"+orderTable+"` SET `modify_time`=?,`pay_type`=?,`payment_time`=?,`status`=? WHERE id = ? AND status = ?",
		time.Now().UTC(), payType, paidAt.UTC(), model.OrderPaid, id, model.OrderAwaitingPayment)
	if res.Error != nil {
		return mapErr(res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("%w: order %d is not awaiting payment", model.ErrStateChanged, id)
	}
	return nil
}

// closeOrder moves an order from awaiting payment to closed (compare-and-set
// 0→4). It reports whether it did; an order in any other state is left as
// it is.
func (s *Store) closeOrder(ctx context.Context, id int64) (bool, error) {
	res := s.db.WithContext(ctx).Table(orderTable).
		Where("id = ? AND status = ?", id, model.OrderAwaitingPayment).
		Updates(map[string]any{"status": model.OrderClosed, "modify_time": time.Now().UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// CreateOrder inserts an order awaiting payment and returns it with its id
// (for dev data and tests: orders are placed through PlaceOrder).
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

// orderRecord is the insertable shape of oms_order (GORM fills ID back).
type orderRecord struct {
	ID                int64 `gorm:"primaryKey"`
	OrderSN           string
	MemberID          int64
	PayAmount         string
	Status            model.OrderStatus
	TotalAmount       string
	CouponID          *int64
	CouponAmount      string
	Integration       int
	IntegrationAmount string
	StockReservation  string
	CreateTime        time.Time
	ModifyTime        time.Time
}

func (orderRecord) TableName() string { return orderTable }

// insertOrder inserts a new order awaiting payment and returns its id.
// CreateTime is kept if set.
func (s *Store) insertOrder(ctx context.Context, o model.Order) (int64, error) {
	now := o.CreateTime
	if now.IsZero() {
		now = time.Now().UTC()
	}
	rec := orderRecord{
		OrderSN: o.OrderSN, MemberID: o.MemberID, PayAmount: o.PayAmount.StringFixed(2),
		Status: model.OrderAwaitingPayment, TotalAmount: o.TotalAmount.StringFixed(2),
		CouponID: o.CouponID, CouponAmount: o.CouponAmount.StringFixed(2),
		Integration: o.Integration, IntegrationAmount: o.IntegrationAmount.StringFixed(2),
		StockReservation: o.StockReservation, CreateTime: now, ModifyTime: now,
	}
	if err := s.db.WithContext(ctx).Create(&rec).Error; err != nil {
		return 0, mapErr(err)
	}
	return rec.ID, nil
}

// insertItems inserts an order's lines, in the order given.
func (s *Store) insertItems(ctx context.Context, orderID int64, sn string, items []model.OrderItem) error {
	rows := make([]map[string]any, len(items))
	for i, it := range items {
		rows[i] = map[string]any{
			"order_id": orderID, "order_sn": sn, "product_sku_id": it.SKUID,
			"product_quantity": it.Quantity, "product_price": it.Price.StringFixed(2),
		}
	}
	return mapErr(s.db.WithContext(ctx).Table("oms_order_item").Create(rows).Error)
}

// OrderItems lists an order's lines.
func (s *Store) OrderItems(ctx context.Context, orderID int64) ([]model.OrderItem, error) {
	var rows []struct {
		SKUID    int64           `gorm:"column:product_sku_id"`
		Quantity int             `gorm:"column:product_quantity"`
		Price    decimal.Decimal `gorm:"column:product_price"`
	}
	err := s.db.WithContext(ctx).Table("oms_order_item").
		Select("product_sku_id", "product_quantity", "product_price").
		Where("order_id = ?", orderID).Order("id").Find(&rows).Error
	items := make([]model.OrderItem, len(rows))
	for i, r := range rows {
		items[i] = model.OrderItem{SKUID: r.SKUID, Quantity: r.Quantity, Price: r.Price}
	}
	return items, mapErr(err)
}

// OrderItemsNamed lists an order's lines with their SKU's product name (""
// for a SKU deleted since), for pages people read.
func (s *Store) OrderItemsNamed(ctx context.Context, orderID int64) ([]model.OrderItem, error) {
	var rows []struct {
		SKUID    int64           `gorm:"column:product_sku_id"`
		Quantity int             `gorm:"column:product_quantity"`
		Price    decimal.Decimal `gorm:"column:product_price"`
		Name     *string         `gorm:"column:name"`
	}
	err := s.db.WithContext(ctx).Table("oms_order_item i").
		Select("i.product_sku_id", "i.product_quantity", "i.product_price", "s.name").
		Joins("LEFT JOIN pms_sku_stock s ON s.id = i.product_sku_id").
		Where("i.order_id = ?", orderID).Order("i.id").Find(&rows).Error
	items := make([]model.OrderItem, len(rows))
	for i, r := range rows {
		items[i] = model.OrderItem{SKUID: r.SKUID, Quantity: r.Quantity, Price: r.Price}
		if r.Name != nil {
			items[i].Name = *r.Name
		}
	}
	return items, mapErr(err)
}

// ExpiredOrders lists up to limit ids of orders still awaiting payment
// that were created before cutoff, oldest first, leaving out those whose
// close is postponed past now (PostponeClose). It does not lock: the
// closer locks and re-checks each one.
func (s *Store) ExpiredOrders(ctx context.Context, cutoff, now time.Time, limit int) ([]int64, error) {
	var ids []int64
	cond, args := notPostponed(backoffOrderClose, orderTable+".id", "''", now)
	err := s.db.WithContext(ctx).Table(orderTable).
		Where("status = ? AND create_time < ?", model.OrderAwaitingPayment, cutoff.UTC()).Where(cond, args...).
		Order("create_time, id").Limit(limit).Pluck("id", &ids).Error
	return ids, mapErr(err)
}
