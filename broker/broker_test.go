package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"paynotify/broker"
	"paynotify/broker/natstest"
	"paynotify/internal/proctest"
	"paynotify/model"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture is the broker under test on the shared server, with a stream of
// the test's own, and a JetStream client of the test's to look behind it.
type fixture struct {
	b      *broker.JetStream
	js     jetstream.JetStream
	stream string
	prefix string
}

func connect(t *testing.T) fixture {
	t.Helper()
	url := natstest.URL(t)
	stream, prefix := natstest.Names(t)
	b, err := broker.Connect(context.Background(), url, stream, prefix, quiet)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(b.Close)
	return fixture{b: b, js: natstest.JetStream(t, url), stream: stream, prefix: prefix}
}

// consume runs b.Consume in the background until the test ends, and then
// checks that it stopped cleanly.
func consume(t *testing.T, b *broker.JetStream, durable string, types []model.EventType, h broker.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Consume(ctx, durable, types, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
}

func event(id string, typ model.EventType, amount string) model.Event {
	data, _ := json.Marshal(model.PaymentEventData{OrderID: 1, OrderSN: "SN-" + id, TradeNo: "T-" + id, Amount: amount})
	return model.Event{ID: id, Type: typ, AggregateID: 1, OccurredAt: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), Data: data}
}

