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
	"net"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
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
	// ackTimeout bounds the wait for one PubAck. An ack can be lost when a
	// node dies or the stream's leader moves; the publish is then sent
	// again, under the same Nats-Msg-Id, instead of waiting out the
	// caller's whole deadline.
	ackTimeout = 2 * time.Second
	// pullExpiry is how long one pull request of the consumer waits on the
	// server. Heartbeats come at half of it, and two missing ones make the
	// client pull again: after a consumer leader is lost, delivery resumes
	// within about this long (the client's default, 30 s, is an outage).
	pullExpiry = 5 * time.Second
	// ackWait is how long JetStream waits for an ack before delivering a
	// message again. Acks sent while a consumer's leader is being replaced
	// are lost, and those messages come back after ackWait (duplicates the
	// handler recognises): short enough that a node lost costs seconds, and
	// longer than handleTimeout, so a handler still working is not raced
	// by its own redelivery.
	ackWait = 10 * time.Second
	// handleTimeout bounds one handler call (one booking transaction).
	handleTimeout = 5 * time.Second
)

// Option changes how Connect sets up the stream.
type Option func(*JetStream)

// Replicas sets how many servers of a JetStream cluster keep the stream
// (and its consumers): 1 on a single server, 3 to survive the loss of one
// node of a three-node cluster. Below 1 means 1.
func Replicas(n int) Option {
	return func(b *JetStream) { b.replicas = max(n, 1) }
}

// JetStream is a connection to NATS with the paynotify stream in place.
type JetStream struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
	prefix string
	// replicas is the stream's replica count.
	replicas int
	log      *slog.Logger
}

// Connect dials url, keeps reconnecting for as long as the process lives,
// and creates (or updates) the stream: subjects <prefix>.<event type>.
// url may list several servers, separated by commas (the servers of a
// cluster): the client connects to one, learns the others from it, and
// moves to another when its server goes away.
func Connect(ctx context.Context, url, stream, prefix string, log *slog.Logger, opts ...Option) (*JetStream, error) {
	unreachable := &unreachableLog{log: log, url: Redact(url), every: unreachableEvery}
	nc, err := nats.Connect(url,
		nats.Name("paynotify"),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("nats disconnected", "err", err) }),
		// Each failed try to reach a server, at start as after a
		// disconnect: said at once, then again every unreachableEvery
		// while it lasts, with the dial's own error (connection refused,
		// no such host).
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { unreachable.failed(err) }),
		nats.ConnectHandler(func(*nats.Conn) { unreachable.reached(); log.Info("nats connected", "url", Redact(url)) }),
		nats.ReconnectHandler(func(*nats.Conn) { unreachable.reached(); log.Info("nats reconnected") }),
	)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", Redact(url), err)
	}
	if !nc.IsConnected() {
		// The client's first failure says only "no servers available":
		// a dial of our own says why (connection refused, no such host).
		unreachable.failed(dialFirst(url))
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		nc.Close()
		return nil, err
	}
	b := &JetStream{nc: nc, js: js, stream: stream, prefix: prefix, replicas: 1, log: log}
	for _, o := range opts {
		o(b)
	}
	if !nc.IsConnected() {
		// Down at start: the relay retries publishing, and the consumer
		// its set-up, and either creates the stream once NATS answers.
		return b, nil
	}
	if err := b.ensureStream(ctx); err != nil {
		log.Warn("jetstream stream not ready yet", "stream", stream, "err", err)
	}
	return b, nil
}

// dialFirst dials the first server of a NATS URL list and returns why it
// cannot be reached (nil if it can, by now).
func dialFirst(urls string) error {
	first, _, _ := strings.Cut(urls, ",")
	u, err := neturl.Parse(strings.TrimSpace(first))
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "4222")
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

// unreachableEvery is how often a broker that stays unreachable is named
// again in the log.
const unreachableEvery = 10 * time.Second

// unreachableLog says that NATS cannot be reached, and why, when a try
// fails: the first failure at once, then once every every while they last.
type unreachableLog struct {
	log   *slog.Logger
	url   string
	every time.Duration

	mu    sync.Mutex
	since time.Time // the first failure of this outage; zero while reached
	last  time.Time // when it was last said
	tries int
}

func (u *unreachableLog) failed(err error) {
	if err == nil || errors.Is(err, nats.ErrNoServers) {
		return // no reason in it: the next try's dial error says why
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	u.tries++
	if u.since.IsZero() {
		u.since = now
	} else if now.Sub(u.last) < u.every {
		return
	}
	u.last = now
	u.log.Warn("nats cannot be reached: retrying every second until it answers", "url", u.url, "err", err, "tries", u.tries, "for", now.Sub(u.since).Round(time.Second).String())
}

func (u *unreachableLog) reached() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.since, u.tries = time.Time{}, 0
}

func (b *JetStream) ensureStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       b.stream,
		Subjects:   []string{b.prefix + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: dedupWindow,
		Replicas:   b.replicas,
	})
	return err
}

