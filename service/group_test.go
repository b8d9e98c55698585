package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// gate holds the first transaction a store begins (in its first
// statement's trace) until released, so that notifications can queue
// behind it and form a group.
type gate struct {
	rec      *recorder
	mu       sync.Mutex
	armed    bool
	held     chan struct{} // closed when the transaction is held
	released chan struct{}
}

func newGate(t *testing.T, store *dao.Store) *gate {
	t.Helper()
	g := &gate{rec: &recorder{}}
	if err := store.Trace(g.trace); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *gate) trace(sql string) {
	g.rec.record(sql)
	g.mu.Lock()
	hold := g.armed && strings.Contains(sql, "FROM `oms_order` WHERE")
	if hold {
		g.armed = false
	}
	g.mu.Unlock()
	if hold {
		close(g.held)
		<-g.released
	}
}

// arm makes the next order lock wait for the returned release.
func (g *gate) arm() (held <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.held, g.released = true, make(chan struct{}), make(chan struct{})
	return g.held, func() { close(g.released) }
}

// observed is what one Observe call answered.
type observed struct {
	pay     model.Payment
	outcome model.Outcome
	err     error
}

// inGroup runs first alone and holds its transaction while ns queue behind
// it, then lets everything go, and returns the answers to ns and the
// statements run after first's.
func inGroup(t *testing.T, store *dao.Store, g *gate, p *service.Payments, first model.Observation, ns []model.Observation) ([]observed, []string) {
	t.Helper()
	held, release := g.arm()
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := p.Observe(ctx, first)
		firstDone <- err
	}()
	<-held
	got := make([]observed, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &got[i]
			o.pay, o.outcome, o.err = p.Observe(ctx, n)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for service.Queued(p) < len(ns) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notifications queued", service.Queued(p), len(ns))
		}
		time.Sleep(time.Millisecond)
	}
	var stmts []string
	g.rec.mu.Lock()
	g.rec.on, g.rec.stmt = true, nil
	g.rec.mu.Unlock()
	release()
	if err := <-firstDone; err != nil {
		t.Fatalf("first notification: %v", err)
	}
	wg.Wait()
	g.rec.mu.Lock()
	g.rec.on, stmts = false, g.rec.stmt
	g.rec.mu.Unlock()
	// Drop the rest of first's transaction, recorded after its release.
	if i := indexOf(stmts, "COMMIT"); i >= 0 {
		stmts = stmts[i+1:]
	}
	return got, stmts
}

// hooks records what p tells OnGroup and OnFallback.
type hooks struct {
	mu        sync.Mutex
	sizes     []int
	fallbacks map[service.Fallback]int
}

func hook(p *service.Payments) *hooks {
	h := &hooks{fallbacks: map[service.Fallback]int{}}
	p.OnGroup = func(applied int) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.sizes = append(h.sizes, applied)
	}
	p.OnFallback = func(f service.Fallback) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.fallbacks[f]++
	}
	return h
}

// check compares what the hooks were told with the group sizes and
// fallbacks wanted.
func (h *hooks) check(t *testing.T, sizes []int, fallbacks map[service.Fallback]int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if diff := cmp.Diff(sizes, h.sizes); diff != "" {
		t.Errorf("group sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fallbacks, h.fallbacks); diff != "" {
		t.Errorf("fallbacks (-want +got):\n%s", diff)
	}
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// The statements of one group of first notices, pinned: one lookup for
// all (one statement: the payments, attempts and orders), then one
// transaction with one statement per table.
func TestGroupApplySQL(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		g := newGate(t, store)
		p := service.NewPayments(store)
		orders := service.NewOrders(store)
		first := mustOrder(t, store, newSN("G-FIRST-"), "1.00")
		var ns []model.Observation
		var buys []purchase
		for i := range 3 {
			b := newPurchase(t, store, orders, fmt.Sprintf("group-sql-%d-%s", i, newSN("")))
			buys = append(buys, b)
			ns = append(ns, b.notification())
		}
		got, stmts := inGroup(t, store, g, p, paid(first.OrderSN, newSN("T-G-"), "1.00"), ns)
		for i, o := range got {
			if o.err != nil || o.outcome != model.OutcomeApplied || o.pay.State != model.PaymentApplied {
				t.Fatalf("notification %d: %s %+v %v", i, o.outcome, o.pay, o.err)
			}
		}
		w := groupSQL[store.Driver()]
		want := append(lookup3, "BEGIN", w.lock, w.insertPayments, w.markOrdersPaid, sellStock3, w.insertEvents, "COMMIT")
		if diff := cmp.Diff(want, stmts); diff != "" {
			t.Errorf("statements differ (-want +got):\n%s", diff)
		}
		if service.Groups(p) != 1 {
			t.Errorf("%d group transactions, want 1", service.Groups(p))
		}
		for _, b := range buys {
			if st := checkPaidOrClosed(t, store, b); st != model.OrderPaid {
				t.Errorf("%s: status %d, want paid", b.view.OrderSN, st)
			}
		}
	})
}

