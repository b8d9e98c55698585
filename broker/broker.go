// Package broker is paynotify's one package for NATS JetStream: it
// publishes outbox events with their id as Nats-Msg-Id, and feeds a
// durable consumer's messages to a handler that acks only after it has
// committed.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"paynotify/model"
)

// Defaults for the stream paynotify publishes to.
const (
	DefaultStream = "PAYNOTIFY_EVENTS"
	DefaultPrefix = "paynotify.events"
	// dedupWindow: JetStream drops a message whose Nats-Msg-Id it saw this
	// recently. Consumers de-duplicate anyway, for anything older.
	dedupWindow = 2 * time.Minute
)

// JetStream is a connection to NATS with the paynotify stream in place.
type JetStream struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	prefix string
	log    *slog.Logger
}

// Connect dials url, keeps reconnecting for as long as the process lives,
// and creates (or updates) the stream: subjects <prefix>.<event type>.
func Connect(ctx context.Context, url, stream, prefix string, log *slog.Logger) (*JetStream, error) {
	nc, err := nats.Connect(url,
		nats.Name("paynotify"),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("nats disconnected", "err", err) }),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("nats reconnected") }),
	)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	b := &JetStream{nc: nc, js: js, stream: stream, prefix: prefix, log: log}
	if err := b.ensureStream(ctx); err != nil {
		// The broker may be down at start: the relay retries publishing, and
		// creates the stream once it answers.
		log.Warn("jetstream stream not ready yet", "stream", stream, "err", err)
	}
	return b, nil
}

func (b *JetStream) ensureStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       b.stream,
		Subjects:   []string{b.prefix + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: dedupWindow,
	})
	return err
}

// Close drains and closes the connection.
func (b *JetStream) Close() { b.nc.Close() }

// Subject is where events of a type are published.
func (b *JetStream) Subject(t model.EventType) string { return b.prefix + "." + string(t) }

// Publish sends events and waits for JetStream to acknowledge each,
// returning one error per event (nil: stored, or dropped as a duplicate of
// one stored). The event id is the Nats-Msg-Id.
func (b *JetStream) Publish(ctx context.Context, events []model.Event) []error {
	errs := make([]error, len(events))
	if !b.nc.IsConnected() {
		// Fail fast: the relay backs off and retries; waiting out the
		// reconnect here would only hold its round.
		for i := range errs {
			errs[i] = fmt.Errorf("nats: %w", nats.ErrDisconnected)
		}
		return errs
	}
	futures := make([]jetstream.PubAckFuture, len(events))
	for i, ev := range events {
		data, err := json.Marshal(ev)
		if err != nil {
			errs[i] = err
			continue
		}
		msg := &nats.Msg{Subject: b.Subject(ev.Type), Data: data, Header: nats.Header{}}
		futures[i], errs[i] = b.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID), jetstream.WithExpectStream(b.stream))
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = err
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	if anyStreamMissing(errs) {
		if err := b.ensureStream(ctx); err != nil {
			b.log.Warn("jetstream stream not ready", "err", err)
		}
	}
	return errs
}

func anyStreamMissing(errs []error) bool {
	for _, err := range errs {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return true
		}
	}
	return false
}

// Handler handles one event and returns nil only once its effect is
// committed; the message is acknowledged after that, never before.
type Handler func(ctx context.Context, ev model.Event) error

// Consume feeds events of the given types to handle through the durable
// consumer named durable, until ctx ends. A handler error leaves the
// message unacknowledged (redelivered after a pause).
func (b *JetStream) Consume(ctx context.Context, durable string, types []model.EventType, handle Handler) error {
	// One filter for the whole stream, types picked here: servers before
	// 2.10 take only a single filter subject.
	wanted := make(map[model.EventType]bool, len(types))
	for _, t := range types {
		wanted[t] = true
	}
	var cons jetstream.Consumer
	for {
		if err := b.ensureStream(ctx); err == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			cons, err = b.js.CreateOrUpdateConsumer(cctx, b.stream, jetstream.ConsumerConfig{
				Durable:       durable,
				FilterSubject: b.prefix + ".>",
				AckPolicy:     jetstream.AckExplicitPolicy,
				AckWait:       30 * time.Second,
				MaxDeliver:    -1,
				DeliverPolicy: jetstream.DeliverAllPolicy,
			})
			cancel()
			if err == nil {
				break
			}
			b.log.Warn("jetstream consumer not ready", "durable", durable, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		var ev model.Event
		if err := json.Unmarshal(msg.Data(), &ev); err != nil || ev.ID == "" {
			// Not ours to understand: redelivering it would not help.
			b.log.Error("undecodable event, terminated", "subject", msg.Subject(), "err", err)
			_ = msg.Term()
			return
		}
		if !wanted[ev.Type] {
			_ = msg.Ack()
			return
		}
		if err := handle(ctx, ev); err != nil {
			// Never dropped: redelivered, later and later, and loudly once it
			// has failed a few times (an operator has to look).
			delay, level := 2*time.Second, slog.LevelWarn
			if md, merr := msg.Metadata(); merr == nil && md.NumDelivered > 5 {
				delay, level = time.Minute, slog.LevelError
			}
			b.log.Log(ctx, level, "event not handled, will be redelivered", "event_id", ev.ID, "type", ev.Type, "err", err)
			_ = msg.NakWithDelay(delay)
			return
		}
		if err := msg.DoubleAck(ctx); err != nil {
			// Committed but not acknowledged: the redelivery is a duplicate,
			// which the handler recognises.
			b.log.Warn("ack lost", "event_id", ev.ID, "err", err)
		}
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	if b.nc.IsConnected() {
		cc.Drain() // finish what is buffered; unacked messages are redelivered anyway
	} else {
		cc.Stop() // nothing to drain towards: don't wait on a broker that is down
	}
	<-cc.Closed()
	return nil
}
