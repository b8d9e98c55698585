package lock_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"paynotify/lock"
	"paynotify/lock/redistest"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// ttl is short, so that a test sees several lifetimes of a lock.
const ttl = 300 * time.Millisecond

// newLocker is a lock.Redis on addr, closed when the test ends.
func newLocker(t *testing.T, addr string) *lock.Redis {
	t.Helper()
	r := lock.New(addr, quietLog)
	t.Cleanup(func() { r.Close() })
	return r
}

// newClient is a plain Redis client, for looking at and tampering with
// keys around the locker.
func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// mustHold takes key or fails the test.
func mustHold(t *testing.T, r *lock.Redis, key string, ttl time.Duration) (func(), <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	release, lost, err := r.Hold(ctx, key, ttl)
	if err != nil {
		t.Fatalf("Hold %s: %v", key, err)
	}
	return release, lost
}

// tryHold tries to take key until within has passed.
func tryHold(r *lock.Redis, key string, within time.Duration) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	release, _, err := r.Hold(ctx, key, ttl)
	return release, err
}

// A holder keeps its lock for many times its TTL by renewing it: another
// Hold waiting five TTLs never gets it, and one waiting meanwhile gets it
// as soon as it is released.
func TestHoldRenewsPastTTL(t *testing.T) {
	addr := redistest.Addr(t)
	key := redistest.Prefix(t) + "renew"
	holder, other := newLocker(t, addr), newLocker(t, addr)
	rc := newClient(t, addr)

	release, lost := mustHold(t, holder, key, ttl)

	var released atomic.Bool
	type result struct {
		err           error
		afterReleased bool
	}
	waiter := make(chan result, 1)
	go func() {
		rel, err := tryHold(other, key, 10*time.Second)
		res := result{err: err, afterReleased: released.Load()}
		if err == nil {
			rel()
		}
		waiter <- res
	}()

	if _, err := tryHold(other, key, 5*ttl); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Hold within 5 TTLs = %v, want it refused with context.DeadlineExceeded", err)
	}
	select {
	case <-lost:
		t.Fatal("lost closed while the lock was renewed")
	case res := <-waiter:
		t.Fatalf("the waiting Hold returned (%v) while the lock was held", res.err)
	default:
	}
	if pttl, err := rc.PTTL(t.Context(), key).Result(); err != nil || pttl <= 0 {
		t.Fatalf("after 5 TTLs the key has PTTL %v (%v), want it alive", pttl, err)
	}

	released.Store(true)
	release()
	select {
	case res := <-waiter:
		if res.err != nil || !res.afterReleased {
			t.Fatalf("waiting Hold: %v (after release: %v), want the lock after the release", res.err, res.afterReleased)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Hold did not get the lock after the release")
	}
}

// A holder that dies stops renewing: its lock expires after its TTL, and
// the next Hold gets it.
func TestDeadHolderExpires(t *testing.T) {
	addr := redistest.Addr(t)
	t.Run("SetWithoutRenewal", func(t *testing.T) {
		key := redistest.Prefix(t) + "dead"
		rc := newClient(t, addr)
		// What a holder leaves behind when it dies right after SET NX PX.
		if ok, err := rc.SetNX(t.Context(), key, "dead-token", ttl).Result(); err != nil || !ok {
			t.Fatalf("SET NX: %v %v", ok, err)
		}
		release, err := tryHold(newLocker(t, addr), key, 10*time.Second)
		if err != nil {
			t.Fatalf("Hold after the dead holder's TTL: %v", err)
		}
		defer release()
		if v, err := rc.Get(t.Context(), key).Result(); err != nil || v == "dead-token" {
			t.Fatalf("key holds %q (%v), want a new owner's token", v, err)
		}
	})
	t.Run("HolderConnectionGone", func(t *testing.T) {
		key := redistest.Prefix(t) + "gone"
		dying := lock.New(addr, quietLog)
		release, _ := mustHold(t, dying, key, ttl)
		// The process's Redis connections go with it: renewals fail.
		dying.Close()
		defer release() // stops the renewal goroutine; its DEL fails harmlessly
		rel, err := tryHold(newLocker(t, addr), key, 10*time.Second)
		if err != nil {
			t.Fatalf("Hold after the holder lost Redis: %v", err)
		}
		rel()
	})
}

// Only the owner releases or renews: a release after someone else took
// the key leaves their lock alone, and the renewal reports the loss.
func TestNonOwnerCannotRelease(t *testing.T) {
	addr := redistest.Addr(t)
	key := redistest.Prefix(t) + "owner"
	rc := newClient(t, addr)
	release, lost := mustHold(t, newLocker(t, addr), key, ttl)

	// As if our lock had expired during a stall and another took it.
	if err := rc.Set(t.Context(), key, "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("lost not closed after the key went to another owner")
	}
	release()
	if v, err := rc.Get(t.Context(), key).Result(); err != nil || v != "someone-else" {
		t.Fatalf("after our release the key holds %q (%v), want the other owner's token", v, err)
	}
	if pttl, err := rc.PTTL(t.Context(), key).Result(); err != nil || pttl < 50*time.Second {
		t.Fatalf("the other owner's TTL is %v (%v): our renewal touched it", pttl, err)
	}
	rc.Del(t.Context(), key)
}

// Many goroutines in two lockers taking one key over and over: never two
// inside at once.
func TestHoldExcludes(t *testing.T) {
	addr := redistest.Addr(t)
	key := redistest.Prefix(t) + "mutex"
	lockers := []*lock.Redis{newLocker(t, addr), newLocker(t, addr)}
	const goroutines, rounds = 16, 5
	var inside, maxInside, entered atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds)
	for g := range goroutines {
		r := lockers[g%len(lockers)]
		wg.Go(func() {
			for range rounds {
				release, err := tryHold(r, key, 30*time.Second)
				if err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				entered.Add(1)
				runtime.Gosched()
				inside.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxInside.Load() != 1 || entered.Load() != goroutines*rounds {
		t.Fatalf("%d entries, at most %d inside at once; want %d entries, one at a time", entered.Load(), maxInside.Load(), goroutines*rounds)
	}
}

// With Redis down, Hold says so (lock.ErrUnavailable) rather than waiting
// for the lock as if someone held it; back up, it locks again.
func TestHoldRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	r := newLocker(t, srv.Addr())
	key := redistest.Prefix(t) + "down"
	release, _ := mustHold(t, r, key, ttl)
	release()

	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// ErrUnavailable, not a deadline error: Hold did not wait as for a
	// lock someone holds.
	if _, _, err := r.Hold(ctx, key, ttl); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Hold with Redis down = %v, want lock.ErrUnavailable", err)
	}

	srv.Start()
	release, _ = mustHold(t, r, key, ttl)
	release()
}
