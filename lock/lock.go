// Package lock is paynotify's one package for Redis: a distributed lock
// (bsm/redislock over go-redis) that is taken with SET key token NX PX
// ttl, renewed by a Lua script that checks the owner token, and released
// by a Lua script that checks it too — so a holder that stalls past its
// TTL can never release (or extend) a lock someone else now holds, and a
// holder that dies leaves a lock that expires.
package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// ErrUnavailable: Redis did not answer; the caller decides whether to go
// on without the guard.
var ErrUnavailable = errors.New("redis lock unavailable")

// Redis takes locks in one Redis.
type Redis struct {
	client *redis.Client
	locks  *redislock.Client
	log    *slog.Logger
}

// New connects to Redis at addr (lazily: nothing is dialled until a lock
// is taken).
func New(addr string, log *slog.Logger) *Redis {
	c := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: 1,
	})
	return &Redis{client: c, locks: redislock.New(c), log: log}
}

// Close closes the connection pool.
func (r *Redis) Close() error { return r.client.Close() }

// Hold takes the lock key for ttl, waiting for it until ctx ends, and
// keeps it by renewing it every ttl/3 until release is called. If a
// renewal finds the lock no longer ours, lost is closed.
func (r *Redis) Hold(ctx context.Context, key string, ttl time.Duration) (release func(), lost <-chan struct{}, err error) {
	l, err := r.locks.Obtain(ctx, key, ttl, &redislock.Options{
		RetryStrategy: redislock.ExponentialBackoff(5*time.Millisecond, 100*time.Millisecond),
	})
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		return nil, nil, fmt.Errorf("lock %s: held by another until our deadline: %w", key, context.DeadlineExceeded)
	case err != nil && ctx.Err() != nil:
		return nil, nil, fmt.Errorf("lock %s: %w", key, ctx.Err())
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
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
				err := l.Refresh(rctx, ttl, nil)
				cancel()
				if errors.Is(err, redislock.ErrNotObtained) {
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
		if err := l.Release(rctx); err != nil && !errors.Is(err, redislock.ErrLockNotHeld) {
			r.log.Warn("lock release failed (it will expire)", "key", key, "err", err)
		}
	}
	return release, lostc, nil
}
