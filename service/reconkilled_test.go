package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// killingBill is a bill of one payment the ledger lacks whose reading
// stops the attempt, as kill -9 would, once that payment's repair is
// counted in the attempt's row (which, before repairs were counted as
// they commit, never happened): the attempt never finishes. Its first
// reading, the check of every line before the first repair, reads it whole.
type killingBill struct {
	reads int // the run reads a bill twice: its check of every line, then its matching
	entry model.BillEntry
	store *dao.Store
	kill  context.CancelFunc
}

func (b *killingBill) BillTotals() model.BillTotals {
	return model.BillTotals{Payments: 1, PaymentReceived: b.entry.Received}
}

func (b *killingBill) Entries(fn func(model.BillEntry) error) error {
	if err := fn(b.entry); err != nil {
		return err
	}
	if b.reads++; b.reads == 1 {
		return nil // the check before any repair: nothing is repaired yet
	}
	// Batch 1: the line is being repaired; wait until it is counted.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		run, err := b.store.ReconRun(context.Background(), model.BillAccount{Provider: model.ProviderAlipay}, reconDay)
		if err != nil {
			continue
		}
		if as, err := b.store.ReconAttempts(context.Background(), run.ID); err == nil && len(as) == 1 && as[0].Repaired == 1 {
			b.kill()
			return context.Canceled
		}
	}
	b.kill()
	return errors.New("the repair was never counted")
}

func (b *killingBill) Close() error { return nil }

// TestKilledAttemptAbandoned: an attempt that dies after repairing says so
// in the history — its repair counted as it committed, and ABANDONED once
// the run is claimed again — instead of RUNNING with nothing repaired.
func TestKilledAttemptAbandoned(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "KILL-1", "10.00")
		paidAt := bjTime(t, reconDay+" 11:00:00").UTC()
		entry := model.BillEntry{Kind: model.BillPayment, TradeNo: "2026113022001400000000000077", OutTradeNo: "KILL-1",
			Amount: decimal.RequireFromString("10.00"), Received: decimal.RequireFromString("10.00"), FinishedAt: paidAt}
		runCtx, kill := context.WithCancel(context.Background())
		defer kill()
		dying := service.NewBillReconciler(store, service.BillSourceFunc(func(ctx context.Context, d time.Time) (model.Bill, error) {
			return &killingBill{entry: entry, store: store, kill: kill}, nil
		}), r.payments, quietLog)
		now := func() time.Time { return r.clock.Now().Add(24 * time.Hour) }
		dying.SetClock(now)
		dying.SetOwner("instance-killed")
		dying.Batch = 1
		if _, err := dying.Run(runCtx, reconDay); !errors.Is(err, context.Canceled) {
			t.Fatalf("the dying attempt: %v", err)
		}
		attempts := func() []model.ReconAttempt {
			t.Helper()
			run, err := store.ReconRun(ctx, model.BillAccount{Provider: model.ProviderAlipay}, reconDay)
			if err != nil {
				t.Fatal(err)
			}
			as, err := store.ReconAttempts(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			return as
		}
		if as := attempts(); len(as) != 1 || as[0].State != model.ReconRunning || as[0].Repaired != 1 {
			t.Fatalf("after the kill: %+v, want attempt 1 RUNNING with its repair counted", as)
		}

		// Once the lease has ended, another instance takes the run.
		r.clock.mu.Lock()
		r.clock.at = r.clock.at.Add(11 * time.Minute)
		r.clock.mu.Unlock()
		run := r.run(t, r.recon, reconDay)
		if run.State != model.ReconDone || run.Attempts != 2 {
			t.Fatalf("the next attempt: %+v", run)
		}
		as := attempts()
		if len(as) != 2 || as[0].State != model.ReconAbandoned || as[0].Repaired != 1 || as[0].FinishedAt == nil || as[0].Error == "" ||
			as[1].State != model.ReconDone || as[1].Repaired != 0 {
			t.Fatalf("history: %+v, want attempt 1 ABANDONED (1 repaired), attempt 2 DONE repairing nothing twice", as)
		}
	})
}
