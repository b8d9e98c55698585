package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/broker"
	"paynotify/broker/natstest"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

var outboxLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// outboxSince returns a function listing the events written to the outbox
// since outboxSince was called, oldest first.
func outboxSince(t *testing.T, store *dao.Store) func() []model.Event {
	t.Helper()
	var last int64
	for _, r := range mustOutbox(t, store, model.OutboxPending) {
		last = r.Seq
	}
	return func() []model.Event {
		t.Helper()
		var evs []model.Event
		for _, r := range mustOutbox(t, store, model.OutboxPending) {
			if r.Seq > last {
				evs = append(evs, r.Event)
			}
		}
		return evs
	}
}

func mustOutbox(t *testing.T, store *dao.Store, state model.OutboxState) []model.OutboxRow {
	t.Helper()
	rows, err := store.OutboxRows(ctx, state, 1000)
	if err != nil {
		t.Fatalf("outbox rows %s: %v", state, err)
	}
	return rows
}

func mustOutboxCount(t *testing.T, store *dao.Store, state model.OutboxState) int64 {
	t.Helper()
	n, err := store.OutboxCount(ctx, state)
	if err != nil {
		t.Fatalf("outbox count %s: %v", state, err)
	}
	return n
}

// onlyEvent asserts that exactly one event of typ was written and decodes
// its data into data.
func onlyEvent(t *testing.T, evs []model.Event, typ model.EventType, aggregateID int64, data any) model.Event {
	t.Helper()
	if len(evs) != 1 || evs[0].Type != typ {
		t.Fatalf("events written: %+v, want one %s", evs, typ)
	}
	ev := evs[0]
	if ev.ID == "" || ev.AggregateID != aggregateID || ev.OccurredAt.IsZero() {
		t.Fatalf("%s envelope %+v, want an id, aggregate %d and a time", typ, ev, aggregateID)
	}
	if err := json.Unmarshal(ev.Data, data); err != nil {
		t.Fatalf("%s data %s: %v", typ, ev.Data, err)
	}
	return ev
}

func noEvents(t *testing.T, evs []model.Event) {
	t.Helper()
	if len(evs) != 0 {
		t.Fatalf("events written: %+v, want none", evs)
	}
}

// seedSKU and seedMember insert catalogue rows for one test case.
func seedSKU(t *testing.T, store *dao.Store, price string, stock int) int64 {
	t.Helper()
	id, err := store.InsertSKU(ctx, "sku", decimal.RequireFromString(price), stock)
	if err != nil {
		t.Fatalf("insert sku: %v", err)
	}
	return id
}

func seedMember(t *testing.T, store *dao.Store) int64 {
	t.Helper()
	id, err := store.InsertMember(ctx, "member", 0)
	if err != nil {
		t.Fatalf("insert member: %v", err)
	}
	return id
}

// placeNew places an order for 2 × 20.00 of a new SKU (stock 10) by a new
// member, and returns the order's view and its member.
func placeNew(t *testing.T, store *dao.Store, orders *service.Orders, key string) (service.OrderView, int64) {
	t.Helper()
	sku, member := seedSKU(t, store, "20.00", 10), seedMember(t, store)
	p, err := orders.Place(ctx, member, key, model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 2}}})
	if err != nil {
		t.Fatalf("place %s: %v", key, err)
	}
	var v service.OrderView
	if err := json.Unmarshal(p.Body, &v); err != nil {
		t.Fatal(err)
	}
	return v, member
}

