package dao

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"paynotify/model"
)

const (
	skuTable    = "pms_sku_stock"
	couponTable = "sms_coupon_history"
	memberTable = "ums_member"
)

// reserveStock reserves qty units of a SKU for an unpaid order
// (compare-and-set: only if that many are unreserved). It reports whether
// it did.
func (s *Store) reserveStock(ctx context.Context, skuID int64, qty int) (bool, error) {
	res := s.db.WithContext(ctx).Table(skuTable).
		Where("id = ? AND stock - lock_stock >= ?", skuID, qty).
		Updates(map[string]any{"lock_stock": gorm.Expr("lock_stock + ?", qty), "modify_time": time.Now().UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// adjustReservation sells (stock and lock_stock both drop by each
// quantity) or releases (lock_stock drops) an order's reservation. The
// caller holds the order lock and has just moved it 0→1 or 0→4, so this
// runs once per order.
func (s *Store) adjustReservation(ctx context.Context, o model.Order, sell bool) error {
	// The reservation is on the order row we hold: no read of the lines
	// (whose index gaps a concurrent placement inserting its own lines would
	// deadlock against).
	items, err := model.ParseReservation(o.StockReservation)
	if err != nil {
		return err
	}
	return s.adjustStock(ctx, items, sell, fmt.Sprintf("order %d", o.ID))
}

// adjustStock sells or releases reserved quantities of SKUs (see
// adjustReservation), what naming whose reservation it is.
func (s *Store) adjustStock(ctx context.Context, items []model.ItemRequest, sell bool, what string) error {
	if len(items) == 0 {
		return nil
	}
	// One statement; it locks the SKU rows in ascending id, the stock lock
	// order. The CHECK refuses a reservation that is not there.
	// Raw SQL (groupsql.go): the group transaction sells through here.
	var q strings.Builder
	q.WriteString("UPDATE `" + skuTable + "` SET `lock_stock`=lock_stock - ")
	caseID(&q, len(items))
	q.WriteString(",`modify_time`=?")
	if sell {
		q.WriteString(",`stock`=stock - ")
		caseID(&q, len(items))
	}
	q.WriteString(" WHERE id IN ")
	placeholders(&q, len(items))
	args := make([]any, 0, 6*len(items)+1)
	addCase := func() {
		for _, it := range items {
			args = append(args, it.SKUID, it.Quantity)
		}
	}
	addCase()
	args = append(args, time.Now().UTC())
	if sell {
		addCase()
	}
	for _, it := range items {
		args = append(args, it.SKUID)
	}
	affected, err := s.exec(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	if int(affected) != len(items) {
		return fmt.Errorf("%w: %s: %d of %d SKUs adjusted", model.ErrStateChanged, what, affected, len(items))
	}
	return nil
}

// couponForUpdate reads a coupon and locks it.
func (s *Store) couponForUpdate(ctx context.Context, id int64) (model.Coupon, error) {
	var c model.Coupon
	err := s.db.WithContext(ctx).Table(couponTable).Select("id", "member_id", "amount", "use_status").
		Where("id = ?", id).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return c, fmt.Errorf("%w: coupon %d does not exist", model.ErrCouponUnusable, id)
	}
	return c, mapErr(err)
}

// useCoupon marks a member's coupon used by an order (compare-and-set
// unused→used, and only the member's own). It reports whether it did.
func (s *Store) useCoupon(ctx context.Context, id, memberID, orderID int64) (bool, error) {
	res := s.db.WithContext(ctx).Table(couponTable).
		Where("id = ? AND member_id = ? AND use_status = ?", id, memberID, model.CouponUnused).
		Updates(map[string]any{"use_status": model.CouponUsed, "use_time": time.Now().UTC(), "order_id": orderID})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// returnCoupon gives back a coupon an order used (compare-and-set
// used→unused, only if that order used it).
func (s *Store) returnCoupon(ctx context.Context, id, orderID int64) error {
	res := s.db.WithContext(ctx).Table(couponTable).
		Where("id = ? AND order_id = ? AND use_status = ?", id, orderID, model.CouponUsed).
		Updates(map[string]any{"use_status": model.CouponUnused, "use_time": nil, "order_id": nil})
	if res.Error != nil {
		return mapErr(res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("%w: coupon %d is not used by order %d", model.ErrStateChanged, id, orderID)
	}
	return nil
}

// spendPoints deducts points from a member (compare-and-set: never below
// zero). It reports whether it did.
func (s *Store) spendPoints(ctx context.Context, memberID int64, points int) (bool, error) {
	res := s.db.WithContext(ctx).Table(memberTable).
		Where("id = ? AND integration >= ?", memberID, points).
		Updates(map[string]any{"integration": gorm.Expr("integration - ?", points), "modify_time": time.Now().UTC()})
	return res.RowsAffected == 1, mapErr(res.Error)
}

// returnPoints gives points back to a member.
func (s *Store) returnPoints(ctx context.Context, memberID int64, points int) error {
	res := s.db.WithContext(ctx).Table(memberTable).Where("id = ?", memberID).
		Updates(map[string]any{"integration": gorm.Expr("integration + ?", points), "modify_time": time.Now().UTC()})
	if res.Error != nil {
		return mapErr(res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("%w: member %d is gone", model.ErrStateChanged, memberID)
	}
	return nil
}

// InsertSKU adds a SKU (for dev data and tests) and returns its id.
func (s *Store) InsertSKU(ctx context.Context, name string, price decimal.Decimal, stock int) (int64, error) {
	rec := struct {
		ID    int64 `gorm:"primaryKey"`
		Name  string
		Price string
		Stock int
	}{Name: name, Price: price.StringFixed(2), Stock: stock}
	err := s.db.WithContext(ctx).Table(skuTable).Create(&rec).Error
	return rec.ID, mapErr(err)
}

// InsertMember adds a member with points (for dev data and tests).
func (s *Store) InsertMember(ctx context.Context, username string, points int) (int64, error) {
	rec := struct {
		ID          int64 `gorm:"primaryKey"`
		Username    string
		Integration int
	}{Username: username, Integration: points}
	err := s.db.WithContext(ctx).Table(memberTable).Create(&rec).Error
	return rec.ID, mapErr(err)
}

// InsertCoupon gives a member an unused coupon (for dev data and tests).
func (s *Store) InsertCoupon(ctx context.Context, memberID int64, amount decimal.Decimal) (int64, error) {
	rec := struct {
		ID       int64 `gorm:"primaryKey"`
		MemberID int64
		Amount   string
	}{MemberID: memberID, Amount: amount.StringFixed(2)}
	err := s.db.WithContext(ctx).Table(couponTable).Create(&rec).Error
	return rec.ID, mapErr(err)
}

// SKU reads a SKU without locking.
func (s *Store) SKU(ctx context.Context, id int64) (model.SKU, error) {
	var sku model.SKU
	err := s.db.WithContext(ctx).Table(skuTable).Select("id", "price", "stock", "lock_stock").Where("id = ?", id).Take(&sku).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return sku, fmt.Errorf("%w: sku %d", model.ErrSKUNotFound, id)
	}
	return sku, mapErr(err)
}

// MemberPoints reads a member's points without locking.
func (s *Store) MemberPoints(ctx context.Context, id int64) (int, error) {
	var points []int
	if err := s.db.WithContext(ctx).Table(memberTable).Where("id = ?", id).Pluck("integration", &points).Error; err != nil {
		return 0, mapErr(err)
	}
	if len(points) == 0 {
		return 0, fmt.Errorf("%w: %d", model.ErrMemberNotFound, id)
	}
	return points[0], nil
}

// Coupon reads a coupon without locking.
func (s *Store) Coupon(ctx context.Context, id int64) (model.Coupon, error) {
	var c model.Coupon
	err := s.db.WithContext(ctx).Table(couponTable).Select("id", "member_id", "amount", "use_status").Where("id = ?", id).Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return c, fmt.Errorf("%w: coupon %d does not exist", model.ErrCouponUnusable, id)
	}
	return c, mapErr(err)
}
