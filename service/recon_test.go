package service_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
)

// reconDay is the Beijing day the reconciliation tests' business happens
// on; the runs happen the next morning.
const reconDay = "2026-11-30"

// bjTime is a Beijing wall time.
func bjTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.ParseInLocation("2006-01-02 15:04:05", s, model.Beijing)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// settable is a clock tests move.
type settable struct {
	mu sync.Mutex
	at time.Time
}

func (c *settable) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }

// reconRig is the service and a fake Alipay whose clock the test holds:
// what the fake records at "10:00 on the 30th" is in the bill of the 30th,
// and runs happen on the morning of the 1st.
type reconRig struct {
	store    *dao.Store
	fake     *fakealipay.Server
	gw       *alipay.Client
	payments *service.Payments
	refunds  *service.Refunds
	recon    *service.BillReconciler
	clock    *settable
}

func newReconRig(t *testing.T, store *dao.Store) *reconRig {
	t.Helper()
	r := &reconRig{store: store, clock: &settable{at: bjTime(t, reconDay+" 10:00:00")}}
	var err error
	r.fake, err = fakealipay.New(fakealipay.Config{
		AppID: rigAppID, SellerID: rigSellerID, PrivateKey: devkey.Read(t, "alipay_private_key.pem"),
		AppPublicKey: devkey.Read(t, "app_public_key.pem"), Now: r.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	gateway := httptest.NewServer(r.fake.Handler())
	t.Cleanup(gateway.Close)
	t.Cleanup(r.fake.Close)
	r.gw, err = alipay.New(alipay.Config{
		AppID: rigAppID, SellerID: rigSellerID, AppPrivateKey: devkey.Read(t, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"), SandboxGateway: r.fake.GatewayURL(gateway.URL),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.payments = service.NewPayments(store)
	r.refunds = service.NewRefunds(store, service.Providers{model.ProviderAlipay: alipay.NewProvider(r.gw, "", "")}, quietLog)
	r.recon = r.instance("instance-a")
	return r
}

// instance is another process's BillReconciler over the same store.
func (r *reconRig) instance(owner string) *service.BillReconciler {
	rec := service.NewBillReconciler(r.store, billsOf(r.gw), r.payments, quietLog)
	rec.SetClock(func() time.Time { return r.clock.Now().Add(24 * time.Hour) })
	rec.SetOwner(owner)
	rec.Batch = 2 // several batches even for a handful of lines
	return rec
}

// billsOf is the service's BillSource over paynotify's Alipay client, as
// main wires it.
func billsOf(c *alipay.Client) service.BillSource { return alipay.NewProvider(c, "", "") }

// order inserts an order awaiting payment of amount and returns its id.
func (r *reconRig) order(t *testing.T, sn, amount string) int64 {
	t.Helper()
	res, err := r.store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES (?, 1, ?)", sn, amount)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// notify applies a verified Alipay notification of the fake's clock.
func (r *reconRig) notify(t *testing.T, outTradeNo, tradeNo, amount string) model.Outcome {
	t.Helper()
	return r.observe(t, model.ProviderAlipay, outTradeNo, tradeNo, amount)
}

// observe applies a verified paying notification of provider, of the
// fake's clock.
func (r *reconRig) observe(t *testing.T, provider model.Provider, outTradeNo, tradeNo, amount string) model.Outcome {
	t.Helper()
	at := r.clock.Now().UTC()
	_, outcome, err := r.payments.Observe(ctx, model.Observation{
		Provider: provider, Ref: "n-" + tradeNo, OutTradeNo: outTradeNo, TradeNo: tradeNo,
		Amount: decimal.RequireFromString(amount), PaidAt: &at,
	})
	if err != nil {
		t.Fatalf("notify %s: %v", tradeNo, err)
	}
	return outcome
}

func (r *reconRig) run(t *testing.T, rec *service.BillReconciler, date string) model.ReconRun {
	t.Helper()
	run, err := rec.Run(ctx, date)
	if err != nil {
		t.Fatalf("run %s: %v", date, err)
	}
	return run
}

func (r *reconRig) items(t *testing.T, date string, outcome model.ReconOutcome) []model.ReconItem {
	t.Helper()
	d, err := r.recon.Detail(ctx, date, outcome, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Items
}

func (r *reconRig) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := r.store.SQL().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// A notification lost for good — its attempt already retired — is repaired
// by the run through the notification path: the order paid, one APPLIED,
// one order.paid; the fee booked once; a second run repairs nothing.
func TestReconcileRepairsLostPayment(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		id := r.order(t, "RC-LOST", "88.00")
		if _, err := store.SQL().Exec(`INSERT INTO oms_pay_attempt (order_id, attempt_no, out_trade_no, method, amount, state)
			VALUES (?, 2, 'RC-LOST-2', 'qr', '88.00', ?)`, id, model.AttemptExpired); err != nil {
			t.Fatal(err)
		}
		// Paid at Alipay; the notification never came, the query gave up.
		r.fake.AddPaidTrade("RC-LOST-2", "2026113022001400000000000101", dec("88.00"), r.clock.Now())
		// A payment the ledger has too, matched as it is.
		r.order(t, "RC-OK", "10.00")
		r.fake.AddPaidTrade("RC-OK", "2026113022001400000000000102", dec("10.00"), r.clock.Now())
		r.notify(t, "RC-OK", "2026113022001400000000000102", "10.00")

		run := r.run(t, r.recon, reconDay)
		if run.State != model.ReconDone || run.Counts[model.ReconRepaired] != 1 || run.Unresolved != 0 {
			t.Fatalf("run %+v", run)
		}
		if !run.Bill.PaymentReceived.Equal(dec("98.00")) || run.Bill.Payments != 2 || run.Ledger.Payments != 2 ||
			!run.Ledger.PaymentAmount.Equal(dec("98.00")) {
			t.Errorf("bill %+v vs ledger %+v", run.Bill, run.Ledger)
		}
		check := func() {
			t.Helper()
			if o := mustGetOrder(t, store, "RC-LOST"); o.Status != model.OrderPaid {
				t.Errorf("order status %d, want paid", o.Status)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE order_id = ? AND state = 'APPLIED'", id); n != 1 {
				t.Errorf("%d APPLIED payments", n)
			}
			if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE aggregate_id = ? AND event_type = ?", id, model.EventOrderPaid); n != 1 {
				t.Errorf("%d order.paid events", n)
			}
			// 88.00 and 10.00 at 0.6 %: 0.53 + 0.06, booked once.
			if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE event_type = ?", model.EventFeesBooked); n == 0 {
				t.Errorf("no fee event")
			}
			var fees []model.FeeEventData
			rows, err := store.SQL().Query("SELECT payload FROM outbox WHERE event_type = ?", model.EventFeesBooked)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			sum := decimal.Zero
			for rows.Next() {
				var payload string
				rows.Scan(&payload)
				var ev model.Event
				mustJSON(t, payload, &ev)
				var d model.FeeEventData
				mustJSON(t, string(ev.Data), &d)
				fees = append(fees, d)
				sum = sum.Add(dec(d.Amount))
			}
			if !sum.Equal(dec("0.59")) {
				t.Errorf("fees booked %s (%+v), want 0.59 once", sum, fees)
			}
		}
		check()

		// The same date again: recomputed, nothing repaired twice.
		again := r.run(t, r.recon, reconDay)
		if again.Attempts != 2 || again.State != model.ReconDone || again.Counts[model.ReconRepaired] != 1 {
			t.Fatalf("second run %+v", again)
		}
		check()
	})
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
}

// A payment our ledger holds that Alipay never settled (a forged but
// verified notification) is MISSING_AT_PROVIDER and changes nothing; so is
// a refund we hold as made that the bill lacks. An amount that differs is
// AMOUNT_DIFFERS. The exit status a cron job sees is "differences".
func TestReconcileMissingAndDiffering(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		forged := r.order(t, "RC-FORGED", "50.00")
		r.notify(t, "RC-FORGED", "2026113022001400000000000201", "50.00") // the fake never heard of it
		r.order(t, "RC-DIFF", "20.00")
		r.fake.AddPaidTrade("RC-DIFF", "2026113022001400000000000202", dec("20.00"), r.clock.Now())
		r.notify(t, "RC-DIFF", "2026113022001400000000000202", "20.00")
		r.fake.BillAmount("2026113022001400000000000202", dec("19.00"))

		run := r.run(t, r.recon, reconDay)
		if run.Counts[model.ReconMissingAtProvider] != 1 || run.Counts[model.ReconAmountDiffers] != 1 || run.Unresolved != 2 {
			t.Fatalf("run %+v", run)
		}
		miss := r.items(t, reconDay, model.ReconMissingAtProvider)
		if len(miss) != 1 || miss[0].TradeNo != "2026113022001400000000000201" || !miss[0].LedgerAmount.Equal(dec("50.00")) || miss[0].BillAmount != nil {
			t.Fatalf("missing items %+v", miss)
		}
		diff := r.items(t, reconDay, model.ReconAmountDiffers)
		if len(diff) != 1 || !diff[0].BillAmount.Equal(dec("19.00")) || !diff[0].LedgerAmount.Equal(dec("20.00")) {
			t.Fatalf("differing items %+v", diff)
		}
		if o := mustGetOrder(t, store, "RC-FORGED"); o.Status != model.OrderPaid {
			t.Errorf("the forged payment's order changed: %d", o.Status)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE order_id = ? AND state = 'APPLIED'", forged); n != 1 {
			t.Errorf("the forged payment changed: %d APPLIED", n)
		}

		// Resolved with a note, recorded; the first resolution stands.
		it, err := r.recon.ResolveItem(ctx, reconDay, miss[0].ID, "ops-ann", "Alipay confirms: forged; police report 42")
		if err != nil || it.ResolvedAt == nil || it.ResolvedBy != "ops-ann" || it.Note != "Alipay confirms: forged; police report 42" {
			t.Fatalf("resolve: %+v %v", it, err)
		}
		it, err = r.recon.ResolveItem(ctx, reconDay, miss[0].ID, "ops-bob", "again")
		if err != nil || it.ResolvedBy != "ops-ann" {
			t.Fatalf("second resolve: %+v %v", it, err)
		}
		if _, err := r.recon.ResolveItem(ctx, reconDay, 999999, "ops-bob", "x"); !errors.Is(err, model.ErrItemNotFound) {
			t.Fatalf("resolve unknown item: %v", err)
		}
		// A re-run finds the same, and keeps the resolution.
		again := r.run(t, r.recon, reconDay)
		if again.Unresolved != 1 || again.Counts[model.ReconMissingAtProvider] != 1 {
			t.Fatalf("re-run %+v", again)
		}
		if m := r.items(t, reconDay, model.ReconMissingAtProvider); len(m) != 1 || m[0].ResolvedBy != "ops-ann" {
			t.Fatalf("re-run lost the resolution: %+v", m)
		}
	})
}

// A refund made from the merchant console is UNKNOWN_REFUND, recorded
// against its payment: an operator's refund later can only take what is
// left.
func TestReconcileConsoleRefund(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-CONSOLE", "100.00")
		const tradeNo = "2026113022001400000000000301"
		r.fake.AddPaidTrade("RC-CONSOLE", tradeNo, dec("100.00"), r.clock.Now())
		r.notify(t, "RC-CONSOLE", tradeNo, "100.00")
		if err := r.fake.ConsoleRefund(tradeNo, "CONSOLE-301", dec("70.00")); err != nil {
			t.Fatal(err)
		}
		run := r.run(t, r.recon, reconDay)
		if run.Counts[model.ReconUnknownRefund] != 1 || run.Bill.Refunds != 1 {
			t.Fatalf("run %+v", run)
		}
		if _, err := r.refunds.Request(ctx, "RC-CONSOLE", "rma-1", dec("40.00"), "returned"); !errors.Is(err, model.ErrRefundTooLarge) {
			t.Fatalf("refund of 40.00 of the 30.00 left: %v", err)
		}
		if _, err := r.refunds.Request(ctx, "RC-CONSOLE", "rma-2", dec("30.00"), "returned"); err != nil {
			t.Fatalf("refund of the 30.00 left: %v", err)
		}
		again := r.run(t, r.recon, reconDay)
		if again.Counts[model.ReconUnknownRefund] != 1 {
			t.Fatalf("re-run %+v", again)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM oms_refund WHERE kind = 'CONSOLE'"); n != 1 {
			t.Errorf("%d console refunds recorded", n)
		}
		// Booked once: the money left through the console.
		if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE event_type = ? AND payload LIKE ?", model.EventRefunded, `%"kind":"CONSOLE"%`); n != 1 {
			t.Errorf("%d payment.refunded events for the console refund", n)
		}
	})
}

