package console

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sign-in limits, per instance, in fixed windows of failureWindow. Every
// try is counted before its password is checked, so a burst of tries at
// once is limited as surely as tries one after another; a sign-in gives
// its try back. Past a limit, the tries it covers wait until its window
// ends:
//   - perPair tries for one name from one client address: what a guesser
//     at one operator gets;
//   - perAddress tries from one address, whatever the names;
//   - global tries from everywhere, which bounds a guesser spread over
//     many addresses (and the bcrypt work they cost).
//
// None of these applies to a browser that has signed in as the name
// before (it holds a device cookie only that operator's password could
// have earned): its tries count against that cookie alone (perPair of
// them), which nobody without it can spend. So a stranger — on the same
// address, or behind the same reverse proxy — cannot lock a returning
// operator out, and a stolen cookie still buys only perPair guesses.
const (
	failureWindow = 15 * time.Minute
	perPair       = 5
	perAddress    = 20
	global        = 100
	// maxKeys bounds the memory a flood of addresses and names can take.
	maxKeys = 50000
)

// limit is one counter and how many tries its window allows.
type limit struct {
	key string
	max int
}

const globalKey = "global"

// signInLimits are the counters a sign-in try for name from addr is
// counted against: device, when the browser holds a live device cookie
// for name (Console.device), replaces every counter a stranger could
// spend with the cookie's own. The first is the one a sign-in resets.
func signInLimits(addr, name, device string) []limit {
	if device != "" {
		return []limit{{key: "device:" + name + "\x00" + device, max: perPair}}
	}
	return []limit{{key: "pair:" + addr + "\x00" + name, max: perPair}, {key: "addr:" + addr, max: perAddress}, {key: globalKey, max: global}}
}

// limiter counts sign-in tries per key in fixed windows.
type limiter struct {
	now  func() time.Time
	mu   sync.Mutex
	keys map[string]*tries
}

type tries struct {
	n     int
	start time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{now: now, keys: map[string]*tries{}}
}

// take counts a try against every limit, unless one of them is spent:
// then it counts nothing and says how long to wait (0: go ahead, the try
// is counted).
func (l *limiter) take(limits []limit) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var longest time.Duration
	for _, lim := range limits {
		t := l.keys[lim.key]
		if t != nil && now.Sub(t.start) < failureWindow && t.n >= lim.max {
			longest = max(longest, t.start.Add(failureWindow).Sub(now))
		}
	}
	if longest > 0 {
		return longest
	}
	if len(l.keys) >= maxKeys {
		l.prune(now)
	}
	for _, lim := range limits {
		t := l.keys[lim.key]
		if t == nil || now.Sub(t.start) >= failureWindow {
			t = &tries{start: now}
			l.keys[lim.key] = t
		}
		t.n++
	}
	return 0
}

// giveBack returns a try that signed in: its pair starts afresh, and the
// shared counters lose the one try.
func (l *limiter) giveBack(limits []limit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, lim := range limits {
		t := l.keys[lim.key]
		switch {
		case t == nil:
		case i == 0:
			delete(l.keys, lim.key)
		case t.n > 0:
			t.n--
		}
	}
}

// prune drops windows that ended; if that is not enough, arbitrary pair
// and address counters (a flood must not grow memory without bound; the
// global counter still bounds it).
func (l *limiter) prune(now time.Time) {
	for k, t := range l.keys {
		if now.Sub(t.start) >= failureWindow {
			delete(l.keys, k)
		}
	}
	for k := range l.keys {
		if len(l.keys) < maxKeys*9/10 {
			break
		}
		if !strings.HasPrefix(k, globalKey) {
			delete(l.keys, k)
		}
	}
}

func seconds(d time.Duration) string {
	return strconv.Itoa(int(d.Round(time.Second) / time.Second))
}