// Close drains and closes the connection.
func (b *JetStream) Close() { b.nc.Close() }

// Subject is where events of a type are published.
func (b *JetStream) Subject(t model.EventType) string { return b.prefix + "." + string(t) }

// Publish sends events and waits for JetStream to acknowledge each,
// returning one error per event (nil: stored, or dropped as a duplicate of
// one stored). The event id is the Nats-Msg-Id, so an event whose ack did
// not come — a node died, the stream's leader moved and a new one is being
// elected — is sent again, until ctx ends, and still stored once.
func (b *JetStream) Publish(ctx context.Context, events []model.Event) []error {
	errs := make([]error, len(events))
	todo := make([]int, len(events))
	for i := range todo {
		todo[i] = i
	}
	wait := retryWait
	for {
		if !b.nc.IsConnected() {
			// Fail fast: the relay backs off and retries; waiting out the
			// reconnect here would only hold its round.
			for _, i := range todo {
				errs[i] = fmt.Errorf("nats: %w", nats.ErrDisconnected)
			}
			return errs
		}
		b.publish(ctx, events, todo, errs)
		if anyStreamMissing(errs) {
			if err := b.ensureStream(ctx); err != nil {
				b.log.Warn("jetstream stream not ready", "err", err)
			}
		}
		todo = slices.DeleteFunc(todo, func(i int) bool { return !transient(errs[i]) })
		if len(todo) == 0 {
			return errs
		}
		select {
		case <-ctx.Done():
			return errs
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRetryWait)
	}
}

// The pause before publishing again what failed for a passing reason,
// doubling up to maxRetryWait.
const (
	retryWait    = 100 * time.Millisecond
	maxRetryWait = time.Second
)

// publish sends events[i] for each i in todo and records each one's
// outcome in errs[i].
func (b *JetStream) publish(ctx context.Context, events []model.Event, todo []int, errs []error) {
	futures := make(map[int]jetstream.PubAckFuture, len(todo))
	for _, i := range todo {
		ev := events[i]
		data, err := json.Marshal(ev)
		if err != nil {
			errs[i] = err
			continue
		}
		msg := &nats.Msg{Subject: b.Subject(ev.Type), Data: data, Header: nats.Header{}}
		f, err := b.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID), jetstream.WithExpectStream(b.stream))
		if err != nil {
			errs[i] = err
			continue
		}
		futures[i] = f
	}
	for _, i := range todo {
		f := futures[i]
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
			errs[i] = nil
		case err := <-f.Err():
			errs[i] = err
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
}

// transient reports whether err may pass by itself: no ack in time, no
// stream answering (a leader election, a node restarting), JetStream
// temporarily unavailable. Anything else, and the caller's own deadline,
// is not worth repeating within this call.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == 503
	}
	return false
}

func anyStreamMissing(errs []error) bool {
	for _, err := range errs {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return true
		}
	}
	return false
}

// Redact returns a NATS URL list without the credentials any URL carries
// (nats://user:password@host, nats://token@host), for logs.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if at := strings.LastIndex(p, "@"); at >= 0 {
			scheme := ""
			if k := strings.Index(p, "://"); k >= 0 && k < at {
				scheme = p[:k+3]
			}
			p = scheme + p[at+1:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
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
		if !b.nc.IsConnected() {
			// Nothing to set up towards: the connection's handlers say
			// that NATS cannot be reached, and why.
		} else if err := b.ensureStream(ctx); err == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			cons, err = b.js.CreateOrUpdateConsumer(cctx, b.stream, jetstream.ConsumerConfig{
				Durable:       durable,
				FilterSubject: b.prefix + ".>",
				AckPolicy:     jetstream.AckExplicitPolicy,
				AckWait:       ackWait,
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
	cc, err := cons.Consume(b.handle(ctx, wanted, handle),
		jetstream.PullExpiry(pullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// Missed heartbeats, a consumer leader lost: the client pulls
			// again by itself; this is only for the operator.
			b.log.Warn("jetstream consumer", "durable", durable, "err", err)
		}))
	if err != nil {
		return err
	}
	b.log.Info("consumer running", "durable", durable)
	<-ctx.Done()
	if b.nc.IsConnected() {
		cc.Drain() // finish what is buffered; unacked messages are redelivered anyway
	} else {
		cc.Stop() // nothing to drain towards: don't wait on a broker that is down
	}
	<-cc.Closed()
	return nil
}

// handle is the message handler of Consume: decode, hand over, and
// acknowledge only after handle has committed.
func (b *JetStream) handle(ctx context.Context, wanted map[model.EventType]bool, handle Handler) jetstream.MessageHandler {
	return func(msg jetstream.Msg) {
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
		hctx, cancel := context.WithTimeout(ctx, handleTimeout)
		err := handle(hctx, ev)
		cancel()
		if err != nil {
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
	}
}
