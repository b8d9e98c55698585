package service_test

import (
	"errors"
	"fmt"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/model"
)

// A refund we hold as REFUND_FAILED that Alipay made after all is
// UNKNOWN_REFUND and now counts against its payment: a later refund of
// what is left plus a cent is refused; the refund is booked once however
// often the date is run, and stays a difference until resolved.
func TestReconcileFailedRefundMade(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-FAILMADE", "100.00")
		const tradeNo = "2026113022001400000000000601"
		r.fake.AddPaidTrade("RC-FAILMADE", tradeNo, dec("100.00"), r.clock.Now())
		r.notify(t, "RC-FAILMADE", tradeNo, "100.00")
		f, err := r.refunds.Request(ctx, "RC-FAILMADE", "rma-f1", dec("60.00"), "returned")
		if err != nil {
			t.Fatal(err)
		}
		// Alipay made it; we recorded a refusal (a lost answer, a bug).
		if _, err := store.SQL().Exec("UPDATE oms_refund SET state = ? WHERE out_request_no = ?", model.RefundFailed, f.OutRequestNo); err != nil {
			t.Fatal(err)
		}
		if err := r.fake.ConsoleRefund(tradeNo, f.OutRequestNo, dec("60.00")); err != nil {
			t.Fatal(err)
		}

		for i := range 2 {
			run := r.run(t, r.recon, reconDay)
			if run.Counts[model.ReconUnknownRefund] != 1 || run.Unresolved != 1 {
				t.Fatalf("run %d: %+v", i, run)
			}
		}
		if got, err := store.Refund(ctx, f.OutRequestNo); err != nil || got.State != model.RefundRefunded {
			t.Fatalf("the refund Alipay made: %+v %v", got, err)
		}
		// Settled once (two runs), by reconciliation, in its history.
		changes, err := store.RefundChanges(ctx, []string{f.OutRequestNo})
		if err != nil {
			t.Fatal(err)
		}
		if last := changes[len(changes)-1]; len(changes) != 2 || last.From != model.RefundFailed || last.To != model.RefundRefunded || last.By != "reconciliation" {
			t.Errorf("refund changes %+v: want its request, then REFUND_FAILED → REFUNDED by reconciliation", changes)
		}
		if _, err := r.refunds.Request(ctx, "RC-FAILMADE", "rma-f2", dec("40.01"), "returned"); !errors.Is(err, model.ErrRefundTooLarge) {
			t.Fatalf("refund of 40.01 of the 40.00 left: %v", err)
		}
		if _, err := r.refunds.Request(ctx, "RC-FAILMADE", "rma-f3", dec("40.00"), "returned"); err != nil {
			t.Fatalf("refund of the 40.00 left: %v", err)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE event_type = ? AND payload LIKE ?", model.EventRefunded, "%"+f.OutRequestNo+"%"); n != 1 {
			t.Errorf("%d payment.refunded events for the refund Alipay made", n)
		}
	})
}

// Every payment the bill lacks is an item, however many: the run pages
// through them (here two at a time) rather than stopping at a cap.
func TestReconcileEveryMissingRecorded(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		for i := range 5 {
			sn := fmt.Sprintf("RC-MANY-%d", i)
			r.order(t, sn, "1.00")
			r.notify(t, sn, fmt.Sprintf("20261130220014000000000007%02d", i), "1.00") // the fake never heard of them
		}
		run := r.run(t, r.recon, reconDay)
		if run.State != model.ReconDone || run.Counts[model.ReconMissingAtProvider] != 5 || run.Unresolved != 5 {
			t.Fatalf("run %+v", run)
		}
	})
}

// A console refund of a payment the ledger lacks, both in one bill: the
// run repairs the payment from its bill line and records the refund
// against it — even when the refund's line comes first and is matched
// before the payment's.
func TestReconcileConsoleRefundOfLostPayment(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-LOSTREF", "100.00")
		const tradeNo = "2026113022001400000000000801"
		r.fake.AddPaidTrade("RC-LOSTREF", tradeNo, dec("100.00"), r.clock.Now()) // its notification lost
		if err := r.fake.ConsoleRefund(tradeNo, "CONSOLE-801", dec("70.00")); err != nil {
			t.Fatal(err)
		}
		// The payment's line after the refund's, one line a batch, in
		// file order.
		r.fake.BillFinishedAt(tradeNo, bjTime(t, reconDay+" 23:00:00"))
		rec := r.instance("instance-a")
		rec.Batch, rec.Workers = 1, 1

		run := r.run(t, rec, reconDay)
		if run.Counts[model.ReconRepaired] != 1 || run.Counts[model.ReconUnknownRefund] != 1 {
			t.Fatalf("run %+v", run)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM oms_refund WHERE kind = 'CONSOLE' AND trade_no = ?", tradeNo); n != 1 {
			t.Fatalf("%d console refunds recorded against the repaired payment", n)
		}
		if _, err := r.refunds.Request(ctx, "RC-LOSTREF", "rma-l1", dec("30.01"), "returned"); !errors.Is(err, model.ErrRefundTooLarge) {
			t.Fatalf("refund of 30.01 of the 30.00 left: %v", err)
		}
	})
}

