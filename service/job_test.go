package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"paynotify/service"
)

// RunJobs runs every job round after round — a failing round does not stop
// its job, a full round is followed at once — and returns when its context
// ends.
func TestRunJobs(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu     sync.Mutex
		rounds = map[string]int{}
		errs   = map[string]int{}
	)
	failing := service.Job{Name: "failing", Interval: time.Millisecond, RunOnce: func(context.Context) (int, error) {
		return 0, errors.New("this row keeps failing")
	}}
	// A whole batch every round for five rounds: with an hour between
	// rounds, only Full gets it there.
	busy := 0
	backlog := service.Job{Name: "backlog", Interval: time.Hour,
		RunOnce: func(context.Context) (int, error) { busy++; return 10, nil },
		Full:    func(int) bool { return busy < 5 },
	}
	enough := make(chan struct{})
	var once sync.Once
	onRound := func(r service.Round) {
		mu.Lock()
		defer mu.Unlock()
		rounds[r.Job]++
		if r.Err != nil {
			errs[r.Job]++
		}
		if rounds["failing"] >= 3 && rounds["backlog"] >= 5 {
			once.Do(func() { close(enough) })
		}
	}
	done := make(chan error, 1)
	go func() { done <- service.RunJobs(ctx, quietLog, onRound, failing, backlog) }()
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("rounds %v after 30 s, want 3 failing and 5 backlog", rounds)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunJobs: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunJobs did not return after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if rounds["backlog"] != 5 || errs["failing"] < 3 {
		t.Fatalf("rounds %v, errors %v: want exactly 5 backlog rounds (then an hour's wait), every failing round reported", rounds, errs)
	}
}