// Each state change writes its event in its own transaction, and a change
// that does not happen — refused, rolled back, or a duplicate — writes
// none.
func TestEventsWrittenWithTheirChange(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		orders := service.NewOrders(store)
		payments := service.NewPayments(store)
		at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC) // paid()'s gmt_payment

		t.Run("PlaceWritesOrderCreated", func(t *testing.T) {
			written := outboxSince(t, store)
			v, member := placeNew(t, store, orders, "ev-place")
			o := mustGetOrder(t, store, v.OrderSN)
			var got model.OrderEventData
			onlyEvent(t, written(), model.EventOrderCreated, o.ID, &got)
			want := model.OrderEventData{OrderID: o.ID, OrderSN: v.OrderSN, MemberID: member,
				PayAmount: "40.00", TotalAmount: "40.00", Status: int(model.OrderAwaitingPayment)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("order.created data (-want +got):\n%s", diff)
			}
		})
		t.Run("ReplayedPlaceWritesNothing", func(t *testing.T) {
			sku, member := seedSKU(t, store, "1.00", 10), seedMember(t, store)
			req := model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 1}}}
			if _, err := orders.Place(ctx, member, "ev-replay", req); err != nil {
				t.Fatal(err)
			}
			written := outboxSince(t, store)
			p, err := orders.Place(ctx, member, "ev-replay", req)
			if err != nil || !p.Replayed {
				t.Fatalf("replay: %+v, %v", p, err)
			}
			noEvents(t, written())
		})
		t.Run("AppliedPaymentWritesOrderPaid", func(t *testing.T) {
			o := mustOrder(t, store, "EV-PAID", "100.00")
			written := outboxSince(t, store)
			if _, outcome, err := payments.Observe(ctx, paid("EV-PAID", "T-EV-PAID", "100.00")); err != nil || outcome != model.OutcomeApplied {
				t.Fatalf("Observe: %s, %v", outcome, err)
			}
			var got model.PaymentEventData
			onlyEvent(t, written(), model.EventOrderPaid, o.ID, &got)
			want := model.PaymentEventData{OrderID: o.ID, OrderSN: "EV-PAID", Provider: string(model.ProviderAlipay),
				TradeNo: "T-EV-PAID", OutTradeNo: "EV-PAID", Amount: "100.00", State: string(model.PaymentApplied), PaidAt: &at}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("order.paid data (-want +got):\n%s", diff)
			}
		})
		t.Run("DuplicateNotificationWritesNothing", func(t *testing.T) {
			mustOrder(t, store, "EV-DUP", "10.00")
			if _, _, err := payments.Observe(ctx, paid("EV-DUP", "T-EV-DUP", "10.00")); err != nil {
				t.Fatal(err)
			}
			written := outboxSince(t, store)
			for _, status := range []alipay.TradeStatus{alipay.TradeSuccess, alipay.TradeFinished} {
				n := alipay.Notification{NotifyID: "n-" + string(status), TradeStatus: status, OutTradeNo: "EV-DUP",
					TradeNo: "T-EV-DUP", TotalAmount: decimal.RequireFromString("10.00")}.Observation()
				if _, outcome, err := payments.Observe(ctx, n); err != nil || outcome != model.OutcomeDuplicate {
					t.Fatalf("%s again: %s, %v", status, outcome, err)
				}
			}
			noEvents(t, written())
		})
		t.Run("RefundPendingWritesRefundPending", func(t *testing.T) {
			o := mustOrder(t, store, "EV-REFUND", "100.00")
			written := outboxSince(t, store)
			if _, outcome, err := payments.Observe(ctx, paid("EV-REFUND", "T-EV-REFUND", "0.01")); err != nil || outcome != model.OutcomeRefundPending {
				t.Fatalf("Observe: %s, %v", outcome, err)
			}
			var got model.PaymentEventData
			onlyEvent(t, written(), model.EventRefundPending, o.ID, &got)
			want := model.PaymentEventData{OrderID: o.ID, OrderSN: "EV-REFUND", Provider: string(model.ProviderAlipay),
				TradeNo: "T-EV-REFUND", OutTradeNo: "EV-REFUND", Amount: "0.01", State: string(model.PaymentRefundPending),
				Reason: string(model.RefundAmountMismatch), PaidAt: &at}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("payment.refund_pending data (-want +got):\n%s", diff)
			}
		})
		t.Run("CancelWritesOrderClosed", func(t *testing.T) {
			v, member := placeNew(t, store, orders, "ev-cancel")
			o := mustGetOrder(t, store, v.OrderSN)
			written := outboxSince(t, store)
			if _, err := orders.Cancel(ctx, member, v.OrderSN); err != nil {
				t.Fatal(err)
			}
			var got model.OrderEventData
			onlyEvent(t, written(), model.EventOrderClosed, o.ID, &got)
			if got.Reason != "cancelled" || got.Status != int(model.OrderClosed) || got.OrderSN != v.OrderSN || got.PayAmount != "40.00" {
				t.Fatalf("order.closed data %+v, want reason cancelled, status closed", got)
			}
			written = outboxSince(t, store)
			if _, err := orders.Cancel(ctx, member, v.OrderSN); err != nil {
				t.Fatalf("cancel again: %v", err)
			}
			noEvents(t, written())
		})
		t.Run("CloserWritesOrderClosed", func(t *testing.T) {
			// A store of its own: the closer closes every expired order in it.
			store := daotest.Open(t, store.Driver())
			orders := service.NewOrders(store)
			v, _ := placeNew(t, store, orders, "ev-timeout")
			o := mustGetOrder(t, store, v.OrderSN)
			written := outboxSince(t, store)
			closer := newCloser(store, outboxLog, -time.Hour, 10) // everything has expired
			if n, err := closer.RunOnce(ctx); n != 1 || err != nil {
				t.Fatalf("closer RunOnce: %d, %v", n, err)
			}
			var got model.OrderEventData
			onlyEvent(t, written(), model.EventOrderClosed, o.ID, &got)
			if got.Reason != "timeout" || got.Status != int(model.OrderClosed) || got.OrderSN != v.OrderSN {
				t.Fatalf("order.closed data %+v, want reason timeout, status closed", got)
			}
			written = outboxSince(t, store)
			if n, err := closer.RunOnce(ctx); n != 0 || err != nil {
				t.Fatalf("closer RunOnce again: %d, %v", n, err)
			}
			noEvents(t, written())
		})
		t.Run("OutOfStockWritesNothing", func(t *testing.T) {
			sku, member := seedSKU(t, store, "1.00", 1), seedMember(t, store)
			written := outboxSince(t, store)
			_, err := orders.Place(ctx, member, "ev-oos", model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 2}}})
			if !errors.Is(err, model.ErrOutOfStock) {
				t.Fatalf("err = %v, want ErrOutOfStock", err)
			}
			noEvents(t, written())
		})
		t.Run("UnusableCouponWritesNothing", func(t *testing.T) {
			sku, member, other := seedSKU(t, store, "10.00", 10), seedMember(t, store), seedMember(t, store)
			coupon, err := store.InsertCoupon(ctx, other, decimal.RequireFromString("1.00"))
			if err != nil {
				t.Fatal(err)
			}
			written := outboxSince(t, store)
			_, err = orders.Place(ctx, member, "ev-coupon", model.PlaceOrder{
				Items: []model.ItemRequest{{SKUID: sku, Quantity: 1}}, CouponID: coupon})
			if !errors.Is(err, model.ErrCouponUnusable) {
				t.Fatalf("err = %v, want ErrCouponUnusable", err)
			}
			noEvents(t, written())
		})
		t.Run("TradeConflictWritesNothing", func(t *testing.T) {
			mustOrder(t, store, "EV-CONFLICT-A", "10.00")
			mustOrder(t, store, "EV-CONFLICT-B", "10.00")
			if _, _, err := payments.Observe(ctx, paid("EV-CONFLICT-A", "T-EV-CONFLICT", "10.00")); err != nil {
				t.Fatal(err)
			}
			written := outboxSince(t, store)
			for _, n := range []model.Observation{
				paid("EV-CONFLICT-B", "T-EV-CONFLICT", "10.00"), // same trade, other order
				paid("EV-CONFLICT-A", "T-EV-CONFLICT", "9.00"),  // same trade, other amount
			} {
				if _, _, err := payments.Observe(ctx, n); !errors.Is(err, model.ErrTradeConflict) {
					t.Fatalf("%s for %s: err = %v, want ErrTradeConflict", n.TradeNo, n.OutTradeNo, err)
				}
			}
			noEvents(t, written())
		})
		t.Run("RolledBackTransactionWritesNothing", func(t *testing.T) {
			written := outboxSince(t, store)
			errAbort := errors.New("abort")
			o := mustOrder(t, store, "EV-ROLLBACK", "10.00")
			err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
				ev := model.Event{ID: uuid.NewString(), Type: model.EventOrderPaid, AggregateID: o.ID,
					OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{}`)}
				if err := tx.InsertEvents(ctx, ev); err != nil {
					return err
				}
				return errAbort
			})
			if !errors.Is(err, errAbort) {
				t.Fatalf("UpdateOrder: %v", err)
			}
			noEvents(t, written())
		})
	})
}

// openBroker connects to stream on url, closed when the test ends.
func openBroker(t *testing.T, url, stream, prefix string) *broker.JetStream {
	t.Helper()
	b, err := broker.Connect(ctx, url, stream, prefix, outboxLog)
	if err != nil {
		t.Fatalf("broker: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// bookings counts what an accounting consumer did.
type bookings struct{ booked, duplicates atomic.Int64 }

// startAccounting runs the accounting consumer over store on b, as the
// service runs it, until the test ends.
func startAccounting(t *testing.T, b *broker.JetStream, store *dao.Store, durable string) *bookings {
	t.Helper()
	counts := &bookings{}
	acct := service.NewAccounting(store)
	acct.OnBooked = func(dup bool) {
		if dup {
			counts.duplicates.Add(1)
		} else {
			counts.booked.Add(1)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Consume(cctx, durable, service.AccountingEvents, acct.Book) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
	return counts
}

// waitUntil polls cond until it holds, failing the test at the deadline.
func waitUntil(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

func countOf(t *testing.T, store *dao.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := store.SQL().QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func mustJournal(t *testing.T, store *dao.Store, orderID int64) []model.JournalLine {
	t.Helper()
	lines, err := store.JournalLines(ctx, orderID)
	if err != nil {
		t.Fatalf("journal of %d: %v", orderID, err)
	}
	return lines
}

// paidLines are the lines one order.paid event books.
func paidLines(ev model.Event, orderID int64, sn, amount string) []model.JournalLine {
	a := decimal.RequireFromString(amount)
	return []model.JournalLine{
		{EventID: ev.ID, EventType: model.EventOrderPaid, OrderID: orderID, OrderSN: sn, Account: model.AccountAlipayClearing, Debit: a},
		{EventID: ev.ID, EventType: model.EventOrderPaid, OrderID: orderID, OrderSN: sn, Account: model.AccountSales, Credit: a},
	}
}

var decimalEqual = cmp.Comparer(func(a, b decimal.Decimal) bool { return a.Equal(b) })

// checkTotals asserts that the journal holds order.paid bookings of sum in
// all: sum debited to clearing and credited to sales, so debits = credits.
func checkTotals(t *testing.T, store *dao.Store, sum decimal.Decimal) {
	t.Helper()
	totals, err := store.JournalTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.AccountTotal{
		{Account: model.AccountAlipayClearing, Debit: sum},
		{Account: model.AccountSales, Credit: sum},
	}
	if diff := cmp.Diff(want, totals, decimalEqual); diff != "" {
		t.Fatalf("journal totals (-want +got):\n%s", diff)
	}
}

// The relay dies between publishing and marking sent (the fault injected
// through AfterPublish): the row stays pending, is published again, and the
// journal books it once — also when a copy reaches the consumer past
// JetStream's de-duplication.
func TestRelayCrashAfterPublishBooksOnce(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		url := natstest.URL(t)
		stream, prefix := natstest.Names(t)
		b := openBroker(t, url, stream, prefix)
		js := natstest.JetStream(t, url)
		streamMsgs := func(t *testing.T) uint64 {
			t.Helper()
			s, err := js.Stream(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return info.State.Msgs
		}

		o := mustOrder(t, store, "CRASH-1", "42.00")
		if _, _, err := service.NewPayments(store).Observe(ctx, paid("CRASH-1", "T-CRASH-1", "42.00")); err != nil {
			t.Fatal(err)
		}
		pending := mustOutbox(t, store, model.OutboxPending)
		if len(pending) != 1 {
			t.Fatalf("outbox holds %d pending events, want the one order.paid", len(pending))
		}
		ev := pending[0].Event

		relay := service.NewRelay(store, b, outboxLog)
		relay.Lease = time.Millisecond // a dead relay's claim ends at once
		errCrash := errors.New("injected: relay died after publishing")
		crashes := 1
		relay.AfterPublish = func(context.Context) error {
			if crashes > 0 {
				crashes--
				return errCrash
			}
			return nil
		}

		if !t.Run("CrashLeavesTheRowPending", func(t *testing.T) {
			if n, err := relay.RunOnce(ctx); !errors.Is(err, errCrash) || n != 0 {
				t.Fatalf("RunOnce = %d, %v; want 0, the injected crash", n, err)
			}
			rows := mustOutbox(t, store, model.OutboxPending)
			if len(rows) != 1 || rows[0].Event.ID != ev.ID || rows[0].Attempts != 0 {
				t.Fatalf("pending rows %+v, want %s untouched", rows, ev.ID)
			}
			if n := streamMsgs(t); n != 1 {
				t.Fatalf("stream holds %d messages, want the 1 published before the crash", n)
			}
		}) {
			return
		}
		if !t.Run("NextRoundPublishesAgainAndMarksSent", func(t *testing.T) {
			waitUntil(t, "the claim's lease ended", 5*time.Second, func() bool {
				n, err := relay.RunOnce(ctx)
				if err != nil {
					t.Fatalf("RunOnce: %v", err)
				}
				return n == 1
			})
			sent := mustOutbox(t, store, model.OutboxSent)
			if len(sent) != 1 || sent[0].Event.ID != ev.ID || sent[0].SentTime == nil {
				t.Fatalf("sent rows %+v, want %s with a sent time", sent, ev.ID)
			}
			if n := mustOutboxCount(t, store, model.OutboxPending); n != 0 {
				t.Fatalf("%d rows still pending", n)
			}
			// Same Nats-Msg-Id within the window: JetStream kept one copy.
			if n := streamMsgs(t); n != 1 {
				t.Fatalf("stream holds %d messages, want 1", n)
			}
		}) {
			return
		}

		counts := startAccounting(t, b, store, "accounting")
		want := paidLines(ev, o.ID, "CRASH-1", "42.00")
		if !t.Run("ConsumerBooksOnce", func(t *testing.T) {
			waitUntil(t, "booked", 20*time.Second, func() bool { return counts.booked.Load() == 1 })
			if diff := cmp.Diff(want, mustJournal(t, store, o.ID), decimalEqual); diff != "" {
				t.Fatalf("journal (-want +got):\n%s", diff)
			}
		}) {
			return
		}
		t.Run("CopyWithoutMsgIDIsBookedOnce", func(t *testing.T) {
			// A copy JetStream cannot recognise (no Nats-Msg-Id), as after
			// the duplicate window: only the consumer's idempotent_log stands
			// between it and a second booking.
			payload, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctx, b.Subject(ev.Type), payload); err != nil {
				t.Fatalf("raw publish: %v", err)
			}
			if n := streamMsgs(t); n != 2 {
				t.Fatalf("stream holds %d messages, want the copy stored too", n)
			}
			waitUntil(t, "the copy was seen", 20*time.Second, func() bool { return counts.duplicates.Load() == 1 })
			if diff := cmp.Diff(want, mustJournal(t, store, o.ID), decimalEqual); diff != "" {
				t.Fatalf("journal after the copy (-want +got):\n%s", diff)
			}
			if n := counts.booked.Load(); n != 1 {
				t.Fatalf("booked %d times", n)
			}
			if n := countOf(t, store, "SELECT COUNT(*) FROM idempotent_log"); n != 1 {
				t.Fatalf("idempotent_log holds %d keys, want 1", n)
			}
			checkTotals(t, store, decimal.RequireFromString("42.00"))
		})
	})
}

// NATS goes down while orders are paid: the outbox keeps every event (no
// row lost, each retried later); when NATS is back everything is delivered
// and the journal balances per order and in total.
func TestBrokerDownNothingLost(t *testing.T) {
	t.Parallel() // mostly waiting on the relay's publish timeout
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		t.Parallel()
		srv := natstest.Start(t)
		stream, prefix := natstest.Names(t)
		b := openBroker(t, srv.URL(), stream, prefix)
		counts := startAccounting(t, b, store, "accounting")
		// Runs first at cleanup: the consumer drains promptly only with the
		// server up, should the test stop while it is down.
		t.Cleanup(srv.Start)
		relay := service.NewRelay(store, b, outboxLog)
		relay.MaxBackoff = 10 * time.Millisecond

		srv.Stop()
		const n = 50
		ids := make([]int64, n)
		amounts := make([]string, n)
		total := decimal.Zero
		payments := service.NewPayments(store)
		for i := range n {
			sn := fmt.Sprintf("DOWN-%d", i)
			amounts[i] = fmt.Sprintf("%d.%02d", i+1, i)
			ids[i] = mustOrder(t, store, sn, amounts[i]).ID
			if _, outcome, err := payments.Observe(ctx, paid(sn, "T-"+sn, amounts[i])); err != nil || outcome != model.OutcomeApplied {
				t.Fatalf("pay %s: %s, %v", sn, outcome, err)
			}
			total = total.Add(decimal.RequireFromString(amounts[i]))
		}

		if !t.Run("RelayWhileDownKeepsEveryRow", func(t *testing.T) {
			before := time.Now()
			if sent, err := relay.RunOnce(ctx); sent != 0 || err != nil {
				t.Fatalf("RunOnce with NATS down = %d, %v; want 0 sent, failures recorded", sent, err)
			}
			rows := mustOutbox(t, store, model.OutboxPending)
			if len(rows) != n {
				t.Fatalf("%d rows pending, want all %d", len(rows), n)
			}
			for _, r := range rows {
				if r.Attempts != 1 || r.LastError == "" || !r.NextAttemptAt.After(before) {
					t.Fatalf("row %d: attempts %d, last error %q, next attempt %v; want 1 failed attempt, retried later",
						r.Seq, r.Attempts, r.LastError, r.NextAttemptAt)
				}
			}
		}) {
			return
		}

		srv.Start()
		if !t.Run("BackUpEverythingDelivered", func(t *testing.T) {
			waitUntil(t, "every row sent", 30*time.Second, func() bool {
				if _, err := relay.RunOnce(ctx); err != nil {
					t.Logf("relay round: %v", err)
				}
				return mustOutboxCount(t, store, model.OutboxSent) == n
			})
			waitUntil(t, "every payment booked", 30*time.Second, func() bool { return counts.booked.Load() == n })
		}) {
			return
		}
		t.Run("JournalBalanced", func(t *testing.T) {
			for i, id := range ids {
				lines := mustJournal(t, store, id)
				debit, credit := decimal.Zero, decimal.Zero
				for _, l := range lines {
					debit, credit = debit.Add(l.Debit), credit.Add(l.Credit)
				}
				if len(lines) != 2 || !debit.Equal(credit) || !debit.Equal(decimal.RequireFromString(amounts[i])) {
					t.Errorf("order %d: %d lines, debit %s, credit %s; want 2 lines of %s", id, len(lines), debit, credit, amounts[i])
				}
			}
			checkTotals(t, store, total)
		})
	})
}

// Two relays (two pools on one database, as two instances) and two
// consumers (one durable, two connections) over thousands of events at
// once: every event is published, delivered and booked exactly once.
// MariaDB only: SQLite has one writer, so there is no concurrency to test.
func TestTwoRelaysTwoConsumers(t *testing.T) {
	t.Parallel()
	dsn := daotest.MySQLDatabase(t)
	url := natstest.URL(t)
	stream, prefix := natstest.Names(t)
	open := func() *dao.Store {
		s, err := dao.Open(ctx, dao.DriverMySQL, dsn, dao.Options{MaxOpenConns: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stores := []*dao.Store{open(), open()}
	if err := stores[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	const n = 2000
	total := decimal.Zero
	ids := make(map[string]bool, n)
	batch := make([]model.Event, 0, 500)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range n {
		amount := fmt.Sprintf("%d.%02d", i/100+1, i%100) // distinct: 1.00 … 20.99
		data, _ := json.Marshal(model.PaymentEventData{OrderID: int64(i + 1), OrderSN: fmt.Sprintf("BULK-%d", i),
			Provider: string(model.ProviderAlipay), TradeNo: fmt.Sprintf("T-BULK-%d", i), Amount: amount,
			State: string(model.PaymentApplied)})
		ev := model.Event{ID: uuid.NewString(), Type: model.EventOrderPaid, AggregateID: int64(i + 1), OccurredAt: now, Data: data}
		ids[ev.ID] = true
		total = total.Add(decimal.RequireFromString(amount))
		if batch = append(batch, ev); len(batch) == cap(batch) {
			if err := stores[0].UpdateOutbox(ctx, func(ctx context.Context, tx *dao.OutboxTx) error {
				return tx.InsertEvents(ctx, batch...)
			}); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}

	var (
		wg     sync.WaitGroup
		sent   [2]atomic.Int64
		counts [2]*bookings
	)
	rctx, stopRelays := context.WithCancel(ctx)
	for i, store := range stores {
		b := openBroker(t, url, stream, prefix)
		counts[i] = startAccounting(t, b, store, "accounting")
		relay := service.NewRelay(store, b, outboxLog)
		relay.Batch, relay.Interval = 50, 10*time.Millisecond
		relay.OnPublished = func(s, _ int) { sent[i].Add(int64(s)) }
		wg.Go(func() { _ = service.RunJobs(rctx, outboxLog, nil, relay.Job()) })
	}
	booked := func() int64 { return counts[0].booked.Load() + counts[1].booked.Load() }
	waitUntil(t, "every event booked", 60*time.Second, func() bool { return booked() >= n })
	stopRelays()
	wg.Wait()
	t.Logf("relays sent %d + %d; consumers booked %d + %d, saw %d + %d duplicates",
		sent[0].Load(), sent[1].Load(), counts[0].booked.Load(), counts[1].booked.Load(),
		counts[0].duplicates.Load(), counts[1].duplicates.Load())

	store := stores[0]
	t.Run("EachRowSentOnce", func(t *testing.T) {
		if s := sent[0].Load() + sent[1].Load(); s != n {
			t.Errorf("relays marked %d rows sent, want %d", s, n)
		}
		if got := mustOutboxCount(t, store, model.OutboxSent); got != n {
			t.Errorf("%d rows SENT, want %d", got, n)
		}
	})
	t.Run("EachEventBookedOnce", func(t *testing.T) {
		if b := booked(); b != n {
			t.Errorf("consumers booked %d events, want %d", b, n)
		}
		if got := countOf(t, store, "SELECT COUNT(*) FROM idempotent_log"); got != n {
			t.Errorf("idempotent_log holds %d keys, want %d", got, n)
		}
		if got := countOf(t, store, "SELECT COUNT(*) FROM journal_entry"); got != 2*n {
			t.Errorf("journal holds %d lines, want %d", got, 2*n)
		}
		if got := countOf(t, store, "SELECT COUNT(*) FROM (SELECT event_id FROM journal_entry GROUP BY event_id HAVING COUNT(*) <> 2) x"); got != 0 {
			t.Errorf("%d events booked with other than 2 lines", got)
		}
		rows, err := store.SQL().QueryContext(ctx, "SELECT DISTINCT event_id FROM journal_entry")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		seen := 0
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			if !ids[id] {
				t.Errorf("journal books unknown event %s", id)
			}
			seen++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if seen != n {
			t.Errorf("journal books %d distinct events, want %d", seen, n)
		}
	})
	t.Run("JournalBalanced", func(t *testing.T) {
		checkTotals(t, store, total)
	})
}

// paymentEvent is an event as Observe writes it, for booking directly.
func paymentEvent(typ model.EventType, orderID int64, sn, amount string) model.Event {
	data, _ := json.Marshal(model.PaymentEventData{OrderID: orderID, OrderSN: sn, Provider: string(model.ProviderAlipay),
		TradeNo: "T-" + sn, OutTradeNo: sn, Amount: amount})
	return model.Event{ID: uuid.NewString(), Type: typ, AggregateID: orderID, OccurredAt: time.Now().UTC(), Data: data}
}

// Book writes each event's balanced lines once, nothing for events the
// journal does not track, and nothing at all for an event it cannot read.
func TestBook(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		acct := service.NewAccounting(store)
		cases := []struct {
			name    string
			ev      model.Event
			wantErr bool
			want    func(ev model.Event) []model.JournalLine
		}{
			{name: "OrderPaidDebitsClearingCreditsSales", ev: paymentEvent(model.EventOrderPaid, 101, "BOOK-101", "12.34"),
				want: func(ev model.Event) []model.JournalLine { return paidLines(ev, 101, "BOOK-101", "12.34") }},
			{name: "RefundPendingCreditsRefundsPayable", ev: paymentEvent(model.EventRefundPending, 102, "BOOK-102", "0.01"),
				want: func(ev model.Event) []model.JournalLine {
					a := decimal.RequireFromString("0.01")
					return []model.JournalLine{
						{EventID: ev.ID, EventType: ev.Type, OrderID: 102, OrderSN: "BOOK-102", Account: model.AccountAlipayClearing, Debit: a},
						{EventID: ev.ID, EventType: ev.Type, OrderID: 102, OrderSN: "BOOK-102", Account: model.AccountRefundsPayable, Credit: a},
					}
				}},
			{name: "OrderCreatedBooksNothing", ev: paymentEvent(model.EventOrderCreated, 103, "BOOK-103", "5.00")},
			{name: "ZeroAmountIsRefused", ev: paymentEvent(model.EventOrderPaid, 104, "BOOK-104", "0.00"), wantErr: true},
			{name: "UnreadableAmountIsRefused", ev: paymentEvent(model.EventOrderPaid, 105, "BOOK-105", "lots"), wantErr: true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var want []model.JournalLine
				if tc.want != nil {
					want = tc.want(tc.ev)
				}
				for _, attempt := range []string{"first", "again"} {
					err := acct.Book(ctx, tc.ev)
					if (err != nil) != tc.wantErr {
						t.Fatalf("%s Book: %v, want error %v", attempt, err, tc.wantErr)
					}
					if diff := cmp.Diff(want, mustJournal(t, store, tc.ev.AggregateID), decimalEqual, cmpopts.EquateEmpty()); diff != "" {
						t.Fatalf("journal after %s Book (-want +got):\n%s", attempt, diff)
					}
				}
				wantKeys := 0
				if want != nil {
					wantKeys = 1
				}
				if n := countOf(t, store, "SELECT COUNT(*) FROM idempotent_log WHERE business_key = ?", "CONSUME:"+tc.ev.ID); n != wantKeys {
					t.Fatalf("idempotent_log holds %d keys for the event, want %d", n, wantKeys)
				}
			})
		}
	})
}

// Many deliveries of one event booked at once (two consumers, a
// redelivery racing the first): one booking, and every delivery answered
// without error, so none is redelivered forever.
func TestBookSameEventInParallel(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		acct := service.NewAccounting(store)
		var booked, dups atomic.Int64
		acct.OnBooked = func(dup bool) {
			if dup {
				dups.Add(1)
			} else {
				booked.Add(1)
			}
		}
		const n = 20
		ev := paymentEvent(model.EventOrderPaid, 201, "BOOK-201", "99.99")
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = acct.Book(ctx, ev)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("delivery %d: %v", i, err)
			}
		}
		if booked.Load() != 1 || dups.Load() != n-1 {
			t.Fatalf("booked %d, duplicates %d; want 1 and %d", booked.Load(), dups.Load(), n-1)
		}
		if diff := cmp.Diff(paidLines(ev, 201, "BOOK-201", "99.99"), mustJournal(t, store, 201), decimalEqual); diff != "" {
			t.Fatalf("journal (-want +got):\n%s", diff)
		}
	})
}

// A relay that keeps trying while NATS is down never holds a lock while it
// waits on the broker: payments go on being applied (their events queue in
// the outbox), and are all delivered once NATS is back.
func TestPaymentsGoOnWhileBrokerIsDown(t *testing.T) {
	t.Parallel()
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		t.Parallel()
		srv := natstest.Start(t)
		stream, prefix := natstest.Names(t)
		b := openBroker(t, srv.URL(), stream, prefix)
		t.Cleanup(srv.Start)
		relay := service.NewRelay(store, b, outboxLog)
		relay.Interval, relay.MaxBackoff = time.Millisecond, 10*time.Millisecond
		srv.Stop()

		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = service.RunJobs(rctx, outboxLog, nil, relay.Job()) }()
		t.Cleanup(func() { stop(); <-done })

		const n = 30
		payments := service.NewPayments(store)
		for i := range n {
			sn := fmt.Sprintf("GOON-%d", i)
			mustOrder(t, store, sn, "3.00")
			if _, outcome, err := payments.Observe(ctx, paid(sn, "T-"+sn, "3.00")); err != nil || outcome != model.OutcomeApplied {
				t.Fatalf("pay %s while NATS is down: %s, %v", sn, outcome, err)
			}
		}
		srv.Start()
		waitUntil(t, "every row sent", 30*time.Second, func() bool {
			return mustOutboxCount(t, store, model.OutboxSent) == n
		})
	})
}