// A damaged bill fails the run with the reason and repairs nothing; a
// day Alipay has no bill for is "no business", and our payments of it are
// missing at Alipay.
func TestReconcileBadOrNoBill(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-BAD", "5.00")
		r.fake.AddPaidTrade("RC-BAD", "2026113022001400000000000401", dec("5.00"), r.clock.Now())
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.Create("2088000000000001_20261130_业务明细.csv")
		w.Write([]byte("支付宝交易号,商户订单号\n")) // UTF-8, no markers
		zw.Close()
		r.fake.ServeBill(reconDay, b.Bytes())
		run := r.run(t, r.recon, reconDay)
		if run.State != model.ReconFailed || run.Error == "" {
			t.Fatalf("run of a damaged bill %+v", run)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment"); n != 0 {
			t.Fatalf("a failed run recorded %d payments", n)
		}
		if d, _ := r.recon.Detail(ctx, reconDay, "", 0); len(d.Items) != 0 || len(d.History) != 1 || d.History[0].State != model.ReconFailed {
			t.Fatalf("failed run detail %+v", d)
		}

		// The day after: no business at Alipay, one payment in our ledger.
		const next = "2026-12-01"
		r.clock.mu.Lock()
		r.clock.at = bjTime(t, next+" 12:00:00")
		r.clock.mu.Unlock()
		r.order(t, "RC-NOBILL", "7.00")
		r.notify(t, "RC-NOBILL", "2026120122001400000000000402", "7.00")
		nb := r.run(t, r.recon, next)
		if nb.State != model.ReconDone || nb.Counts[model.ReconMissingAtProvider] != 1 || nb.Bill.Payments != 0 {
			t.Fatalf("no-bill day %+v", nb)
		}
	})
}

