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

// checkBill reads the whole bill once before anything is matched or
// repaired, and refuses it, as model.ErrBadBill naming the first bad line,
// if any line is one the ledger could not take (model.BillEntry.Check).
// Every provider's bill comes through here, whatever its reader checked:
// a bill whose last line is bad must fail its run with nothing repaired,
// not after the lines before it were.
func checkBill(ctx context.Context, bill model.Bill) error {
	return bill.Entries(func(e model.BillEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return e.Check()
	})
}

// ParseBillDate reads a yyyy-MM-dd Beijing date.
func ParseBillDate(s string) (time.Time, error) {
	t, err := time.ParseInLocation("2006-01-02", s, model.Beijing)
	if err != nil || t.Format("2006-01-02") != s {
		return time.Time{}, fmt.Errorf("%w: date %q is not yyyy-MM-dd", model.ErrInvalidRequest, s)
	}
	return t, nil
}

// FirstBillDate is the first day a bill can be asked for: Alipay opened
// in December 2004, and no provider has a bill of an earlier day.
const FirstBillDate = "2004-12-01"

// CheckBillDate reads a date a run is asked for (yyyy-MM-dd, Beijing) and
// refuses what cannot have a bill: a day before FirstBillDate, or one
// after yesterday as of now (a day's bill is published the next
// morning). It is the edge's check, before anything is claimed or
// fetched; errors wrap model.ErrInvalidRequest.
func CheckBillDate(s string, now time.Time) (time.Time, error) {
	day, err := ParseBillDate(s)
	if err != nil {
		return day, err
	}
	first, _ := ParseBillDate(FirstBillDate)
	if day.Before(first) {
		return time.Time{}, fmt.Errorf("%w: %s is before any bill (the first is of %s)", model.ErrInvalidRequest, s, FirstBillDate)
	}
	n := now.In(model.Beijing)
	if today := time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, model.Beijing); !day.Before(today) {
		return time.Time{}, fmt.Errorf("%w: %s has no bill yet (a day's bill is published the next morning; the latest is of %s)",
			model.ErrInvalidRequest, s, Yesterday(now))
	}
	return day, nil
}

// Yesterday is the Beijing date before now's.
func Yesterday(now time.Time) string {
	return now.In(model.Beijing).AddDate(0, 0, -1).Format("2006-01-02")
}
