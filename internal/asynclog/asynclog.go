// Package asynclog takes log lines off the request path: a Writer that
// queues what it is given and writes it to the real output from a
// goroutine of its own, many lines in one write, and drops (counting)
// rather than block when the output cannot keep up.
package asynclog

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Writer queues whole writes (slog's handlers write one record per Write)
// and writes them to the output in batches. Write never waits for the
// output: it only appends to a buffer under a mutex. A write that would
// take the queue past its limit is dropped and counted (Dropped). Close
// writes what is queued and stops; writes after it go to the output
// directly.
type Writer struct {
	out    io.Writer
	limit  int
	linger time.Duration

	mu      sync.Mutex
	queue   []byte
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	dropped atomic.Uint64
}

// Defaults: up to 1 MiB queued (some 3,000 access-log lines), and at
// most one write to the output every 5 ms under load.
const (
	DefaultLimit  = 1 << 20
	DefaultLinger = 5 * time.Millisecond
)

// New starts a Writer to out that queues up to limit bytes and, after each
// write to out, waits linger for more lines to batch.
func New(out io.Writer, limit int, linger time.Duration) *Writer {
	w := &Writer{out: out, limit: limit, linger: linger, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go w.run()
	return w
}

// Write queues p, or drops it if the queue is full. It always reports
// success: a log line is never a reason to fail a request.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.out.Write(p)
	}
	if len(w.queue)+len(p) > w.limit {
		w.mu.Unlock()
		w.dropped.Add(1)
		return len(p), nil
	}
	w.queue = append(w.queue, p...)
	select { // under the mutex: Close closes wake under it
	case w.wake <- struct{}{}:
	default: // already woken
	}
	w.mu.Unlock()
	return len(p), nil
}

// Dropped is how many writes were dropped because the queue was full.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Close writes what is queued and stops the Writer's goroutine.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.wake)
	w.mu.Unlock()
	<-w.stopped
	return nil
}

func (w *Writer) run() {
	defer close(w.stopped)
	var spare []byte
	for range w.wake {
		spare = w.flush(spare)
		if w.linger > 0 {
			time.Sleep(w.linger) // let the next lines gather into one write
		}
	}
	w.flush(spare) // what came in before Close
}

// flush writes the queue out, swapping in spare as the new queue, and
// returns the old queue's array for the next swap.
func (w *Writer) flush(spare []byte) []byte {
	w.mu.Lock()
	batch := w.queue
	w.queue = spare[:0]
	w.mu.Unlock()
	if len(batch) > 0 {
		_, _ = w.out.Write(batch) // nowhere to report a failed log write
	}
	if cap(batch) > 4*w.limit {
		return nil // do not keep an outsized array
	}
	return batch
}