// Alipay may put a payment of 23:59:59 in the next day's bill: the day's
// run does not call it missing, the next day's matches it.
func TestReconcileNeighbouringDay(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.clock.mu.Lock()
		r.clock.at = bjTime(t, reconDay+" 23:59:59")
		r.clock.mu.Unlock()
		r.order(t, "RC-LATE", "3.00")
		const tradeNo = "2026113022001400000000000501"
		r.fake.AddPaidTrade("RC-LATE", tradeNo, dec("3.00"), r.clock.Now())
		r.notify(t, "RC-LATE", tradeNo, "3.00")
		r.fake.BillFinishedAt(tradeNo, bjTime(t, "2026-12-01 00:00:02"))
		r.order(t, "RC-EARLY", "4.00")
		r.fake.AddPaidTrade("RC-EARLY", "2026113022001400000000000502", dec("4.00"), bjTime(t, reconDay+" 08:00:00"))
		r.notify(t, "RC-EARLY", "2026113022001400000000000502", "4.00")

		if run := r.run(t, r.recon, reconDay); run.State != model.ReconDone || run.Unresolved != 0 {
			t.Fatalf("day run %+v", run)
		}
		r.clock.mu.Lock()
		r.clock.at = bjTime(t, "2026-12-01 10:00:00")
		r.clock.mu.Unlock()
		if run := r.run(t, r.recon, "2026-12-01"); run.State != model.ReconDone || run.Unresolved != 0 || run.Bill.Payments != 1 {
			t.Fatalf("next day's run %+v", run)
		}
	})
}