func mustPublish(t *testing.T, b *broker.JetStream, events ...model.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, err := range b.Publish(ctx, events) {
		if err != nil {
			t.Fatalf("publish %s: %v", events[i].ID, err)
		}
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

func (f fixture) streamMsgs(t *testing.T) uint64 {
	t.Helper()
	s, err := f.js.Stream(context.Background(), f.stream)
	if err != nil {
		t.Fatalf("stream %s: %v", f.stream, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatalf("stream %s info: %v", f.stream, err)
	}
	return info.State.Msgs
}

// consumerSettled reports whether a durable has nothing left to deliver
// and nothing delivered but unacknowledged.
func (f fixture) consumerSettled(t *testing.T, durable string) bool {
	t.Helper()
	c, err := f.js.Consumer(context.Background(), f.stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false // Consume has not created it yet
	}
	if err != nil {
		t.Fatalf("consumer %s: %v", durable, err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatalf("consumer %s info: %v", durable, err)
	}
	return info.NumPending == 0 && info.NumAckPending == 0
}

// Published events reach the handler whole, in order, on the subject of
// their type; types the consumer did not ask for are acknowledged and
// never handed over.
func TestPublishConsumeRoundTrip(t *testing.T) {
	f := connect(t)
	sent := []model.Event{
		event("e-created", model.EventOrderCreated, "1.00"),
		event("e-paid", model.EventOrderPaid, "10.00"),
		event("e-refund", model.EventRefundPending, "2.50"),
	}
	mustPublish(t, f.b, sent...)
	t.Run("SubjectIsPrefixAndType", func(t *testing.T) {
		s, err := f.js.Stream(context.Background(), f.stream)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range sent {
			msg, err := s.GetMsg(context.Background(), uint64(i+1))
			if err != nil {
				t.Fatalf("message %d: %v", i+1, err)
			}
			if want := f.prefix + "." + string(ev.Type); msg.Subject != want || f.b.Subject(ev.Type) != want {
				t.Errorf("%s: stored on %q, Subject says %q, want %q", ev.ID, msg.Subject, f.b.Subject(ev.Type), want)
			}
			if id := msg.Header.Get("Nats-Msg-Id"); id != ev.ID {
				t.Errorf("%s: Nats-Msg-Id %q", ev.ID, id)
			}
		}
	})

	var (
		mu  sync.Mutex
		got []model.Event
	)
	consume(t, f.b, "roundtrip", []model.EventType{model.EventOrderPaid, model.EventRefundPending},
		func(_ context.Context, ev model.Event) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, ev)
			return nil
		})
	eventually(t, "the consumer has acknowledged every message", func() bool {
		return f.consumerSettled(t, "roundtrip")
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(sent[1:], got); diff != "" {
		t.Fatalf("handled events (-want +got):\n%s", diff)
	}
}

// The event id is the Nats-Msg-Id: publishing an event again within the
// duplicate window succeeds and stores nothing new.
func TestPublishDuplicateIDStoredOnce(t *testing.T) {
	f := connect(t)
	ev := event("e-dup", model.EventOrderPaid, "10.00")
	t.Run("SameBatch", func(t *testing.T) {
		mustPublish(t, f.b, ev, ev)
		if n := f.streamMsgs(t); n != 1 {
			t.Fatalf("stream holds %d messages, want 1", n)
		}
	})
	t.Run("LaterPublish", func(t *testing.T) {
		mustPublish(t, f.b, ev)
		if n := f.streamMsgs(t); n != 1 {
			t.Fatalf("stream holds %d messages, want 1", n)
		}
	})
	t.Run("OtherIDIsStored", func(t *testing.T) {
		mustPublish(t, f.b, event("e-other", model.EventOrderPaid, "10.00"))
		if n := f.streamMsgs(t); n != 2 {
			t.Fatalf("stream holds %d messages, want 2", n)
		}
	})
}

// A handler error leaves the message unacknowledged: it comes back until
// the handler succeeds, and not after.
func TestHandlerErrorRedelivers(t *testing.T) {
	f := connect(t)
	mustPublish(t, f.b, event("e-retry", model.EventOrderPaid, "10.00"))

	const failures = 2
	var calls atomic.Int32
	consume(t, f.b, "retry", []model.EventType{model.EventOrderPaid}, func(_ context.Context, ev model.Event) error {
		if ev.ID != "e-retry" {
			t.Errorf("handled %s", ev.ID)
		}
		if calls.Add(1) <= failures {
			return errors.New("injected: not committed")
		}
		return nil
	})
	eventually(t, "the handler has succeeded", func() bool { return calls.Load() > failures })
	eventually(t, "the consumer has acknowledged the message", func() bool {
		return f.consumerSettled(t, "retry")
	})
	if n := calls.Load(); n != failures+1 {
		t.Fatalf("handler ran %d times, want %d (%d failures, then one success)", n, failures+1, failures)
	}
}

// The broker goes down and comes back: publishing while it is down fails
// within the caller's deadline (so the outbox keeps the event), and once
// it is back the same connection publishes again and the consumer resumes
// where it stopped.
func TestBrokerRestart(t *testing.T) {
	srv := natstest.Start(t)
	stream, prefix := natstest.Names(t)
	b, err := broker.Connect(context.Background(), srv.URL(), stream, prefix, quiet)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(b.Close)
	var (
		mu      sync.Mutex
		handled = map[string]int{}
	)
	consume(t, b, "restart", []model.EventType{model.EventOrderPaid}, func(_ context.Context, ev model.Event) error {
		mu.Lock()
		defer mu.Unlock()
		handled[ev.ID]++
		return nil
	})
	// Runs first at cleanup: a consumer drains promptly only with the
	// server up, should the test stop while it is down.
	t.Cleanup(srv.Start)
	seen := func(ids ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if handled[id] == 0 {
					return false
				}
			}
			return true
		}
	}

	mustPublish(t, b, event("before", model.EventOrderPaid, "1.00"))
	eventually(t, "the first event is handled", seen("before"))

	srv.Stop()
	t.Run("PublishWhileDownFails", func(t *testing.T) {
		errs := publishWithin(t, b, time.Second, event("during", model.EventOrderPaid, "2.00"))
		if errs[0] == nil {
			t.Fatal("publish with the broker down reported success")
		}
	})

	srv.Start()
	t.Run("BackUpPublishesAndConsumes", func(t *testing.T) {
		// Publish fails fast until the client has reconnected (the relay
		// would back off and retry); then it goes through.
		batch := []model.Event{event("during", model.EventOrderPaid, "2.00"), event("after", model.EventOrderPaid, "3.00")}
		eventually(t, "publishing works again after the reconnect", func() bool {
			for _, err := range b.Publish(context.Background(), batch) {
				if err != nil {
					return false
				}
			}
			return true
		})
		eventually(t, "the events published after the restart are handled", seen("during", "after"))
		f := fixture{js: natstest.JetStream(t, srv.URL()), stream: stream}
		if n := f.streamMsgs(t); n != 3 {
			t.Fatalf("stream holds %d messages, want 3", n)
		}
		// Where it stopped: once "during" and "after" are handled, "before"
		// has not been handed over again. A consumer starting over would
		// deliver it first, in stream order. (The server was killed, so it
		// may have lost the ack of "before": that one comes back only as a
		// redelivery after AckWait, 30 s, which the handler recognises.)
		mu.Lock()
		got := maps.Clone(handled)
		mu.Unlock()
		if diff := cmp.Diff(map[string]int{"before": 1, "during": 1, "after": 1}, got); diff != "" {
			t.Fatalf("handled events, by id (-want +got):\n%s", diff)
		}
	})
}

// publishWithin publishes with a deadline d from now, and fails the test
// unless Publish returned by that deadline. The caller's deadline is
// Publish's promise (the relay's round must not hang on a broker that is
// down or silent); the slack only absorbs a busy machine's scheduling.
func publishWithin(t *testing.T, b *broker.JetStream, d time.Duration, events ...model.Event) []error {
	t.Helper()
	const slack = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan []error, 1)
	go func() { done <- b.Publish(ctx, events) }()
	select {
	case errs := <-done:
		return errs
	case <-time.After(d + slack):
		t.Fatalf("Publish still running %v after its caller's deadline of %v", slack, d)
		return nil
	}
}

// A broker that goes silent — the connection open, nothing answered, so
// the client still thinks it is connected — costs a publish its caller's
// deadline, not more: the outbox keeps the event for the next round.
func TestPublishToSilentBrokerFailsByDeadline(t *testing.T) {
	url := natstest.URL(t)
	stream, prefix := natstest.Names(t)
	proxy := proctest.NewProxy(t, strings.TrimPrefix(url, "nats://"))
	b, err := broker.Connect(context.Background(), "nats://"+proxy.Addr(), stream, prefix, quiet)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(b.Close)
	mustPublish(t, b, event("while-answering", model.EventOrderPaid, "1.00"))

	proxy.Freeze(true)
	errs := publishWithin(t, b, 500*time.Millisecond, event("while-silent", model.EventOrderPaid, "2.00"))
	if !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Fatalf("publish to a silent broker: %v, want the caller's deadline exceeded", errs[0])
	}
	proxy.Freeze(false)
	mustPublish(t, b, event("while-silent", model.EventOrderPaid, "2.00"))
}