// A group of duplicates is answered from the one lookup: no transaction.
func TestGroupApplyDuplicatesSQL(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		g := newGate(t, store)
		// The duplicate cache would answer them before any group: this is
		// the database's answer, another instance's or a forgotten trade's.
		p := service.NewPayments(store, service.DuplicateCache(0))
		var ns []model.Observation
		for range 3 {
			o := mustOrder(t, store, newSN("GD-"), "1.00")
			n := paid(o.OrderSN, "T-"+o.OrderSN, "1.00")
			if _, outcome, err := p.Observe(ctx, n); err != nil || outcome != model.OutcomeApplied {
				t.Fatalf("first notice: %s %v", outcome, err)
			}
			ns = append(ns, n)
		}
		first := mustOrder(t, store, newSN("GD-FIRST-"), "1.00")
		got, stmts := inGroup(t, store, g, p, paid(first.OrderSN, "T-"+first.OrderSN, "1.00"), ns)
		for i, o := range got {
			if o.err != nil || o.outcome != model.OutcomeDuplicate {
				t.Errorf("notification %d: %s %v, want duplicate", i, o.outcome, o.err)
			}
		}
		if diff := cmp.Diff(lookup3, stmts); diff != "" {
			t.Errorf("statements differ (-want +got):\n%s", diff)
		}
	})
}

// The statements of a group, as each driver renders them, for three
// orders.
const (
	groupLock   = orderSelect + "id IN (?,?,?) ORDER BY id"
	payments3   = "INSERT INTO `oms_order_payment` (`account`,`amount`,`app`,`create_time`,`notify_id`,`order_id`,`out_trade_no`,`paid_at`,`provider`,`reason`,`state`,`trade_no`,`update_time`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?),(?,?,?,?,?,?,?,?,?,?,?,?,?),(?,?,?,?,?,?,?,?,?,?,?,?,?) "
	events3     = "INSERT INTO `outbox` (`event_id`,`aggregate_id`,`event_type`,`payload`,`state`,`attempts`,`next_attempt_at`,`last_error`,`create_time`,`sent_time`) VALUES (?,?,?,?,?,?,?,?,?,?),(?,?,?,?,?,?,?,?,?,?),(?,?,?,?,?,?,?,?,?,?)"
	ordersPaid3 = "UPDATE `oms_order` SET `modify_time`=?,`pay_type`=?,`payment_time`=CASE id WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? END,`status`=? WHERE id IN (?,?,?) AND status = ?"
	sellStock3  = "UPDATE `pms_sku_stock` SET `lock_stock`=lock_stock - CASE id WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? END,`modify_time`=?,`stock`=stock - CASE id WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? END WHERE id IN (?,?,?)"
)