// Two instances reconciling one Alipay date at once repair once,
// whichever claims the date first — and each is seen to win.
func TestReconcileTwoInstances(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.raceTwoInstances(t, model.ProviderAlipay, bjTime(t, reconDay+" 10:00:00"), 100, r.instance,
			func(round int, at time.Time) (int64, string) {
				sn := fmt.Sprintf("RC-TWO-%d", round)
				id := r.order(t, sn, raceAmount)
				tradeNo := fmt.Sprintf("2026113022001400000000%06d", 600+round)
				r.fake.AddPaidTrade(sn, tradeNo, dec(raceAmount), at)
				return id, tradeNo
			})
	})
}

// raceAmount is what the lost payment of each round of raceTwoInstances
// pays; raceFee is its fee at the fakes' 0.6 %.
const raceAmount, raceFee = "50.00", "0.30"

// raceTwoInstances races two instances' Run (made by instance) over one
// date a round, each round a day further back from first, until each
// instance has been seen to claim a date first, for at most rounds
// rounds. pay makes the round's payment: raceAmount paid at the provider
// at at, for an order, its notification lost. Whichever instance wins,
// the date is repaired once: one payment, one order.paid, one REPAIRED
// item, and the payment's fee booked once — the run's events booked by
// Accounting leave fee_expense and the provider's clearing account
// raceFee apart per round. The other instance finds the date held
// (ErrRunBusy) or, if the winner had already finished, runs it again and
// repairs nothing.
func (r *reconRig) raceTwoInstances(t *testing.T, provider model.Provider, first time.Time, rounds int,
	instance func(owner string) *service.BillReconciler, pay func(round int, at time.Time) (orderID int64, tradeNo string)) {
	t.Helper()
	owners := [2]string{"instance-a", "instance-b"}
	recs := [2]*service.BillReconciler{instance(owners[0]), instance(owners[1])}
	accounting := service.NewAccounting(r.store)
	seen, outcomes := map[string]bool{}, map[string]int{}
	round := 0
	for ; round < rounds && !(seen[owners[0]] && seen[owners[1]]); round++ {
		at := first.AddDate(0, 0, -round)
		date := at.Format(time.DateOnly)
		r.clock.mu.Lock()
		r.clock.at = at
		r.clock.mu.Unlock()
		id, tradeNo := pay(round, at)
		var runs [2]model.ReconRun
		var errs [2]error
		// Goroutines released at once are not scheduled fairly (the last
		// one readied tends to run first): each round swaps which
		// instance's goroutine is started first.
		swap := round % 2
		startAll(2, func(g int) {
			i := g ^ swap
			runs[i], errs[i] = recs[i].Run(ctx, date)
		})
		busy := 0
		for i, err := range errs {
			switch {
			case errors.Is(err, model.ErrRunBusy):
				busy++
				outcomes["busy"]++
			case err != nil:
				t.Fatalf("%s: instance %d: %v", date, i, err)
			case runs[i].State != model.ReconDone || runs[i].Provider != provider:
				t.Fatalf("%s: instance %d: %+v", date, i, runs[i])
			}
		}
		if busy == 2 {
			t.Fatalf("%s: both instances found the date busy", date)
		}
		var winner string
		if err := r.store.SQL().QueryRow(`SELECT a.owner FROM recon_attempt a JOIN recon_run r ON r.id = a.run_id
			WHERE r.provider = ? AND r.bill_date = ? AND a.attempt_no = 1`, provider, date).Scan(&winner); err != nil {
			t.Fatal(err)
		}
		seen[winner] = true
		if busy == 0 {
			outcomes["ran again"]++
		}
		if n := r.count(t, "SELECT COUNT(*) FROM oms_order_payment WHERE order_id = ? AND provider = ?", id, provider); n != 1 {
			t.Fatalf("%s: %d payments recorded", date, n)
		}
		if n := r.count(t, "SELECT COUNT(*) FROM outbox WHERE aggregate_id = ? AND event_type = ?", id, model.EventOrderPaid); n != 1 {
			t.Fatalf("%s: %d order.paid events", date, n)
		}
		if n := r.count(t, `SELECT COUNT(*) FROM recon_item i JOIN recon_run r ON r.id = i.run_id
			WHERE r.provider = ? AND i.outcome = ? AND i.trade_no = ?`, provider, model.ReconRepaired, tradeNo); n != 1 {
			t.Fatalf("%s: %d REPAIRED items", date, n)
		}
		r.bookAll(t, accounting)
		paid, fees := dec(raceAmount).Mul(decimal.NewFromInt(int64(round+1))), dec(raceFee).Mul(decimal.NewFromInt(int64(round+1)))
		clearing, expense := r.journalTotal(t, model.ClearingAccount(provider, "")), r.journalTotal(t, model.AccountFeeExpense)
		if !clearing.Debit.Equal(paid) || !clearing.Credit.Equal(fees) || !expense.Debit.Equal(fees) || !expense.Credit.IsZero() {
			t.Fatalf("%s: after %d rounds %s is %+v and %s %+v; want %s paid in, %s of fees out",
				date, round+1, clearing.Account, clearing, model.AccountFeeExpense, expense, paid, fees)
		}
	}
	if !seen[owners[0]] || !seen[owners[1]] {
		t.Fatalf("first claims seen %v in %d rounds: the race did not show both", seen, round)
	}
	t.Logf("each instance claimed first within %d rounds; the other found the date %v", round, outcomes)
}

