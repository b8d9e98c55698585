package console

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sign-in limits: past maxFailures failed attempts within failureWindow
// for one key (a client address, an operator name), that key must wait
// until the window ends. Per instance: several instances each allow as
// many, which still bounds a guesser to a few attempts a minute.
const (
	failureWindow = 15 * time.Minute
	maxFailures   = 5
	// maxKeys bounds the memory a flood of addresses can take.
	maxKeys = 50000
)

// limiter counts failed sign-ins per key in fixed windows.
type limiter struct {
	now  func() time.Time
	mu   sync.Mutex
	keys map[string]*failures
}

type failures struct {
	n     int
	start time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{now: now, keys: map[string]*failures{}}
}

// wait is how long the caller must wait before trying any of keys again
// (0: go ahead).
func (l *limiter) wait(keys ...string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var longest time.Duration
	for _, k := range keys {
		f := l.keys[k]
		if f == nil || now.Sub(f.start) >= failureWindow {
			continue
		}
		if f.n >= maxFailures {
			longest = max(longest, f.start.Add(failureWindow).Sub(now))
		}
	}
	return longest
}

// fail counts a failed attempt against every key.
func (l *limiter) fail(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.keys) >= maxKeys {
		l.prune(now)
	}
	for _, k := range keys {
		f := l.keys[k]
		if f == nil || now.Sub(f.start) >= failureWindow {
			f = &failures{start: now}
			l.keys[k] = f
		}
		f.n++
	}
}

// reset forgets a key's failures (its operator signed in).
func (l *limiter) reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
}

// prune drops windows that ended; if that is not enough, arbitrary ones
// (a flood from many addresses must not grow memory without bound).
func (l *limiter) prune(now time.Time) {
	for k, f := range l.keys {
		if now.Sub(f.start) >= failureWindow {
			delete(l.keys, k)
		}
	}
	for k := range l.keys {
		if len(l.keys) < maxKeys*9/10 {
			break
		}
		if !strings.HasPrefix(k, "name:") { // keep the per-name limits
			delete(l.keys, k)
		}
	}
}

func seconds(d time.Duration) string {
	return strconv.Itoa(int(d.Round(time.Second) / time.Second))
}
