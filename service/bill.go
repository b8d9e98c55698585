package service

import (
	"context"
	"fmt"
	"time"

	"paynotify/model"
)

// BillSource fetches a provider's trade bill of a Beijing day:
// model.ErrNoBill when it has none (no business that day). Every Provider
// is one.
type BillSource interface {
	TradeBill(ctx context.Context, day time.Time) (model.Bill, error)
}

// BillSourceFunc adapts a function to BillSource.
type BillSourceFunc func(ctx context.Context, day time.Time) (model.Bill, error)

// TradeBill calls f.
func (f BillSourceFunc) TradeBill(ctx context.Context, day time.Time) (model.Bill, error) {
	return f(ctx, day)
}

// ParseBillDate reads a yyyy-MM-dd Beijing date.
func ParseBillDate(s string) (time.Time, error) {
	t, err := time.ParseInLocation("2006-01-02", s, model.Beijing)
	if err != nil || t.Format("2006-01-02") != s {
		return time.Time{}, fmt.Errorf("%w: date %q is not yyyy-MM-dd", model.ErrInvalidRequest, s)
	}
	return t, nil
}

// Yesterday is the Beijing date before now's.
func Yesterday(now time.Time) string {
	return now.In(model.Beijing).AddDate(0, 0, -1).Format("2006-01-02")
}