// bookAll books every event in the outbox through the accounting
// consumer, as the relay and the broker would deliver them: at least once
// (what was booked before is a duplicate, booked once).
func (r *reconRig) bookAll(t *testing.T, a *service.Accounting) {
	t.Helper()
	rows, err := r.store.SQL().Query("SELECT payload FROM outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var evs []model.Event
	for rows.Next() {
		var payload string
		if err := rows.Scan(&payload); err != nil {
			t.Fatal(err)
		}
		var ev model.Event
		mustJSON(t, payload, &ev)
		evs = append(evs, ev)
	}
	rows.Close()
	for _, ev := range evs {
		if err := a.Book(ctx, ev); err != nil {
			t.Fatalf("book %s %s: %v", ev.Type, ev.ID, err)
		}
	}
}

// journalTotal is what the journal has booked on account.
func (r *reconRig) journalTotal(t *testing.T, account string) model.AccountTotal {
	t.Helper()
	totals, err := r.store.JournalTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range totals {
		if a.Account == account {
			return a
		}
	}
	return model.AccountTotal{Account: account}
}

// The daily job runs yesterday once the time of day has come, and retries
// a failed date — not at once, an hour later — until it succeeds.
func TestReconcileDailyJob(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-DAILY", "6.00")
		r.fake.AddPaidTrade("RC-DAILY", "2026113022001400000000000701", dec("6.00"), r.clock.Now())
		rec := service.NewBillReconciler(store, billsOf(r.gw), r.payments, quietLog)
		var now time.Time
		rec.SetClock(func() time.Time { return now })
		round := func(at string, want int) {
			t.Helper()
			now = bjTime(t, at)
			n, err := rec.RunOnce(ctx)
			if err != nil || n != want {
				t.Fatalf("at %s: %d runs, %v; want %d", at, n, err, want)
			}
		}
		round("2026-12-01 09:29:00", 0) // before RECON_AT: the bill may not be out
		r.fake.ServeBill(reconDay, []byte("not a zip"))
		round("2026-12-01 09:30:00", 1) // failed
		if run, _ := r.recon.Detail(ctx, reconDay, "", 0); run.State != model.ReconFailed {
			t.Fatalf("run %+v", run.ReconRun)
		}
		round("2026-12-01 09:45:00", 0) // failed a quarter of an hour ago: later
		r.fake.ServeBill(reconDay, nil)
		round("2026-12-01 10:31:00", 1)
		d, _ := r.recon.Detail(ctx, reconDay, "", 0)
		if d.State != model.ReconDone || d.Counts[model.ReconRepaired] != 1 || len(d.History) != 2 {
			t.Fatalf("run %+v", d)
		}
		round("2026-12-01 12:00:00", 0) // done: not again
	})
}