// A consumer stopped and started again (a deploy) goes on from where it
// stopped: what it handled is not handed over again, and what was
// published meanwhile is, once.
func TestConsumerResumesWhereItStopped(t *testing.T) {
	f := connect(t)
	var (
		mu      sync.Mutex
		handled = map[string]int{}
	)
	handle := func(_ context.Context, ev model.Event) error {
		mu.Lock()
		defer mu.Unlock()
		handled[ev.ID]++
		return nil
	}
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(handled)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.b.Consume(ctx, "resume", []model.EventType{model.EventOrderPaid}, handle) }()
	mustPublish(t, f.b, event("first", model.EventOrderPaid, "1.00"), event("second", model.EventOrderPaid, "2.00"))
	eventually(t, "the first two are handled", func() bool { return len(count()) == 2 })
	eventually(t, "the first two are acknowledged", func() bool { return f.consumerSettled(t, "resume") })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}

	mustPublish(t, f.b, event("third", model.EventOrderPaid, "3.00"), event("fourth", model.EventOrderPaid, "4.00"))
	consume(t, f.b, "resume", []model.EventType{model.EventOrderPaid}, handle)
	eventually(t, "the two published while stopped are handled", func() bool { return len(count()) == 4 })
	eventually(t, "all four are acknowledged", func() bool { return f.consumerSettled(t, "resume") })
	if diff := cmp.Diff(map[string]int{"first": 1, "second": 1, "third": 1, "fourth": 1}, count()); diff != "" {
		t.Fatalf("handled events, by id (-want +got):\n%s", diff)
	}
}

// A URL list is logged without the credentials a URL may carry.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://user:secret@a:4222, nats://tok3n@b:4222,c:4222", "nats://a:4222,nats://b:4222,c:4222"},
		{"user:p@ss@host:4222", "host:4222"},
	} {
		if got := broker.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
