package service_test

import (
	"errors"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/model"
)

// A verified payment for an order that does not exist is recorded
// UNMATCHED (no order), answered, announced once; its copy is a duplicate.
// An operator refunds it once: UNMATCHED → REFUND_PENDING → REFUNDING →
// REFUNDED, through the refund worker, with Alipay.
func TestUnmatchedRecordedAndRefundedOnce(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		const tradeNo = "2026113022001400000000000801"
		r.fake.AddPaidTrade("GONE-1", tradeNo, dec("12.34"), r.clock.Now())
		var hooked []model.Payment
		r.payments.OnUnmatched = func(p model.Payment) { hooked = append(hooked, p) }

		if got := r.notify(t, "GONE-1", tradeNo, "12.34"); got != model.OutcomeUnmatched {
			t.Fatalf("first notice: %s", got)
		}
		if got := r.notify(t, "GONE-1", tradeNo, "12.34"); got != model.OutcomeDuplicate {
			t.Fatalf("second notice: %s", got)
		}
		if len(hooked) != 1 {
			t.Fatalf("OnUnmatched told %d times", len(hooked))
		}
		p, err := store.Payment(ctx, model.ProviderAlipay, tradeNo)
		if err != nil || p.State != model.PaymentUnmatched || p.OrderID != 0 || !p.Amount.Equal(dec("12.34")) {
			t.Fatalf("payment %+v, %v", p, err)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE trade_no = ? AND order_id IS NULL", tradeNo); n != 1 {
			t.Fatalf("order_id is not NULL")
		}
		if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE event_type = ?", model.EventPaymentUnmatched); n != 1 {
			t.Fatalf("%d payment.unmatched events", n)
		}
		// Not refunded until an operator says so.
		if _, err := r.refunds.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if tr, _ := r.fake.Trade("GONE-1"); len(tr.Refunds) != 0 {
			t.Fatalf("refunded unasked: %+v", tr.Refunds)
		}

		got, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, tradeNo, "ops-1")
		if err != nil || got.State != model.PaymentRefundPending {
			t.Fatalf("refund: %+v %v", got, err)
		}
		if got, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, tradeNo, "ops-1"); err != nil || got.State != model.PaymentRefundPending {
			t.Fatalf("same key again: %+v %v", got, err)
		}
		if _, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, tradeNo, "ops-2"); !errors.Is(err, model.ErrNotUnmatched) {
			t.Fatalf("another key: %v", err)
		}
		for range 3 {
			if _, err := r.refunds.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		p, _ = store.Payment(ctx, model.ProviderAlipay, tradeNo)
		tr, _ := r.fake.Trade("GONE-1")
		if p.State != model.PaymentRefunded || len(tr.Refunds) != 1 || !tr.Refunds[0].Amount.Equal(dec("12.34")) {
			t.Fatalf("payment %s, Alipay refunds %+v", p.State, tr.Refunds)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE event_type = ?", model.EventRefunded); n != 1 {
			t.Fatalf("%d payment.refunded events", n)
		}
		// A refund without an order has its history too: asked, confirmed.
		if n := r.count(t, "SELECT COUNT(*) FROM oms_refund_change c JOIN oms_refund f ON f.out_request_no = c.out_request_no WHERE f.trade_no = ? AND c.from_state <> c.to_state AND c.to_state IN (?, ?)",
			tradeNo, model.RefundRefunding, model.RefundRefunded); n != 2 {
			t.Errorf("%d changes to REFUNDING or REFUNDED of the refund of an unmatched payment, want 2", n)
		}
		if got, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, tradeNo, "ops-1"); err != nil || got.State != model.PaymentRefunded {
			t.Fatalf("same key after the refund: %+v %v", got, err)
		}

		// A payment with an order is refunded through its order.
		r.order(t, "HAS-ORDER", "1.00")
		r.notify(t, "HAS-ORDER", "2026113022001400000000000802", "1.00")
		if _, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, "2026113022001400000000000802", "ops-3"); !errors.Is(err, model.ErrNotUnmatched) {
			t.Fatalf("refund of a matched payment: %v", err)
		}
		if _, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, "NO-SUCH-TRADE", "ops-4"); !errors.Is(err, model.ErrPaymentNotFound) {
			t.Fatalf("refund of no payment: %v", err)
		}
	})
}

// Many copies of a notification for no order, at once: one UNMATCHED row,
// one event; every copy is answered (unmatched once, duplicates after).
func TestUnmatchedConcurrentCopies(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		const tradeNo = "2026113022001400000000000803"
		outcomes := make([]model.Outcome, 20)
		errs := make([]error, 20)
		at := r.clock.Now().UTC()
		startAll(20, func(i int) {
			_, outcomes[i], errs[i] = r.payments.Observe(ctx, model.Observation{Provider: model.ProviderAlipay, Ref: "n", OutTradeNo: "GONE-2", TradeNo: tradeNo, Amount: dec("3.00"), PaidAt: &at})
		})
		unmatched := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("copy %d: %v", i, err)
			}
			if outcomes[i] == model.OutcomeUnmatched {
				unmatched++
			} else if outcomes[i] != model.OutcomeDuplicate {
				t.Fatalf("copy %d: %s", i, outcomes[i])
			}
		}
		if unmatched != 1 || r.count(t, "SELECT COUNT(*) FROM outbox WHERE event_type = ?", model.EventPaymentUnmatched) != 1 {
			t.Fatalf("%d unmatched outcomes", unmatched)
		}
	})
}

