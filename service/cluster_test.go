package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/shopspring/decimal"

	"paynotify/broker"
	"paynotify/broker/natstest"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// A three-node JetStream cluster (stream and consumer on three replicas)
// loses the node that leads the stream while orders are paid, and gets it
// back: the relay and the consumer, each given the list of the three URLs,
// move to the nodes that are left, every order.paid event is stored once,
// delivered, booked once, and nothing is left in the outbox. MariaDB only:
// what is tested is the broker, and several connections of a real server.
func TestClusterNodeLostAndBack(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	cluster := natstest.StartCluster(t, 3)
	stream, prefix := natstest.Names(t)
	connect := func() *broker.JetStream {
		b, err := broker.Connect(ctx, cluster.URL(), stream, prefix, outboxLog, broker.Replicas(3))
		if err != nil {
			t.Fatalf("broker: %v", err)
		}
		t.Cleanup(b.Close)
		return b
	}
	// Two connections, as the relay in serve and `paynotify consume` have.
	relayBroker, consumerBroker := connect(), connect()
	js := natstest.JetStream(t, cluster.URL())
	// Cleanups run last-first: every node is up again before the consumer
	// drains and the connections close.
	counts := startAccounting(t, consumerBroker, store, "accounting")
	for _, node := range cluster.Nodes {
		t.Cleanup(node.Start)
	}

	relay := service.NewRelay(store, relayBroker, outboxLog)
	relay.Interval = 20 * time.Millisecond
	// A row that failed while the stream had no leader is tried again
	// within a second, not on the production back-off.
	relay.MaxBackoff = time.Second
	rctx, stopRelay := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = service.RunJobs(rctx, outboxLog, nil, relay.Job()) })
	t.Cleanup(func() { stopRelay(); wg.Wait() })

	info := func() *jetstream.StreamInfo {
		t.Helper()
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := js.Stream(ictx, stream)
		if err != nil {
			return nil
		}
		i, err := s.Info(ictx)
		if err != nil {
			return nil
		}
		return i
	}
	// allCurrent: the stream has a leader, and both other replicas caught
	// up with it.
	allCurrent := func() bool {
		i := info()
		return i != nil && threeCurrent(i.Cluster)
	}
	waitUntil(t, "the stream is on three current replicas", 30*time.Second, allCurrent)

	const n = 150
	total := decimal.Zero
	payments := service.NewPayments(store)
	pay := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			sn := fmt.Sprintf("CLUSTER-%d", i)
			amount := fmt.Sprintf("%d.%02d", i+1, i%100)
			mustOrder(t, store, sn, amount)
			if _, outcome, err := payments.Observe(ctx, paid(sn, "T-"+sn, amount)); err != nil || outcome != model.OutcomeApplied {
				t.Fatalf("pay %s: %s, %v", sn, outcome, err)
			}
			total = total.Add(decimal.RequireFromString(amount))
		}
	}

	consumerInfo := func() *jetstream.ConsumerInfo {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := js.Consumer(ictx, stream, "accounting")
		if err != nil {
			return nil
		}
		return c.CachedInfo()
	}
	consumerLeader := func() string {
		if ci := consumerInfo(); ci != nil && ci.Cluster != nil {
			return ci.Cluster.Leader
		}
		return ""
	}
	// consumerCurrent: the consumer, too, has a leader and both other
	// replicas caught up — else losing its leader next may leave no
	// replica that can win an election.
	consumerCurrent := func() bool {
		ci := consumerInfo()
		return ci != nil && threeCurrent(ci.Cluster)
	}
	streamLeader := func() string {
		if i := info(); i != nil && i.Cluster != nil {
			return i.Cluster.Leader
		}
		return ""
	}
	// lose stops the node that leads role while the relay is still
	// publishing and the consumer booking, pays orders [from, to) while it
	// is down, and brings it back once another node has taken over.
	lose := func(role string, leaderOf func() string, from, to int) {
		t.Helper()
		waitUntil(t, "the stream and the consumer on three current replicas", 60*time.Second, func() bool { return allCurrent() && consumerCurrent() })
		booked := counts.booked.Load()
		waitUntil(t, "more events are booked", 30*time.Second, func() bool { return counts.booked.Load() > booked })
		node := cluster.Node(t, leaderOf())
		node.Stop()
		t.Logf("stopped %s, the %s leader, after %d bookings", node.Name(), role, counts.booked.Load())
		pay(from, to)
		waitUntil(t, "another node leads the "+role, 60*time.Second, func() bool {
			l := leaderOf()
			return l != "" && l != node.Name()
		})
		node.Start()
		waitUntil(t, node.Name()+" caught up", 60*time.Second, func() bool { return allCurrent() && consumerCurrent() })
	}

	pay(0, n/4)
	lose("stream", streamLeader, n/4, n/2)
	pay(n/2, 3*n/4)
	lose("consumer", consumerLeader, 3*n/4, n)

	waitUntil(t, "every event sent and booked", 45*time.Second, func() bool {
		return mustOutboxCount(t, store, model.OutboxSent) == n && counts.booked.Load() >= n
	})
	waitUntil(t, "the consumer has acknowledged everything", 45*time.Second, func() bool {
		c, err := js.Consumer(ctx, stream, "accounting")
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
	t.Logf("booked %d, duplicates seen %d", counts.booked.Load(), counts.duplicates.Load())

	t.Run("NothingLeftInTheOutbox", func(t *testing.T) {
		for _, state := range []model.OutboxState{model.OutboxPending, model.OutboxFailed} {
			if got := mustOutboxCount(t, store, state); got != 0 {
				t.Errorf("%d rows %s", got, state)
			}
		}
	})
	t.Run("EachEventStoredOnce", func(t *testing.T) {
		// Publishes repeated across the failover carry the same
		// Nats-Msg-Id: the stream keeps one copy of each event.
		if i := info(); i == nil || i.State.Msgs != n {
			t.Errorf("stream info %+v, want %d messages", i, n)
		}
	})
	t.Run("EachEventBookedOnce", func(t *testing.T) {
		if got := counts.booked.Load(); got != n {
			t.Errorf("booked %d events, want %d", got, n)
		}
		if got := countOf(t, store, "SELECT COUNT(*) FROM idempotent_log"); got != n {
			t.Errorf("idempotent_log holds %d keys, want %d", got, n)
		}
		// Every order.paid in the outbox is booked, with its two lines, and
		// nothing else is.
		if got := countOf(t, store, "SELECT COUNT(*) FROM journal_entry"); got != 2*n {
			t.Errorf("journal holds %d lines, want %d", got, 2*n)
		}
		for _, row := range mustOutbox(t, store, model.OutboxSent) {
			if row.Event.Type != model.EventOrderPaid {
				t.Fatalf("outbox holds %s, want only order.paid", row.Event.Type)
			}
			if got := countOf(t, store, "SELECT COUNT(*) FROM journal_entry WHERE event_id = ?", row.Event.ID); got != 2 {
				t.Errorf("event %s booked with %d lines, want 2", row.Event.ID, got)
			}
		}
		checkTotals(t, store, total)
	})
}

// threeCurrent reports whether a stream's or consumer's group has a leader
// and both other replicas online and caught up with it.
func threeCurrent(c *jetstream.ClusterInfo) bool {
	if c == nil || c.Leader == "" || len(c.Replicas) != 2 {
		return false
	}
	for _, r := range c.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}
