// Package lock is paynotify's one package for Redis: a distributed lock
// that is taken with SET key token NX PX ttl, renewed by a Lua script that
// checks the owner token, and released by a Lua script that checks it too
// — so a holder that stalls past its TTL can never release (or extend) a
// lock someone else now holds, and a holder that dies leaves a lock that
// expires. It speaks the three commands it needs over RESP itself
// (resp.go): a full Redis client cost a cold build ~16 CPU-seconds for
// them (docs/development.md).
package lock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// ErrUnavailable: Redis did not answer; the caller decides whether to go
// on without the guard.
var ErrUnavailable = errors.New("redis lock unavailable")

// The owner-checked scripts, as bsm/redislock has them.
const (
	refreshScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`
	releaseScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
)

// Redis takes locks in one Redis.
type Redis struct {
	pool *pool
	log  *slog.Logger
}

// New connects to Redis at addr (lazily: nothing is dialled until a lock
// is taken).
func New(addr string, log *slog.Logger) *Redis {
	return &Redis{pool: newPool(addr, time.Second), log: log}
}

// Close closes the idle connections.
func (r *Redis) Close() error { return r.pool.close() }

// Hold takes the lock key for ttl, waiting for it until ctx ends, and
// keeps it by renewing it every ttl/3 until release is called. If a
// renewal finds the lock no longer ours, lost is closed.
func (r *Redis) Hold(ctx context.Context, key string, ttl time.Duration) (release func(), lost <-chan struct{}, err error) {
	token, err := newToken()
	if err != nil {
		return nil, nil, err
	}
	ms := strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		reply, err := r.pool.do(ctx, "SET", key, token, "NX", "PX", ms)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, fmt.Errorf("lock %s: %w", key, ctx.Err())
		case err != nil:
			return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if reply == "OK" {
			break
		}
		// Held by another (a nil reply): wait, as long as ctx lets us.
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("lock %s: held by another until our deadline: %w", key, context.DeadlineExceeded)
		case <-time.After(wait):
		}
	}
	done := make(chan struct{})
	lostc := make(chan struct{})
	go func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.Background(), ttl/3)
				reply, err := r.pool.do(rctx, "EVAL", refreshScript, "1", key, token, ms)
				cancel()
				if err == nil && reply == int64(0) {
					r.log.Error("lock lost before release", "key", key)
					close(lostc)
					return
				}
				if err != nil {
					r.log.Warn("lock renewal failed", "key", key, "err", err)
				}
			}
		}
	}()
	release = func() {
		close(done)
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// 0: not ours any more (expired, or taken): nothing to release.
		if _, err := r.pool.do(rctx, "EVAL", releaseScript, "1", key, token); err != nil {
			r.log.Warn("lock release failed (it will expire)", "key", key, "err", err)
		}
	}
	return release, lostc, nil
}

// newToken is a lock's owner token: 16 random bytes.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