// A refund Alipay made just before midnight that we confirmed after it (a
// lost answer, queried later) sits in one day's bill and the next day's
// ledger window. Reconciled out of order — the next day first — it is
// REFUND_MISSING_AT_PROVIDER there until its own day's run finds it in the
// bill, which resolves that item.
func TestReconcileRefundAcrossMidnight(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-MIDNIGHT", "50.00")
		const tradeNo = "2026113022001400000000000901"
		r.fake.AddPaidTrade("RC-MIDNIGHT", tradeNo, dec("50.00"), r.clock.Now())
		r.notify(t, "RC-MIDNIGHT", tradeNo, "50.00")
		f, err := r.refunds.Request(ctx, "RC-MIDNIGHT", "rma-m1", dec("10.00"), "returned")
		if err != nil {
			t.Fatal(err)
		}
		r.clock.mu.Lock()
		r.clock.at = bjTime(t, reconDay+" 23:50:00")
		r.clock.mu.Unlock()
		if err := r.fake.ConsoleRefund(tradeNo, f.OutRequestNo, dec("10.00")); err != nil { // Alipay makes it
			t.Fatal(err)
		}
		if _, err := store.SQL().Exec("UPDATE oms_refund SET state = ?, update_time = ? WHERE out_request_no = ?",
			model.RefundRefunded, bjTime(t, "2026-12-01 03:00:00").UTC(), f.OutRequestNo); err != nil { // we confirm it at 03:00
			t.Fatal(err)
		}
		r.clock.mu.Lock()
		r.clock.at = bjTime(t, "2026-12-01 10:00:00")
		r.clock.mu.Unlock()

		next := r.run(t, r.recon, "2026-12-01")
		if next.Counts[model.ReconRefundMissingAtProvider] != 1 || next.Unresolved != 1 {
			t.Fatalf("the next day's run first: %+v", next)
		}
		if day := r.run(t, r.recon, reconDay); day.Unresolved != 0 {
			t.Fatalf("the day's run: %+v", day)
		}
		d, err := r.recon.Detail(ctx, "2026-12-01", model.ReconRefundMissingAtProvider, 0)
		if err != nil || d.Unresolved != 0 || len(d.Items) != 1 || d.Items[0].ResolvedBy != "reconciliation" {
			t.Fatalf("the next day's item once the day's bill has it: %+v %v", d, err)
		}
	})
}

// A failed refund is not sent again over what its payment has left: an
// operator who refunded the buyer another way meanwhile (a second refund
// of the same amount) is refused the retry of the first, which would
// refund more than was paid.
func TestRetryRefusedOverWhatIsLeft(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-RETRYCAP", "100.00")
		const tradeNo = "2026113022001400000000000611"
		r.fake.AddPaidTrade("RC-RETRYCAP", tradeNo, dec("100.00"), r.clock.Now())
		r.notify(t, "RC-RETRYCAP", tradeNo, "100.00")
		first, err := r.refunds.Request(ctx, "RC-RETRYCAP", "rma-c1", dec("60.00"), "returned")
		if err != nil {
			t.Fatal(err)
		}
		r.fake.FailNext(fakealipay.MethodRefund, "40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH", 1)
		refundAll(t, r.refunds)
		if got, err := store.Refund(ctx, first.OutRequestNo); err != nil || got.State != model.RefundFailed {
			t.Fatalf("first refund %+v, %v: want REFUND_FAILED", got, err)
		}
		if _, err := r.refunds.Request(ctx, "RC-RETRYCAP", "rma-c2", dec("60.00"), "returned, again"); err != nil {
			t.Fatal(err)
		}
		refundAll(t, r.refunds)
		if _, err := r.refunds.Retry(ctx, model.Act{Operator: "alice", Key: "retry-form-cap00001"}, first.OutRequestNo); !errors.Is(err, model.ErrRefundTooLarge) {
			t.Fatalf("retry of 60.00 with 40.00 left: %v, want refused", err)
		}
		if got, err := store.Refund(ctx, first.OutRequestNo); err != nil || got.State != model.RefundFailed {
			t.Errorf("the refused retry moved the refund: %+v, %v", got, err)
		}
		if tr, _ := r.fake.Trade("RC-RETRYCAP"); len(tr.Refunds) != 1 {
			t.Errorf("Alipay refunded %d times, want once", len(tr.Refunds))
		}
	})
}
