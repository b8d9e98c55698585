package service_test

import (
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
)

// TestWechatPayRefundAsksBeforeAgain: through the real adapter and the
// fake WeChat Pay at its wire protocol. A refund answered by an unsigned
// 403 NOT_ENOUGH (anyone on the path could write it: the outcome is
// unknown, and here the refund was made) is queried by out_refund_no
// before anything is sent again, and found REFUNDED with one refund call.
// A refund that never arrived is sent again only once a query says WeChat
// Pay has no such refund, never after a query that went unanswered.
// A refund the query finds ABNORMAL waits for an operator (REFUND_FAILED,
// in the console's queue of failed refunds) and is never sent again.
func TestWechatPayRefundAsksBeforeAgain(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newWechatRig(t, store)
		w := service.NewRefunds(store, service.Providers{model.ProviderWechatpay: r.provider}, quietLog)
		clock := &settable{at: time.Now().Add(time.Minute)} // past every refund the test records
		service.SetRefundsClock(w, clock.Now)
		later := func() {
			clock.mu.Lock()
			clock.at = clock.at.Add(2 * time.Hour)
			clock.mu.Unlock()
		}
		refund := func(sn, transactionID string) model.Refund {
			t.Helper()
			r.order(t, sn, "10.00")
			r.wx.AddPaidTrade(sn, transactionID, 1000, r.clock.Now())
			r.notifyWechat(t, sn, transactionID, "10.00")
			f, err := w.Request(ctx, sn, "key-"+sn, dec("10.00"), "after-sale")
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		state := func(no string) model.Refund {
			t.Helper()
			f, err := store.Refund(ctx, no)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}

		t.Run("UnsignedNotEnough", func(t *testing.T) {
			f := refund("WXR-1", "4200002026113000000000000901")
			calls, queries := r.wx.Calls("refund"), r.wx.Calls("refund query")
			r.wx.ForgeFailNext("refund", 403, "NOT_ENOUGH", 1)
			if _, err := w.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			if got := state(f.OutRequestNo); got.State != model.RefundRefunding {
				t.Fatalf("after an unsigned 403: %s %q, want REFUNDING (unknown)", got.State, got.LastError)
			}
			later()
			if _, err := w.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			if got := state(f.OutRequestNo); got.State != model.RefundRefunded {
				t.Fatalf("after the query: %s %q, want REFUNDED", got.State, got.LastError)
			}
			if n := r.wx.Calls("refund") - calls; n != 1 {
				t.Errorf("%d refund calls, want 1: sent again without asking", n)
			}
			if n := r.wx.Calls("refund query") - queries; n < 1 {
				t.Errorf("no refund query before deciding")
			}
		})
		t.Run("DroppedThenAsked", func(t *testing.T) {
			// The refund never reached WeChat Pay (a proxy's unsigned 502).
			// The next round asks first, and the ask itself goes unanswered:
			// nothing is sent. The round after learns there is no such
			// refund, and only then sends it again.
			f := refund("WXR-3", "4200002026113000000000000903")
			calls, queries := r.wx.Calls("refund"), r.wx.Calls("refund query")
			r.wx.DropNext("refund", 1)
			if _, err := w.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			later()
			r.wx.DropNext("refund query", 1)
			if _, err := w.Execute(ctx); err != nil {
				t.Fatal(err)
			}
			if got := state(f.OutRequestNo); got.State != model.RefundRefunding {
				t.Fatalf("after an unanswered query: %s %q, want REFUNDING", got.State, got.LastError)
			}
			if n := r.wx.Calls("refund") - calls; n != 1 {
				t.Fatalf("%d refund calls, want 1: sent again though the query went unanswered", n)
			}
			for range 3 { // sent again (PROCESSING), then found SUCCESS
				later()
				if _, err := w.Execute(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := state(f.OutRequestNo); got.State != model.RefundRefunded {
				t.Fatalf("after the query found nothing: %s %q, want REFUNDED", got.State, got.LastError)
			}
			if n, q := r.wx.Calls("refund")-calls, r.wx.Calls("refund query")-queries; n != 2 || q < 3 {
				t.Errorf("%d refund calls and %d queries, want 2 refunds, each retry after a query", n, q)
			}
		})
		t.Run("Abnormal", func(t *testing.T) {
			f := refund("WXR-2", "4200002026113000000000000902")
			calls := r.wx.Calls("refund")
			r.wx.SettleNextRefunds(wechatpay.RefundAbnormal, 1)
			if _, err := w.Execute(ctx); err != nil { // answered PROCESSING
				t.Fatal(err)
			}
			for range 3 {
				later()
				if _, err := w.Execute(ctx); err != nil {
					t.Fatal(err)
				}
			}
			got := state(f.OutRequestNo)
			if got.State != model.RefundFailed || got.ResolvedTime != nil || !strings.Contains(got.LastError, "ABNORMAL") {
				t.Fatalf("an ABNORMAL refund: %s %q, want REFUND_FAILED for an operator", got.State, got.LastError)
			}
			if n := r.wx.Calls("refund") - calls; n != 1 {
				t.Errorf("%d refund calls, want 1: an ABNORMAL refund was sent again", n)
			}
		})
	})
}