// lookup3 is the group's lookup of three trades: their payments, and the
// attempts and orders their out_trade_nos name, in one statement.
var lookup3 = []string{
	"SELECT 'p' AS src, trade_no AS k, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, 0 AS attempt_id, 0 AS attempt_no, provider, account, app FROM oms_order_payment WHERE provider = ? AND trade_no IN (?,?,?)" +
		" UNION ALL SELECT 'a', out_trade_no, order_id, out_trade_no, amount, state, '', '', NULL, id, attempt_no, provider, account, app FROM oms_pay_attempt WHERE out_trade_no IN (?,?,?)" +
		" UNION ALL SELECT 'o', order_sn, id, order_sn, pay_amount, '', '', '', NULL, 0, 0, '', '', '' FROM oms_order WHERE order_sn IN (?,?,?)",
}

var groupSQL = map[string]struct{ lock, insertPayments, markOrdersPaid, insertEvents string }{
	dao.DriverMySQL: {
		lock:           groupLock + " FOR UPDATE",
		insertPayments: payments3 + "ON DUPLICATE KEY UPDATE `provider`=`provider`",
		markOrdersPaid: ordersPaid3,
		insertEvents:   events3,
	},
	dao.DriverSQLite: {
		lock:           groupLock,
		insertPayments: payments3 + "ON CONFLICT (`provider`,`trade_no`) DO NOTHING",
		markOrdersPaid: ordersPaid3,
		insertEvents:   events3,
	},
}

// One group holding every anomaly at once: each member is answered as it
// would be alone (the decision table), the clean first notices are
// applied in the group, and nothing fails another.
func TestGroupApplyAnomaliesFallBack(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		g := newGate(t, store)
		// Off: the duplicates below are the group lookup's to answer (the
		// cache would answer them before they queue).
		p := service.NewPayments(store, service.DuplicateCache(0))
		h := hook(p)
		sn := func(prefix string) string { return mustOrder(t, store, newSN(prefix), "10.00").OrderSN }
		first := sn("GA-FIRST-")
		paidBefore, clean1, clean2, twice, copies, under := sn("GA-PAID-"), sn("GA-C1-"), sn("GA-C2-"), sn("GA-TWICE-"), sn("GA-COPY-"), sn("GA-UNDER-")
		if _, _, err := p.Observe(ctx, paid(paidBefore, "T-"+paidBefore, "10.00")); err != nil {
			t.Fatal(err)
		}
		stray := paid(newSN("GA-STRAY-"), newSN("T-GA-STRAY-"), "3.00")
		if _, o, err := p.Observe(ctx, stray); err != nil || o != model.OutcomeUnmatched {
			t.Fatalf("stray payment: %s %v", o, err)
		}
		ns := []model.Observation{
			paid(clean1, "T-"+clean1, "10.00"),                   // 0 applied in the group
			paid(clean2, "T-"+clean2, "10.00"),                   // 1 applied in the group
			paid(paidBefore, "T-"+paidBefore, "10.00"),           // 2 duplicate, from the lookup
			paid(clean1, "T-"+paidBefore, "10.00"),               // 3 conflict: the trade is another order's
			paid(twice, "T-"+twice+"-a", "10.00"),                // 4 two trades of one order:
			paid(twice, "T-"+twice+"-b", "10.00"),                // 5 one applied, one owed back
			paid(copies, "T-"+copies, "10.00"),                   // 6 two copies of one trade:
			paid(copies, "T-"+copies, "10.00"),                   // 7 one applied, one duplicate
			paid(under, "T-"+under, "9.99"),                      // 8 amount mismatch
			paid(newSN("GA-NONE-"), newSN("T-GA-NONE-"), "1.00"), // 9 no such order: UNMATCHED
			stray, // 10 duplicate of an UNMATCHED payment, from the lookup
		}
		got, _ := inGroup(t, store, g, p, paid(first, "T-"+first, "10.00"), ns)
		outcome := func(i int) model.Outcome {
			if got[i].err != nil {
				t.Fatalf("notification %d: %v", i, got[i].err)
			}
			return got[i].outcome
		}
		for i, want := range map[int]model.Outcome{0: model.OutcomeApplied, 1: model.OutcomeApplied, 2: model.OutcomeDuplicate, 8: model.OutcomeRefundPending, 10: model.OutcomeDuplicate} {
			if o := outcome(i); o != want {
				t.Errorf("notification %d: %s, want %s", i, o, want)
			}
		}
		if !errors.Is(got[3].err, model.ErrTradeConflict) {
			t.Errorf("conflicting trade: %v, want ErrTradeConflict", got[3].err)
		}
		if pair := []model.Outcome{outcome(4), outcome(5)}; !samePair(pair, model.OutcomeApplied, model.OutcomeRefundPending) {
			t.Errorf("two trades of one order: %v", pair)
		}
		if pair := []model.Outcome{outcome(6), outcome(7)}; !samePair(pair, model.OutcomeApplied, model.OutcomeDuplicate) {
			t.Errorf("two copies of one trade: %v", pair)
		}
		if o := outcome(9); o != model.OutcomeUnmatched {
			t.Errorf("unknown order: %s, want %s", o, model.OutcomeUnmatched)
		}
		if service.Groups(p) != 1 {
			t.Errorf("%d group transactions, want 1", service.Groups(p))
		}
		// The metrics' hooks: one group transaction of two (0 and 1);
		// the duplicates and the conflict (2, 3, 10) were answered in the
		// group, the rest ran alone. The ones before the group ran alone
		// on an idle applier: no fallback.
		h.check(t, []int{2}, map[service.Fallback]int{
			service.FallbackTwoTradesOneOrder: 2, // 4, 5
			service.FallbackDuplicateInGroup:  2, // 6, 7
			service.FallbackNotEligible:       2, // 8, 9
		})
		for _, s := range []string{clean1, clean2, twice, copies} {
			if o := mustGetOrder(t, store, s); o.Status != model.OrderPaid {
				t.Errorf("%s: status %d, want paid", s, o.Status)
			}
		}
		if o := mustGetOrder(t, store, under); o.Status != model.OrderAwaitingPayment {
			t.Errorf("%s: status %d, want awaiting payment", under, o.Status)
		}
	})
}

