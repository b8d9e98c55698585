package dao_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// A lookup by something that cannot be an identifier of ours finds
// nothing, on both drivers, rather than failing with MySQL's refusal to
// compare a non-ASCII value with an ASCII column ("Illegal mix of
// collations"). The handler refuses such values first; this is for every
// other caller.
func TestForeignIdentifiersFindNothing(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		for _, id := range []string{"🙂", "订单1", "A B", strings.Repeat("9", 129)} {
			if _, err := store.Order(ctx, id); !errors.Is(err, model.ErrOrderNotFound) {
				t.Errorf("Order(%q): %v, want ErrOrderNotFound", id, err)
			}
			err := store.UpdateOrder(ctx, dao.OrderSN(id), dao.ForUpdate, func(context.Context, *dao.OrderTx, model.Order) error {
				t.Errorf("UpdateOrder(%q) found an order", id)
				return nil
			})
			if !errors.Is(err, model.ErrOrderNotFound) {
				t.Errorf("UpdateOrder(%q): %v, want ErrOrderNotFound", id, err)
			}
			if _, err := store.Payment(ctx, model.ProviderAlipay, id); !errors.Is(err, model.ErrPaymentNotFound) {
				t.Errorf("Payment(%q): %v, want ErrPaymentNotFound", id, err)
			}
			if _, err := store.AttemptByOutTradeNo(ctx, id); !errors.Is(err, model.ErrAttemptNotFound) {
				t.Errorf("AttemptByOutTradeNo(%q): %v, want ErrAttemptNotFound", id, err)
			}
			if _, err := store.Refund(ctx, id); !errors.Is(err, model.ErrRefundNotFound) {
				t.Errorf("Refund(%q): %v, want ErrRefundNotFound", id, err)
			}
			if err := store.RetryRefundAt(ctx, id, time.Now(), "notified"); err != nil {
				t.Errorf("RetryRefundAt(%q): %v, want nothing done", id, err)
			}
			for _, pair := range [][2]string{{id, "SN-1"}, {"T-1", id}} {
				if p, a, err := store.TradeLookup(ctx, model.ProviderAlipay, pair[0], pair[1]); p != nil || a != nil || err != nil {
					t.Errorf("TradeLookup(%q, %q): %v %v %v, want nothing found", pair[0], pair[1], p, a, err)
				}
			}
		}
	})
}
