package service_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"paynotify/broker/natstest"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// Each job gives a row it fails on its own back-off: a whole batch of rows
// that always fail does not stop a newer good row. Each case fills a batch
// of 2 with failing rows older than the good one; without the back-off
// every round would pick the same failing rows again.
func TestFailingRowsDoNotStarveNewerOnes(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		exec := func(t *testing.T, query string, args ...any) {
			t.Helper()
			if _, err := store.SQL().ExecContext(ctx, query, args...); err != nil {
				t.Fatal(err)
			}
		}

		t.Run("OrderCloser", func(t *testing.T) {
			// A reservation naming a SKU that was deleted: the close rolls
			// back every time.
			var bad []model.Order
			for i := range 2 {
				o := mustOrder(t, store, newSN(fmt.Sprintf("BO-BAD%d-", i)), "10.00")
				exec(t, "UPDATE oms_order SET stock_reservation = ? WHERE id = ?", "987654321:1", o.ID)
				bad = append(bad, o)
			}
			good := mustOrder(t, store, newSN("BO-GOOD-"), "10.00")
			closer := newCloser(store, quietLog, expireAll, 2)
			rounds := []int{}
			for range 3 {
				n, err := closer.RunOnce(ctx)
				if err != nil {
					t.Fatalf("round: %v", err)
				}
				rounds = append(rounds, n)
			}
			if fmt.Sprint(rounds) != "[0 1 0]" {
				t.Fatalf("rounds closed %v, want [0 1 0]: the failing pair, then the good one, then nothing due", rounds)
			}
			if o := mustGetOrder(t, store, good.OrderSN); o.Status != model.OrderClosed {
				t.Fatalf("good order is %s, want closed", o.Status)
			}
			for _, o := range bad {
				if o := mustGetOrder(t, store, o.OrderSN); o.Status != model.OrderAwaitingPayment {
					t.Fatalf("failing order is %s, want still awaiting payment", o.Status)
				}
			}
			exec(t, "DELETE FROM oms_order WHERE id IN (?, ?)", bad[0].ID, bad[1].ID) // out of the other cases' way
		})

		t.Run("TradeClose", func(t *testing.T) {
			r := newRig(t, store)
			c := r.checkout(nil)
			var sns []string
			for i := range 3 {
				o := mustOrder(t, store, newSN(fmt.Sprintf("BT%d-", i)), "10.00")
				mustStart(t, c, o.OrderSN, model.PayPage)
				if _, err := service.NewOrders(store).Cancel(ctx, 7, o.OrderSN); err != nil {
					t.Fatal(err)
				}
				sns = append(sns, o.OrderSN)
			}
			gw := &refusingGateway{Provider: r.providers()[model.ProviderAlipay], refuse: map[string]bool{sns[0]: true, sns[1]: true}}
			rec := service.NewOpenTrades(store, service.Providers{model.ProviderAlipay: gw}, r.payments, quietLog)
			rec.Batch = 2
			rounds := []int{}
			for range 3 {
				n, err := rec.CloseAbandoned(ctx)
				if err != nil {
					t.Fatalf("round: %v", err)
				}
				rounds = append(rounds, n)
			}
			if fmt.Sprint(rounds) != "[0 1 0]" {
				t.Fatalf("rounds closed %v, want [0 1 0]", rounds)
			}
			if a := mustAttempt(t, store, sns[2]); a.State != model.AttemptClosed {
				t.Fatalf("good attempt is %s, want CLOSED", a.State)
			}
			if n := gw.refused.Load(); n != 2 {
				t.Fatalf("Alipay asked to close the refused trades %d times, want 2 (then they wait)", n)
			}
		})

		t.Run("RefundEnqueue", func(t *testing.T) {
			// Money owed back on orders that were deleted since: the refund
			// cannot lock their order.
			payments := service.NewPayments(store)
			var bad []model.Order
			for i := range 3 {
				o := mustOrder(t, store, newSN(fmt.Sprintf("BR%d-", i)), "10.00")
				if _, out, err := payments.Observe(ctx, paid(o.OrderSN, newSN("T-BR-"), "0.01")); err != nil || out != model.OutcomeRefundPending {
					t.Fatalf("underpayment: %s, %v", out, err)
				}
				bad = append(bad, o)
			}
			good, bad := bad[2], bad[:2]
			exec(t, "DELETE FROM oms_order WHERE id IN (?, ?)", bad[0].ID, bad[1].ID)
			refunds := service.NewRefunds(store, nil, quietLog)
			refunds.Batch = 2
			rounds := []int{}
			for range 3 {
				n, err := refunds.Enqueue(ctx)
				if err != nil {
					t.Fatalf("round: %v", err)
				}
				rounds = append(rounds, n)
			}
			if fmt.Sprint(rounds) != "[0 1 0]" {
				t.Fatalf("rounds enqueued %v, want [0 1 0]", rounds)
			}
			if fs, err := store.RefundsByOrder(ctx, good.ID); err != nil || len(fs) != 1 {
				t.Fatalf("refunds of the good order: %v, %v; want one", fs, err)
			}
		})

		t.Run("OutboxRelay", func(t *testing.T) {
			// Rows whose payload does not parse (written by hand, or by an
			// older binary): they are set aside FAILED, not claimed forever.
			stream, prefix := natstest.Names(t)
			b := openBroker(t, natstest.URL(t), stream, prefix)
			relay := service.NewRelay(store, b, quietLog)
			relay.Batch = 2
			for { // the earlier cases' events first
				n, err := relay.RunOnce(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			now := time.Now().UTC()
			for i := range 2 {
				exec(t, `INSERT INTO outbox (event_id, aggregate_id, event_type, payload, state, attempts, next_attempt_at, last_error, create_time)
VALUES (?, 1, 'order.paid', 'not json', 'PENDING', 0, ?, '', ?)`, fmt.Sprintf("bad-payload-%d", i), now.Add(-time.Minute), now.Add(-time.Minute))
			}
			o := mustOrder(t, store, newSN("BX-"), "10.00")
			if _, _, err := service.NewPayments(store).Observe(ctx, paid(o.OrderSN, newSN("T-BX-"), "10.00")); err != nil {
				t.Fatal(err)
			}
			rounds := []int{}
			for range 3 {
				n, err := relay.RunOnce(ctx)
				if err != nil {
					t.Fatalf("round: %v", err)
				}
				rounds = append(rounds, n)
			}
			if fmt.Sprint(rounds) != "[0 1 0]" {
				t.Fatalf("rounds sent %v, want [0 1 0]: none of the bad pair, then the good event", rounds)
			}
			var failed int
			if err := store.SQL().QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE event_id LIKE 'bad-payload-%' AND state = 'FAILED' AND last_error != ''").Scan(&failed); err != nil || failed != 2 {
				t.Fatalf("bad rows FAILED: %d, %v; want 2", failed, err)
			}
			if n := mustOutboxCount(t, store, model.OutboxPending); n != 0 {
				t.Fatalf("%d events still pending after the bad pair was set aside", n)
			}
		})
	})
}

// refusingGateway is Alipay refusing, every time, to close some trades.
type refusingGateway struct {
	service.Provider
	refuse  map[string]bool
	refused atomic.Int64
}

func (g *refusingGateway) CloseTrade(ctx context.Context, outTradeNo string) error {
	if g.refuse[outTradeNo] {
		g.refused.Add(1)
		return fmt.Errorf("%w: ACQ.TRADE_STATUS_ERROR (test)", model.ErrGatewayRefused)
	}
	return g.Provider.CloseTrade(ctx, outTradeNo)
}