func samePair(got []model.Outcome, a, b model.Outcome) bool {
	return got[0] == a && got[1] == b || got[0] == b && got[1] == a
}

// Hundreds of notifications at once — first notices, their copies, a
// second trade for every order, trades that belong to another order,
// unknown orders (UNMATCHED) — on orders that share one SKU: every order paid once by
// one trade, the other owed back, every copy a duplicate, every conflict
// refused, the shared stock sold once per order, one event per payment.
// Rounds repeat until some were applied in groups and some alone. The
// same storm with group apply off holds the same invariants.
func TestGroupApplyStorm(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
				storm(t, store, service.NewPayments(store, service.GroupApply(on)), on)
			})
		})
	}
}

// storm is TestGroupApplyStorm on one store; grouped says whether group
// transactions must be seen.
func storm(t *testing.T, store *dao.Store, p *service.Payments, grouped bool) {
	{
		orders := service.NewOrders(store)
		const perRound, copies = 40, 3
		sku := mustSKU(t, store, "10.00", 100_000)
		member := mustMember(t, store, 0)
		pre := mustOrder(t, store, newSN("STORM-PRE-"), "10.00")
		if _, _, err := p.Observe(ctx, paid(pre.OrderSN, "T-"+pre.OrderSN, "10.00")); err != nil {
			t.Fatal(err)
		}
		total, unmatchedAll := 0, 0
		for r := 0; r < maxRaceRounds && (r == 0 || grouped && service.Groups(p) == 0); r++ {
			var sns []string
			var ns []model.Observation
			for i := range perRound {
				v := mustPlace(t, orders, member, newSN("storm-"), model.PlaceOrder{Items: []model.ItemRequest{{SKUID: sku, Quantity: 1}}})
				sns = append(sns, v.OrderSN)
				for range copies {
					ns = append(ns, paid(v.OrderSN, "T-"+v.OrderSN+"-a", v.PayAmount))
				}
				ns = append(ns, paid(v.OrderSN, "T-"+v.OrderSN+"-b", v.PayAmount))
				if i%5 == 0 {
					ns = append(ns, paid(v.OrderSN, "T-"+pre.OrderSN, "10.00"))
					ns = append(ns, paid(newSN("STORM-NONE-"), newSN("T-STORM-NONE-"), "10.00"))
				}
			}
			total += perRound
			got := make([]observed, len(ns))
			unmatched := 0
			startAll(len(ns), func(i int) {
				got[i].pay, got[i].outcome, got[i].err = p.Observe(ctx, ns[i])
			})
			count := map[string]map[model.Outcome]int{}
			for i, n := range ns {
				o := got[i]
				switch {
				case n.TradeNo == "T-"+pre.OrderSN:
					if !errors.Is(o.err, model.ErrTradeConflict) {
						t.Fatalf("conflicting trade for %s: %s %v", n.OutTradeNo, o.outcome, o.err)
					}
					continue
				case strings.HasPrefix(n.OutTradeNo, "STORM-NONE-"):
					if o.err != nil || o.outcome != model.OutcomeUnmatched {
						t.Fatalf("unknown order %s: %s %v", n.OutTradeNo, o.outcome, o.err)
					}
					unmatched++
					continue
				case o.err != nil:
					t.Fatalf("%s %s: %v", n.OutTradeNo, n.TradeNo, o.err)
				}
				if count[n.OutTradeNo] == nil {
					count[n.OutTradeNo] = map[model.Outcome]int{}
				}
				count[n.OutTradeNo][o.outcome]++
			}
			unmatchedAll += unmatched
			for _, sn := range sns {
				c := count[sn]
				if c[model.OutcomeApplied] != 1 || c[model.OutcomeRefundPending] != 1 || c[model.OutcomeDuplicate] != copies-1 {
					t.Fatalf("%s: outcomes %v, want one applied, one refund pending, %d duplicates", sn, c, copies-1)
				}
				o := mustGetOrder(t, store, sn)
				ps := mustPayments(t, store, o.ID)
				states := map[model.PaymentState]int{}
				for _, pay := range ps {
					states[pay.State]++
				}
				if o.Status != model.OrderPaid || len(ps) != 2 || states[model.PaymentApplied] != 1 || states[model.PaymentRefundPending] != 1 {
					t.Fatalf("%s: status %d, payments %v", sn, o.Status, states)
				}
			}
		}
		if grouped && service.Groups(p) == 0 {
			t.Fatalf("no group transaction in %d rounds", maxRaceRounds)
		}
		s := mustReadSKU(t, store, sku)
		if s.Stock != 100_000-total || s.LockStock != 0 {
			t.Fatalf("shared SKU: stock %d, locked %d; want %d, 0", s.Stock, s.LockStock, 100_000-total)
		}
		events := map[string]int{}
		rows, err := store.SQL().QueryContext(ctx, "SELECT event_type, COUNT(*) FROM outbox GROUP BY event_type")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var typ string
			var n int
			if err := rows.Scan(&typ, &n); err != nil {
				t.Fatal(err)
			}
			events[typ] = n
		}
		want := map[string]int{string(model.EventOrderPaid): total + 1, string(model.EventRefundPending): total,
			string(model.EventPaymentUnmatched): unmatchedAll}
		for typ, n := range want {
			if events[typ] != n {
				t.Errorf("%s events: %d, want %d (all: %v)", typ, events[typ], n, events)
			}
		}
		t.Logf("%d orders, %d group transactions", total, service.Groups(p))
	}
}

