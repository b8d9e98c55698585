package fake

import (
	"context"
	"sync"
	"time"
)

// Background runs what a fake sends after answering a call — its
// notifications and their resends — so that a service handling a
// notification while still inside the call cannot deadlock the fake, and
// lets a test wait until all of it has settled.
type Background struct {
	ctx  context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	idle     *sync.Cond // broadcast when inflight drops to zero
	inflight int
}

// NewBackground returns a runner with nothing in flight.
func NewBackground() *Background {
	b := &Background{}
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.idle = sync.NewCond(&b.mu)
	return b
}

// Context ends when the fake is closed: what background sends run under.
func (b *Background) Context() context.Context { return b.ctx }

// Go runs f in the background, counted until it returns.
func (b *Background) Go(f func(ctx context.Context)) {
	b.mu.Lock()
	b.inflight++
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.inflight--; b.inflight == 0 {
				b.idle.Broadcast()
			}
		}()
		f(b.ctx)
	}()
}

// Resend runs send in the background after each wait of schedule, until
// send says it was acknowledged, the schedule ends, or the fake is
// closed: a provider resending a notification it got no answer to.
func (b *Background) Resend(schedule []time.Duration, send func(ctx context.Context) (acknowledged bool)) {
	if len(schedule) == 0 {
		return
	}
	b.Go(func(ctx context.Context) {
		for _, d := range schedule {
			if b.Sleep(ctx, d); ctx.Err() != nil {
				return
			}
			if send(ctx) {
				return
			}
		}
	})
}

// Wait returns once nothing is in flight.
func (b *Background) Wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.inflight > 0 {
		b.idle.Wait()
	}
}

// Close ends what is in flight (its context is cancelled) and waits for it.
func (b *Background) Close() {
	b.stop()
	b.Wait()
}

// Sleep waits d, or less if ctx ends or the fake is closed: a call
// answered late.
func (b *Background) Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-b.ctx.Done():
	}
}
