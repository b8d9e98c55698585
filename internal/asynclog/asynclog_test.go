package asynclog_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"paynotify/internal/asynclog"
)

// lockedBuffer is an output that can be held, as a full pipe holds.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	hold   chan struct{} // while open, Write waits
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	if b.hold != nil {
		<-b.hold
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Every line written before Close is in the output after it, whole and in
// order, in fewer writes than lines.
func TestWriterFlushesOnClose(t *testing.T) {
	out := &lockedBuffer{}
	w := asynclog.New(out, asynclog.DefaultLimit, time.Millisecond)
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatalf("output differs: %d bytes, want %d", len(out.String()), want.Len())
	}
	if out.writes >= 1000 {
		t.Errorf("%d writes for 1000 lines: nothing was batched", out.writes)
	}
	if _, err := w.Write([]byte("after\n")); err != nil || !strings.HasSuffix(out.String(), "after\n") {
		t.Errorf("a write after Close did not go straight out: %v", err)
	}
}

// An output that does not take writes never blocks a writer: past the
// limit, lines are dropped and counted, and what was queued is written
// once the output takes it again.
func TestWriterDropsRatherThanBlock(t *testing.T) {
	out := &lockedBuffer{hold: make(chan struct{})}
	w := asynclog.New(out, 100, 0)
	line := []byte(strings.Repeat("x", 9) + "\n") // 10 bytes
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			_, _ = w.Write(line)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Write blocked on an output that takes nothing")
	}
	// At most two full queues of ten got through: the batch the flusher
	// took before the output held it, and the queue behind it.
	if d := w.Dropped(); d < 1000-20 {
		t.Errorf("%d dropped, want at least %d", d, 1000-20)
	}
	close(out.hold)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := uint64(len(out.String()) / len(line)); got+w.Dropped() != 1000 {
		t.Errorf("%d written + %d dropped, want 1000", got, w.Dropped())
	}
}