// A notification with less than the group budget left does not wait for
// the transaction in flight: it runs alone at once (on MariaDB, where it
// has a connection of its own while the held transaction keeps another).
func TestGroupApplyNearDeadlineRunsAlone(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	g := newGate(t, store)
	p := service.NewPayments(store)
	h := hook(p)
	first, late := mustOrder(t, store, newSN("GA-HELD-"), "1.00"), mustOrder(t, store, newSN("GA-LATE-"), "1.00")
	held, release := g.arm()
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := p.Observe(ctx, paid(first.OrderSN, "T-"+first.OrderSN, "1.00"))
		firstDone <- err
	}()
	<-held
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, outcome, err := p.Observe(short, paid(late.OrderSN, "T-"+late.OrderSN, "1.00"))
	cancel()
	release()
	if err != nil || outcome != model.OutcomeApplied {
		t.Fatalf("near its deadline: %s %v, want applied alone while the group's transaction is held", outcome, err)
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	h.check(t, nil, map[service.Fallback]int{service.FallbackNearDeadline: 1})
}

// A panic while a notification is applied (a bug) reaches its caller, and
// the applier is not left busy: the next notification is applied.
func TestGroupApplySurvivesPanic(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		var armed sync.Mutex
		boom := false
		if err := store.Trace(func(sql string) {
			armed.Lock()
			fire := boom && strings.Contains(sql, "FROM `oms_order` WHERE")
			boom = boom && !fire
			armed.Unlock()
			if fire {
				panic("bug")
			}
		}); err != nil {
			t.Fatal(err)
		}
		p := service.NewPayments(store)
		a, b := mustOrder(t, store, newSN("GA-PANIC-"), "1.00"), mustOrder(t, store, newSN("GA-AFTER-"), "1.00")
		armed.Lock()
		boom = true
		armed.Unlock()
		func() {
			defer func() {
				if r := recover(); r != "bug" {
					t.Fatalf("recovered %v, want the panic", r)
				}
			}()
			p.Observe(ctx, paid(a.OrderSN, "T-"+a.OrderSN, "1.00"))
		}()
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, o, err := p.Observe(short, paid(b.OrderSN, "T-"+b.OrderSN, "1.00")); err != nil || o != model.OutcomeApplied {
			t.Fatalf("after the panic: %s %v, want applied", o, err)
		}
	})
}