// lateBills is a bill source that publishes yesterday's bill at 10:00
// Beijing (service.BillPublisher), as WeChat Pay does.
type lateBills struct{ service.BillSource }

func (lateBills) BillPublished() time.Duration { return 10 * time.Hour }

// The daily job waits for a bill published late, whatever its At says,
// and runs the day once it is out; a source that says nothing is run at At.
func TestReconcileDailyJobWaitsForALateBill(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-LATE", "6.00")
		r.fake.AddPaidTrade("RC-LATE", "2026113022001400000000000702", dec("6.00"), r.clock.Now())
		rec := service.NewBillReconciler(store, lateBills{billsOf(r.gw)}, r.payments, quietLog)
		var now time.Time
		rec.SetClock(func() time.Time { return now })
		for _, c := range []struct {
			at   string
			want int
		}{
			{"2026-12-01 09:30:00", 0}, // At has come, the bill has not
			{"2026-12-01 09:59:59", 0},
			{"2026-12-01 10:00:00", 1},
			{"2026-12-01 10:05:00", 0}, // done: not again
		} {
			now = bjTime(t, c.at)
			if n, err := rec.RunOnce(ctx); err != nil || n != c.want {
				t.Fatalf("at %s: %d runs, %v; want %d", c.at, n, err, c.want)
			}
		}
		if d, _ := rec.Detail(ctx, reconDay, "", 0); d.State != model.ReconDone || d.Counts[model.ReconRepaired] != 1 {
			t.Fatalf("run %+v", d)
		}
	})
}

