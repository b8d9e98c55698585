package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// A run asked for through the admin API answers as it ended when it ends
// within the request; a run that does not (a big day: here, a bill that
// does not come until the request is over) is answered RUNNING and goes on
// after its request, to the end.
func TestRunAskedOutlivesItsRequest(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RA-PAID", "10.00")
		r.fake.AddPaidTrade("RA-PAID", "2026113022001400000000000301", dec("10.00"), r.clock.Now())
		r.notify(t, "RA-PAID", "2026113022001400000000000301", "10.00")

		asked, release := make(chan struct{}, 1), make(chan struct{})
		held := true
		bills := service.BillSourceFunc(func(ctx context.Context, day time.Time) (model.Bill, error) {
			if held {
				asked <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return billsOf(r.gw).TradeBill(ctx, day)
		})
		rec := service.NewBillReconciler(store, bills, r.payments, quietLog)
		rec.SetClock(func() time.Time { return r.clock.Now().Add(24 * time.Hour) })
		rec.Background = ctx

		// The request's deadline passes while the bill is held.
		request, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		run, done, err := rec.RunAsked(request, reconDay)
		cancel()
		if err != nil || done || run.State != model.ReconRunning || run.BillDate != reconDay {
			t.Fatalf("run asked, bill held: %+v done=%v %v; want RUNNING, not done", run, done, err)
		}
		<-asked
		close(release)
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := store.ReconRun(ctx, model.BillAccount{Provider: model.ProviderAlipay}, reconDay)
			if err != nil {
				t.Fatal(err)
			}
			if got.State == model.ReconDone {
				if got.Bill.Payments != 1 || got.Unresolved != 0 {
					t.Errorf("run after its request: %+v", got)
				}
				break
			}
			if got.State != model.ReconRunning || time.Now().After(deadline) {
				t.Fatalf("run after its request: %s, want it to go on to DONE", got.State)
			}
			time.Sleep(10 * time.Millisecond)
		}

		// Within the request: answered as it ended. (A minute on: the
		// ask's audit key holds its time.)
		held = false
		r.clock.mu.Lock()
		r.clock.at = r.clock.at.Add(time.Minute)
		r.clock.mu.Unlock()
		request, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		run, done, err = rec.RunAsked(request, reconDay)
		if err != nil || !done || run.State != model.ReconDone {
			t.Fatalf("run asked again: %+v done=%v %v; want DONE", run, done, err)
		}
	})
}

// A run asked for while the service stops is answered unavailable (and
// stays RUNNING, for the next instance to take once its lease ends), not
// as a failure.
func TestRunAskedWhileStopping(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	r := newReconRig(t, store)
	asked := make(chan struct{}, 1)
	bills := service.BillSourceFunc(func(ctx context.Context, day time.Time) (model.Bill, error) {
		asked <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	rec := service.NewBillReconciler(store, bills, r.payments, quietLog)
	rec.SetClock(func() time.Time { return r.clock.Now().Add(24 * time.Hour) })
	lifetime, stop := context.WithCancel(ctx)
	rec.Background = lifetime
	go func() { <-asked; stop() }()
	request, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, _, err := rec.RunAsked(request, reconDay); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("asked while stopping: %v, want ErrUnavailable", err)
	}
	if got, err := store.ReconRun(ctx, model.BillAccount{Provider: model.ProviderAlipay}, reconDay); err != nil || got.State != model.ReconRunning {
		t.Fatalf("run after the stop: %+v %v, want RUNNING", got, err)
	}
}