// A group that waits on a lock past the lock-wait timeout rolls back and
// its members run alone: the one whose order another transaction holds
// waits for it, the others are applied at once, none fails. (MariaDB:
// SQLite has no row locks to wait on.)
func TestGroupApplyLockWaitFallsBack(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	g := newGate(t, store)
	p := service.NewPayments(store)
	h := hook(p)
	first := mustOrder(t, store, newSN("GA-LW-FIRST-"), "1.00")
	var ns []model.Observation
	var held model.Order
	for i := range 3 {
		o := mustOrder(t, store, newSN("GA-LW-"), "1.00")
		if i == 0 {
			held = o
		}
		ns = append(ns, paid(o.OrderSN, "T-"+o.OrderSN, "1.00"))
	}
	locked, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- store.UpdateOrder(ctx, dao.OrderID(held.ID), dao.ForUpdate, func(context.Context, *dao.OrderTx, model.Order) error {
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked

	gateHeld, open := g.arm()
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := p.Observe(ctx, paid(first.OrderSN, "T-"+first.OrderSN, "1.00"))
		firstDone <- err
	}()
	<-gateHeld
	got := make([]observed, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { got[i].pay, got[i].outcome, got[i].err = p.Observe(ctx, n) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for service.Queued(p) < len(ns) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notifications queued", service.Queued(p), len(ns))
		}
		time.Sleep(time.Millisecond)
	}
	g.rec.mu.Lock()
	g.rec.on, g.rec.stmt = true, nil
	g.rec.mu.Unlock()
	open()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	// The group's lock statement waits for the held order until the
	// lock-wait timeout (3 s), and the group rolls back.
	for {
		g.rec.mu.Lock()
		rolledBack := indexOf(g.rec.stmt, "ROLLBACK") >= 0
		g.rec.mu.Unlock()
		if rolledBack {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group never gave up its lock wait")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	for i, o := range got {
		if o.err != nil || o.outcome != model.OutcomeApplied {
			t.Errorf("notification %d: %s %v, want applied alone", i, o.outcome, o.err)
		}
	}
	if n := service.Groups(p); n != 0 {
		t.Errorf("%d group transactions committed, want 0", n)
	}
	h.check(t, nil, map[service.Fallback]int{service.FallbackLockWait: len(ns)})
}