// lateProvider is a provider adapter whose bill is published late
// (service.BillPublisher).
type lateProvider struct{ service.Provider }

func (lateProvider) BillPublished() time.Duration { return 10 * time.Hour }

// A provider's apps as serve wires them (an AppSet, which a reload swaps,
// and a reconciler per account) keep the account's adapter's optional
// interfaces as a bill source,
// before and after a swap: the daily job still waits for a late bill.
func TestReconcileAppSetKeepsTheAdaptersOptions(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		r.order(t, "RC-SET", "6.00")
		r.fake.AddPaidTrade("RC-SET", "2026113022001400000000000703", dec("6.00"), r.clock.Now())
		app := service.App{Provider: model.ProviderAlipay, Account: rigSellerID, ID: rigAppID, Adapter: lateProvider{alipay.NewProvider(r.gw, "", "")}}
		set := service.NewAppSet(app)
		providers := service.Providers{model.ProviderAlipay: set}
		rec := service.NewReconcilers(store, providers, r.payments, quietLog)[model.ProviderAlipay][0]
		set.Swap(service.NewAppSet(app)) // a reload: another set of the same adapter kind
		var now time.Time
		rec.SetClock(func() time.Time { return now })
		for _, c := range []struct {
			at   string
			want int
		}{
			{"2026-12-01 09:30:00", 0}, // At has come, the bill has not
			{"2026-12-01 10:00:00", 1},
		} {
			now = bjTime(t, c.at)
			if n, err := rec.RunOnce(ctx); err != nil || n != c.want {
				t.Fatalf("at %s: %d runs, %v; want %d", c.at, n, err, c.want)
			}
		}
	})
}