// Reconciliation finds a payment for a deleted order in the bill, records
// it UNMATCHED through the notification path; it is refunded once; a
// console refund of part of it first caps the refund at what is left.
func TestReconcileUnmatchedAndConsoleCap(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		id := r.order(t, "DELETED-1", "40.00")
		const tradeNo = "2026113022001400000000000901"
		r.fake.AddPaidTrade("DELETED-1", tradeNo, dec("40.00"), r.clock.Now())
		if err := r.fake.ConsoleRefund(tradeNo, "CONSOLE-901", dec("15.00")); err != nil {
			t.Fatal(err)
		}
		if _, err := store.SQL().Exec("DELETE FROM oms_order WHERE id = ?", id); err != nil { // a restored backup, a bug
			t.Fatal(err)
		}
		run := r.run(t, r.recon, reconDay)
		if run.Counts[model.ReconUnmatched] != 1 || run.Counts[model.ReconUnknownRefund] != 1 || run.Counts[model.ReconRepaired] != 0 {
			t.Fatalf("run %+v", run)
		}
		p, err := store.Payment(ctx, model.ProviderAlipay, tradeNo)
		if err != nil || p.State != model.PaymentUnmatched {
			t.Fatalf("payment %+v %v", p, err)
		}
		if _, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, tradeNo, "ops-9"); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := r.refunds.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		tr, _ := r.fake.Trade("DELETED-1")
		p, _ = store.Payment(ctx, model.ProviderAlipay, tradeNo)
		if p.State != model.PaymentRefunded || len(tr.Refunds) != 2 || !tr.Refunds[1].Amount.Equal(dec("25.00")) {
			t.Fatalf("payment %s; Alipay's refunds %+v (want the 25.00 left after the console's 15.00)", p.State, tr.Refunds)
		}
		// Run again: the UNMATCHED item stands (refunded, but an operator
		// resolves it), nothing is repaired or recorded twice.
		again := r.run(t, r.recon, reconDay)
		if again.Counts[model.ReconUnknownRefund] != 1 || r.count(t, "SELECT COUNT(*) FROM oms_order_payment") != 1 {
			t.Fatalf("re-run %+v", again)
		}
	})
}

// A refund of an UNMATCHED payment that the provider refuses (signed) is
// an operator's to act on, like any failed refund, though no order holds
// it: retried under the payment's lock, it is sent again with the same
// out_request_no and refunded once; another, resolved, stays failed and
// leaves the queue.
func TestUnmatchedFailedRefundRetriedAndResolved(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		failed := func(sn, tradeNo, key string) model.Refund {
			t.Helper()
			r.fake.AddPaidTrade(sn, tradeNo, dec("12.34"), r.clock.Now())
			if got := r.notify(t, sn, tradeNo, "12.34"); got != model.OutcomeUnmatched {
				t.Fatalf("notice: %s", got)
			}
			if _, err := r.refunds.RefundUnmatched(ctx, model.ProviderAlipay, tradeNo, key); err != nil {
				t.Fatal(err)
			}
			r.fake.FailNext(fakealipay.MethodRefund, "40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH", 1)
			if _, err := r.refunds.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			f, err := store.Refund(ctx, "RP-"+tradeNo)
			if err != nil || f.State != model.RefundFailed || f.OrderID != 0 {
				t.Fatalf("refund %+v, %v: want REFUND_FAILED, no order", f, err)
			}
			return f
		}

		const retried = "2026113022001400000000000901"
		f := failed("GONE-9", retried, "ops-9")
		got, err := r.refunds.Retry(ctx, model.Act{Operator: "alice", Key: "retry-form-0000009"}, f.OutRequestNo)
		if err != nil || got.State != model.RefundRefunding {
			t.Fatalf("Retry = %+v, %v; want REFUNDING", got, err)
		}
		refundAll(t, r.refunds)
		if got, err := store.Refund(ctx, f.OutRequestNo); err != nil || got.State != model.RefundRefunded {
			t.Fatalf("after the retry: %+v, %v; want REFUNDED", got, err)
		}
		if p, err := store.Payment(ctx, model.ProviderAlipay, retried); err != nil || p.State != model.PaymentRefunded {
			t.Fatalf("the payment after the retry: %+v, %v; want REFUNDED", p, err)
		}
		if tr, _ := r.fake.Trade("GONE-9"); len(tr.Refunds) != 1 {
			t.Fatalf("Alipay refunded %d times, want once", len(tr.Refunds))
		}

		const resolved = "2026113022001400000000000902"
		f = failed("GONE-10", resolved, "ops-10")
		act := model.Act{Operator: "alice", Key: "resolve-form-000010", Note: "paid back by bank transfer"}
		if got, err := r.refunds.Resolve(ctx, act, f.OutRequestNo); err != nil || got.State != model.RefundFailed || got.ResolvedBy != "alice" {
			t.Fatalf("Resolve = %+v, %v; want resolved by alice, still REFUND_FAILED", got, err)
		}
		if _, err := r.refunds.Resolve(ctx, act, f.OutRequestNo); !errors.Is(err, model.ErrAlreadyDone) {
			t.Errorf("the same resolve form twice: %v, want already done", err)
		}
	})
}
