package service_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/model"
)

// Every state change of a refund is recorded as it happens, in order: the
// worker's enqueue, a retry after an unknown outcome with its error, a
// signed refusal, an operator's retry, Alipay's confirmation. A change
// that does not happen (the same operator form twice) records nothing.
func TestRefundChangesRecorded(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)
		o := owedBack(t, r, c, "RC", "12.00")
		if n, err := r.refunds.Enqueue(ctx); err != nil || n != 1 {
			t.Fatalf("Enqueue = %d, %v; want 1", n, err)
		}
		f := onlyRefund(t, store, o.ID)

		r.fake.FailNext(fakealipay.MethodRefund, "40004", "ACQ.SYSTEM_ERROR", 1)
		if n, err := r.refunds.Execute(ctx); err != nil || n != 0 {
			t.Fatalf("first Execute = %d, %v; want 0", n, err)
		}
		retryNow(t, store, f.OutRequestNo)
		r.fake.FailNext(fakealipay.MethodRefund, "40004", "ACQ.TRADE_STATUS_ERROR", 1)
		if n, err := r.refunds.Execute(ctx); err != nil || n != 0 {
			t.Fatalf("second Execute = %d, %v; want 0", n, err)
		}
		act := model.Act{Operator: "alice", Key: "retry-form-0000001"}
		if _, err := r.refunds.Retry(ctx, act, f.OutRequestNo); err != nil {
			t.Fatalf("Retry: %v", err)
		}
		if _, err := r.refunds.Retry(ctx, act, f.OutRequestNo); err == nil {
			t.Fatal("the same retry form twice: want it refused")
		}
		if n, err := r.refunds.Execute(ctx); err != nil || n != 1 {
			t.Fatalf("third Execute = %d, %v; want 1", n, err)
		}
		r.fake.WaitNotifications()

		changes, err := store.RefundChanges(ctx, []string{f.OutRequestNo})
		if err != nil {
			t.Fatal(err)
		}
		type change struct {
			From, To model.RefundState
			By       string
			Note     string // a part of it
		}
		var got []change
		for _, ch := range changes {
			// The order is the ids' (the list below says which). create_time
			// is each writer's clock before its commit: the worker's and the
			// refund notification's changes commit concurrently, so their
			// times may swap, and are not compared.
			got = append(got, change{From: ch.From, To: ch.To, By: ch.By, Note: ch.Note})
		}
		// The notes hold Alipay's words; keep the part the test knows.
		for i := range got {
			for _, w := range []string{"ACQ.SYSTEM_ERROR", "ACQ.TRADE_STATUS_ERROR", "refund notification received"} {
				if strings.Contains(got[i].Note, w) {
					got[i].Note = w
				}
			}
		}
		// A refund notification may bring a confirmation forward after the
		// refund is REFUNDED: it names no refund in progress, so records
		// nothing; before it, it is one more retry.
		var trimmed []change
		for _, ch := range got {
			if ch.Note != "refund notification received" {
				trimmed = append(trimmed, ch)
			}
		}
		want := []change{
			{To: model.RefundRefunding},
			{From: model.RefundRefunding, To: model.RefundRefunding, Note: "ACQ.SYSTEM_ERROR"},
			{From: model.RefundRefunding, To: model.RefundRefunding}, // retryNow
			{From: model.RefundRefunding, To: model.RefundFailed, Note: "ACQ.TRADE_STATUS_ERROR"},
			{From: model.RefundFailed, To: model.RefundRefunding, By: "alice"},
			{From: model.RefundRefunding, To: model.RefundRefunded},
		}
		if diff := cmp.Diff(want, trimmed); diff != "" {
			t.Errorf("refund changes (-want +got):\n%s", diff)
		}
	})
}

// With LeavePending the worker leaves money owed back to an operator: its
// rounds send no refund until one is queued (RefundPayment), then send
// that one.
func TestRefundsLeavePending(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)
		o := owedBack(t, r, c, "LP", "12.00")
		r.refunds.LeavePending = true
		defer func() { r.refunds.LeavePending = false }()
		if n, err := r.refunds.RunOnce(ctx); err != nil || n != 0 {
			t.Fatalf("RunOnce = %d, %v; want 0", n, err)
		}
		ps := mustPayments(t, store, o.ID)
		if ps[0].State != model.PaymentRefundPending {
			t.Fatalf("after a round the payment is %s, want REFUND_PENDING (left to the operator)", ps[0].State)
		}
		act := model.Act{Operator: "alice", Key: "queue-form-0000001"}
		if _, err := r.refunds.RefundPayment(ctx, act, ps[0].Provider, ps[0].TradeNo); err != nil {
			t.Fatalf("RefundPayment: %v", err)
		}
		if n, err := r.refunds.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("RunOnce after the operator queued it = %d, %v; want 1", n, err)
		}
		if got := onlyRefund(t, store, o.ID); got.State != model.RefundRefunded {
			t.Fatalf("refund %s, want REFUNDED", got.State)
		}
	})
}
