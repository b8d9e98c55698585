package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// failedRefund makes a paid order with an after-sale refund Alipay refused.
func failedRefund(tb testing.TB, e *env, sn string) model.Refund {
	tb.Helper()
	ctx := tb.Context()
	mustOrder(tb, e.store, sn, 1, "50.00")
	e.pay(tb, sn, "T-"+sn, "50.00")
	f, err := e.refunds.Request(ctx, sn, "rma-"+sn, decimal.RequireFromString("20.00"), "returned")
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.store.UpdateOrder(ctx, dao.OrderID(f.OrderID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
		_, err := tx.FinishRefund(ctx, f.OutRequestNo, model.RefundFailed, "ACQ.SELLER_BALANCE_NOT_ENOUGH")
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return f
}

func mustRefund(tb testing.TB, store *dao.Store, no string) model.Refund {
	tb.Helper()
	f, err := store.Refund(tb.Context(), no)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// actions lists the admin_audit rows of one action.
func actions(tb testing.TB, store *dao.Store, action model.AuditAction) []model.Audit {
	tb.Helper()
	var out []model.Audit
	for _, a := range audits(tb, store) {
		if a.Action == action {
			out = append(out, a)
		}
	}
	return out
}

// postTwice posts a form, then the same form again (a double click, a
// resubmitted page), and checks the second did nothing new.
func postTwice(tb testing.TB, c *client, path string, form url.Values, wantBack string) {
	tb.Helper()
	first := c.post(tb, path, form)
	if first.status != http.StatusSeeOther || !strings.HasPrefix(first.location, wantBack) || strings.Contains(first.location, "done=already") {
		tb.Fatalf("POST %s: %d to %q, want 303 to %s\n%s", path, first.status, first.location, wantBack, first.body)
	}
	second := c.post(tb, path, form)
	if second.status != http.StatusSeeOther || !strings.Contains(second.location, "done=already") {
		tb.Fatalf("POST %s again: %d to %q, want 303 …done=already", path, second.status, second.location)
	}
	page := c.mustGet(tb, second.location, http.StatusOK)
	mustContain(tb, page.body, "Nothing done: this form was submitted before")
}

// refused checks that a post without a valid anti-forgery token, or
// signed out, is refused.
func refused(tb testing.TB, e *env, c *client, path string, form url.Values) {
	tb.Helper()
	bad := url.Values{}
	for k, v := range form {
		if k != "csrf" {
			bad[k] = v
		}
	}
	if r := c.post(tb, path, bad); r.status != http.StatusForbidden {
		tb.Errorf("POST %s without the token: %d, want 403", path, r.status)
	}
	bob := e.signedIn(tb, "bob")
	if r := bob.post(tb, path, form); r.status != http.StatusForbidden {
		tb.Errorf("POST %s by bob with alice's token: %d, want 403", path, r.status)
	}
	if r := e.client(tb).post(tb, path, form); r.status != http.StatusUnauthorized {
		tb.Errorf("POST %s signed out: %d, want 401", path, r.status)
	}
}

func TestRetryRefund(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		f := failedRefund(t, e, "RR-1")
		c := e.signedIn(t, "alice")
		path := "/console/refunds/" + f.OutRequestNo + "/retry"

		confirm := c.mustGet(t, path, http.StatusOK)
		mustContain(t, confirm.body, "Retry refund "+f.OutRequestNo, "20.00 CNY", "ACQ.SELLER_BALANCE_NOT_ENOUGH")
		// The order's story says how the refund ended.
		mustContain(t, c.mustGet(t, "/console/orders/RR-1", http.StatusOK).body, "<strong>Refund failed</strong>",
			"</code></a>: ACQ.SELLER_BALANCE_NOT_ENOUGH</div>")
		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, confirm.body)}}
		refused(t, e, c, path, form)
		if got := mustRefund(t, store, f.OutRequestNo); got.State != model.RefundFailed {
			t.Fatalf("refused posts changed the refund: %s", got.State)
		}

		postTwice(t, c, path, form, "/console/orders/RR-1")
		got := mustRefund(t, store, f.OutRequestNo)
		if got.State != model.RefundRefunding || got.Attempts != 0 || got.NextAttemptAt.After(time.Now()) {
			t.Fatalf("after retry: %s, %d attempts, next %v", got.State, got.Attempts, got.NextAttemptAt)
		}
		rows := actions(t, store, model.AuditRefundRetry)
		if len(rows) != 1 || rows[0].Operator != "alice" || rows[0].TargetID != f.OutRequestNo ||
			rows[0].Before != "REFUND_FAILED: ACQ.SELLER_BALANCE_NOT_ENOUGH" || rows[0].After != "REFUNDING" || rows[0].OrderID == nil {
			t.Fatalf("audit: %+v", rows)
		}
		// Retrying what is not failed is refused, and changes nothing.
		if r := c.mustGet(t, path, http.StatusConflict); !strings.Contains(r.body, "not an unresolved failure") {
			t.Errorf("confirm page of a refund in progress:\n%s", r.body)
		}
		if r := c.post(t, path, url.Values{"csrf": {c.csrf(t)}, "key": {strings.Repeat("b", 32)}}); r.status != http.StatusConflict {
			t.Fatalf("retry of a refund in progress: %d", r.status)
		}
		if n := len(actions(t, store, model.AuditRefundRetry)); n != 1 {
			t.Fatalf("%d retries audited", n)
		}
		mustContain(t, c.mustGet(t, "/console/orders/RR-1", http.StatusOK).body, "refund.retry by alice")
	})
}

func TestRetryAutoRefundMovesItsPayment(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		mustOrder(t, store, "RA-1", 1, "10.00")
		e.pay(t, "RA-1", "T-RA-1", "10.00")
		e.pay(t, "RA-1", "T-RA-2", "10.00") // paid twice: owed back
		if n, err := e.refunds.Enqueue(ctx); err != nil || n != 1 {
			t.Fatalf("enqueue: %d %v", n, err)
		}
		no := "RP-T-RA-2"
		if err := store.UpdateOrder(ctx, dao.OrderSN("RA-1"), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			if _, err := tx.FinishRefund(ctx, no, model.RefundFailed, "ACQ.TRADE_HAS_CLOSE"); err != nil {
				return err
			}
			_, err := tx.SetPaymentState(ctx, model.ProviderAlipay, "T-RA-2", model.PaymentRefunding, model.PaymentRefundFailed)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		c := e.signedIn(t, "alice")
		confirm := c.mustGet(t, "/console/refunds/"+no+"/retry", http.StatusOK)
		postTwice(t, c, "/console/refunds/"+no+"/retry", url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, confirm.body)}}, "/console/orders/RA-1")
		p, err := store.Payment(ctx, model.ProviderAlipay, "T-RA-2")
		if err != nil || p.State != model.PaymentRefunding {
			t.Fatalf("payment after retry: %s %v", p.State, err)
		}
	})
}

func TestResolveRefund(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		f := failedRefund(t, e, "RS-1")
		g := failedRefund(t, e, "RS-2")
		c := e.signedIn(t, "alice")
		queue := c.mustGet(t, "/console/queues/refunds", http.StatusOK)
		keys := keyField.FindAllStringSubmatch(queue.body, -1)
		if len(keys) != 2 || keys[0][1] == keys[1][1] {
			t.Fatalf("want one key per row's form, got %v", keys)
		}
		path := "/console/refunds/" + f.OutRequestNo + "/resolve"
		form := url.Values{"csrf": {c.csrf(t)}, "key": {keys[0][1]}, "note": {"paid back by bank transfer, ticket 4411"},
			"next": {"/console/queues/refunds?state=REFUND_FAILED&done=resolved"}}
		refused(t, e, c, path, form)
		noNote := url.Values{"csrf": form["csrf"], "key": form["key"]}
		if r := c.post(t, path, noNote); r.status != http.StatusBadRequest || !strings.Contains(r.body, "say why in the note") {
			t.Fatalf("resolve without a note: %d\n%s", r.status, r.body)
		}
		postTwice(t, c, path, form, "/console/queues/refunds?state=REFUND_FAILED&done=resolved")
		got := mustRefund(t, store, f.OutRequestNo)
		if got.State != model.RefundFailed || got.ResolvedBy != "alice" || got.ResolvedTime == nil || got.Resolution != "paid back by bank transfer, ticket 4411" {
			t.Fatalf("after resolve: %+v", got)
		}
		// The other row's form has its own key: resolving it is not "already".
		other := url.Values{"csrf": form["csrf"], "key": {keys[1][1]}, "note": {"buyer cancelled the return"}}
		if r := c.post(t, "/console/refunds/"+g.OutRequestNo+"/resolve", other); r.status != http.StatusSeeOther || strings.Contains(r.location, "already") {
			t.Fatalf("resolve the second row: %d %q", r.status, r.location)
		}
		queue = c.mustGet(t, "/console/queues/refunds?state=REFUND_FAILED", http.StatusOK)
		mustContain(t, queue.body, "0 refund(s) failed and not resolved")
		rows := actions(t, store, model.AuditRefundResolve)
		if len(rows) != 2 || rows[0].Note != "paid back by bank transfer, ticket 4411" || rows[0].After != "REFUND_FAILED (resolved)" {
			t.Fatalf("audit: %+v", rows)
		}
		mustContain(t, c.mustGet(t, "/console/orders/RS-1", http.StatusOK).body, "Refund resolved by alice")
	})
}

func TestRefundOrder(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		mustOrder(t, store, "RO-1", 1, "100.00")
		e.pay(t, "RO-1", "T-RO-1", "100.00")
		c := e.signedIn(t, "alice")
		path := "/console/orders/RO-1/refund"
		form := c.mustGet(t, path, http.StatusOK)
		mustContain(t, form.body, `name="amount" value="100.00"`)
		key := field(t, keyField, form.body)
		csrf := c.csrf(t)

		// Too much, or no reason: the form again, nothing recorded.
		for _, bad := range []url.Values{
			{"csrf": {csrf}, "key": {key}, "amount": {"100.01"}, "note": {"x"}},
			{"csrf": {csrf}, "key": {key}, "amount": {"-1"}, "note": {"x"}},
			{"csrf": {csrf}, "key": {key}, "amount": {"1.005"}, "note": {"x"}},
			{"csrf": {csrf}, "key": {key}, "amount": {"10.00"}, "note": {" "}},
			{"csrf": {csrf}, "key": {key}, "amount": {"1e1"}, "note": {"x"}},
			{"csrf": {csrf}, "key": {key}, "amount": {"0001.00"}, "note": {"x"}},
			// The note is the refund's reason, and its column holds 200.
			{"csrf": {csrf}, "key": {key}, "amount": {"10.00"}, "note": {strings.Repeat("n", 250)}},
			{"csrf": {csrf}, "key": {key}, "amount": {"10.00"}, "note": {strings.Repeat("n", 201)}, "confirm": {"yes"}},
		} {
			if r := c.post(t, path, bad); r.status != http.StatusUnprocessableEntity {
				t.Errorf("refund %v: %d, want 422", bad, r.status)
			}
		}
		// The first post only shows what will happen.
		review := url.Values{"csrf": {csrf}, "key": {key}, "amount": {"30"}, "note": {"returned one bag"}}
		r := c.post(t, path, review)
		if r.status != http.StatusOK {
			t.Fatalf("review: %d\n%s", r.status, r.body)
		}
		mustContain(t, r.body, "Refund 30.00 CNY of order RO-1", `name="confirm" value="yes"`, "returned one bag")
		refunds, _ := store.RefundsByOrder(t.Context(), mustGetOrder(t, store, "RO-1").ID)
		if len(refunds) != 0 {
			t.Fatalf("the review recorded a refund: %+v", refunds)
		}
		confirmed := url.Values{"csrf": {csrf}, "key": {field(t, keyField, r.body)}, "amount": {"30.00"}, "note": {"returned one bag"}, "confirm": {"yes"}}
		refused(t, e, c, path, confirmed)
		postTwice(t, c, path, confirmed, "/console/orders/RO-1")
		refunds, _ = store.RefundsByOrder(t.Context(), mustGetOrder(t, store, "RO-1").ID)
		if len(refunds) != 1 || !refunds[0].Amount.Equal(decimal.RequireFromString("30")) || refunds[0].Reason != "returned one bag" ||
			refunds[0].State != model.RefundRefunding {
			t.Fatalf("refunds: %+v", refunds)
		}
		rows := actions(t, store, model.AuditOrderRefund)
		if len(rows) != 1 || rows[0].Before != "100.00 left to refund of T-RO-1" || rows[0].After != "REFUNDING 30.00" || rows[0].TargetID != refunds[0].OutRequestNo {
			t.Fatalf("audit: %+v", rows)
		}
		// The admin API's cap holds: 70.00 left.
		over := url.Values{"csrf": {csrf}, "key": {strings.Repeat("c", 32)}, "amount": {"70.01"}, "note": {"x"}, "confirm": {"yes"}}
		if r := c.post(t, path, over); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("past the cap: %d", r.status)
		}
		rest := url.Values{"csrf": {csrf}, "key": {strings.Repeat("d", 32)}, "amount": {"70.00"}, "note": {"the rest"}, "confirm": {"yes"}}
		if r := c.post(t, path, rest); r.status != http.StatusSeeOther {
			t.Fatalf("the rest: %d\n%s", r.status, r.body)
		}
		mustContain(t, c.mustGet(t, "/console/orders/RO-1", http.StatusOK).body, "<dt>left to refund</dt><dd>0.00 CNY</dd>")
		c.mustGet(t, "/console/orders/NOPE/refund", http.StatusNotFound)
	})
}

// The same confirmed form posted twice at once (a double click on a slow
// page) refunds once.
func TestRefundOrderDoubleClick(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		mustOrder(t, store, "DC-1", 1, "10.00")
		e.pay(t, "DC-1", "T-DC-1", "10.00")
		c := e.signedIn(t, "alice")
		form := url.Values{"csrf": {c.csrf(t)}, "key": {strings.Repeat("e", 32)}, "amount": {"10.00"}, "note": {"x"}, "confirm": {"yes"}}
		var wg sync.WaitGroup
		statuses := make([]response, 8)
		for i := range statuses {
			wg.Go(func() { statuses[i] = c.post(t, "/console/orders/DC-1/refund", form) })
		}
		wg.Wait()
		done := 0
		for _, r := range statuses {
			switch {
			case r.status == http.StatusSeeOther && !strings.Contains(r.location, "already"):
				done++
			case r.status == http.StatusSeeOther, r.status == http.StatusConflict: // already, or a lock conflict to retry
			default:
				t.Errorf("double click: %d %s", r.status, r.body)
			}
		}
		refunds, _ := store.RefundsByOrder(t.Context(), mustGetOrder(t, store, "DC-1").ID)
		if done != 1 || len(refunds) != 1 || len(actions(t, store, model.AuditOrderRefund)) != 1 {
			t.Fatalf("%d posts did it, %d refunds, %d audited: want exactly one", done, len(refunds), len(actions(t, store, model.AuditOrderRefund)))
		}
	})
}

func TestRefundPaymentNow(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		mustOrder(t, store, "RP-1", 1, "10.00")
		e.pay(t, "RP-1", "T-RP-1", "10.00")
		e.pay(t, "RP-1", "T-RP-2", "10.00")
		c := e.signedIn(t, "alice")
		queue := c.mustGet(t, "/console/queues/payments", http.StatusOK)
		mustContain(t, queue.body, "1 payment(s) owed back", `href="/console/payments/T-RP-2/refund"`, "ALREADY_PAID", "Queue refund…")
		if strings.Contains(queue.body, "Refund now") {
			t.Errorf("the queue offers to refund now; the action only queues the refund:\n%s", queue.body)
		}
		path := "/console/payments/T-RP-2/refund"
		confirm := c.mustGet(t, path, http.StatusOK)
		mustContain(t, confirm.body, "Queue the refund of payment T-RP-2", "ALREADY_PAID", "the refund worker asks Alipay on its next round")
		if strings.Contains(confirm.body, " now rather than") {
			t.Errorf("the confirmation says the money goes back now; it is queued:\n%s", confirm.body)
		}
		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, confirm.body)}, "note": {"buyer paid twice"}}
		refused(t, e, c, path, form)
		postTwice(t, c, path, form, "/console/payments/T-RP-2")
		p, err := store.Payment(t.Context(), model.ProviderAlipay, "T-RP-2")
		if err != nil || p.State != model.PaymentRefunding {
			t.Fatalf("payment: %s %v", p.State, err)
		}
		f := mustRefund(t, store, "RP-T-RP-2")
		if f.Kind != model.RefundAuto || !f.Amount.Equal(decimal.RequireFromString("10")) {
			t.Fatalf("refund: %+v", f)
		}
		// The worker finds nothing left to enqueue.
		if n, err := e.refunds.Enqueue(t.Context()); err != nil || n != 0 {
			t.Fatalf("worker enqueued %d after the operator (%v)", n, err)
		}
		rows := actions(t, store, model.AuditPaymentRefund)
		if len(rows) != 1 || rows[0].TargetID != "T-RP-2" || rows[0].Note != "buyer paid twice" {
			t.Fatalf("audit: %+v", rows)
		}
		// No longer owed back: the 409 links back to the payment.
		if r := c.mustGet(t, path, http.StatusConflict); !strings.Contains(r.body, `href="/console/payments/T-RP-2"`) {
			t.Errorf("the 409 does not link to the payment:\n%s", r.body)
		}
		c.mustGet(t, "/console/payments/T-RP-1/refund", http.StatusConflict)
	})
}

// An operator's "refund now" and the worker's round race for one payment:
// either may win, and the payment is refunded once.
func TestRefundPaymentRacesWorker(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		seen := map[string]bool{}
		opWins := 0
		for i := 0; i < 200 && len(seen) < 2; i++ {
			sn := "RW-" + decimal.NewFromInt(int64(i)).String()
			mustOrder(t, store, sn, 1, "5.00")
			e.pay(t, sn, "T1-"+sn, "5.00")
			e.pay(t, sn, "T2-"+sn, "5.00")
			var wg sync.WaitGroup
			var opErr error
			key := strings.Repeat("f", 20) + sn
			wg.Go(func() {
				_, opErr = e.refunds.RefundPayment(ctx, model.Act{Operator: "alice", Key: key}, model.ProviderAlipay, "T2-"+sn)
			})
			wg.Go(func() { _, _ = e.refunds.Enqueue(ctx) })
			wg.Wait()
			f := mustRefund(t, store, "RP-T2-"+sn)
			audited := len(actions(t, store, model.AuditPaymentRefund))
			switch {
			case opErr == nil:
				seen["operator"] = true
				opWins++
			case strings.Contains(opErr.Error(), model.ErrNotActionable.Error()) || strings.Contains(opErr.Error(), model.ErrRetryable.Error()):
				seen["worker"] = true
			default:
				t.Fatalf("operator: %v", opErr)
			}
			if f.State != model.RefundRefunding || f.Kind != model.RefundAuto {
				t.Fatalf("refund of %s: %+v", sn, f)
			}
			if audited != opWins {
				t.Fatalf("%d operator refunds audited, %d done by the operator", audited, opWins)
			}
		}
		if !seen["operator"] || !seen["worker"] {
			t.Fatalf("outcomes seen: %v; want both the operator and the worker winning at least once", seen)
		}
	})
}

func TestRequeueEvent(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		mustOrder(t, store, "RQ-1", 1, "10.00")
		e.pay(t, "RQ-1", "T-RQ-1", "10.00")
		var claimed []model.OutboxRow
		if err := store.UpdateOutbox(ctx, func(ctx context.Context, tx *dao.OutboxTx) error {
			var err error
			if claimed, err = tx.ClaimEvents(ctx, time.Now(), time.Minute, 10); err != nil || len(claimed) != 1 {
				return fmt.Errorf("claimed %v: %v", claimed, err)
			}
			return tx.MarkFailed(ctx, claimed[0].Seq, 10, time.Now().Add(time.Hour), 10, "nats: timeout")
		}); err != nil {
			t.Fatal(err)
		}
		seq := claimed[0].Seq
		c := e.signedIn(t, "alice")
		queue := c.mustGet(t, "/console/queues/outbox?state=FAILED", http.StatusOK)
		path := "/console/outbox/" + decimal.NewFromInt(seq).String() + "/requeue"
		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, queue.body)}, "next": {"/console/queues/outbox?state=FAILED"}}
		refused(t, e, c, path, form)
		postTwice(t, c, path, form, "/console/queues/outbox?state=FAILED")
		row, err := store.OutboxRow(ctx, seq)
		if err != nil || row.State != model.OutboxPending || row.Attempts != 0 || row.NextAttemptAt.After(time.Now()) {
			t.Fatalf("after requeue: %+v %v", row, err)
		}
		rows := actions(t, store, model.AuditOutboxRequeue)
		if len(rows) != 1 || rows[0].Before != "FAILED after 10 attempts: nats: timeout" || rows[0].After != "PENDING" {
			t.Fatalf("audit: %+v", rows)
		}
		if r := c.post(t, path, url.Values{"csrf": form["csrf"], "key": {strings.Repeat("a", 32)}}); r.status != http.StatusConflict {
			t.Fatalf("requeue a pending row: %d", r.status)
		}
		if r := c.post(t, "/console/outbox/999999/requeue", url.Values{"csrf": form["csrf"], "key": {strings.Repeat("a", 32)}}); r.status != http.StatusNotFound {
			t.Fatalf("requeue a missing row: %d", r.status)
		}
	})
}

// TestRefundOrderAmountRule: the form takes the admin API's one amount
// rule as typed — " 10" is not trimmed into 10.00, "0001.00" is not read
// as 1.00 — reviewed or confirmed, and nothing is refunded; the browser is
// given the same rule as the input's pattern.
func TestRefundOrderAmountRule(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		mustOrder(t, store, "RA-1", 1, "100.00")
		e.pay(t, "RA-1", "T-RA-1", "100.00")
		c := e.signedIn(t, "alice")
		path := "/console/orders/RA-1/refund"
		form := c.mustGet(t, path, http.StatusOK)
		mustContain(t, form.body, `pattern="`+html.EscapeString(model.AmountPattern)+`"`)
		csrf := c.csrf(t)
		for i, amount := range []string{" 10", "10 ", "0001.00", "\t10.00"} {
			for _, confirm := range []string{"", "yes"} {
				r := c.post(t, path, url.Values{"csrf": {csrf}, "key": {strings.Repeat(string(rune('a'+i)), 32)}, "amount": {amount},
					"note": {"returned"}, "confirm": {confirm}})
				if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "no spaces or leading zeros") {
					t.Errorf("amount %q, confirm %q: %d, want 422 naming the rule\n%s", amount, confirm, r.status, r.body)
				}
			}
		}
		if refunds, _ := store.RefundsByOrder(t.Context(), mustGetOrder(t, store, "RA-1").ID); len(refunds) != 0 {
			t.Fatalf("refunded: %+v", refunds)
		}
		if rows := actions(t, store, model.AuditOrderRefund); len(rows) != 0 {
			t.Fatalf("audited: %+v", rows)
		}
	})
}

// TestResolveNoteLimit: one note limit, model.MaxNote characters, refused
// at the edge with a message naming it (nothing changed), and a note at
// the limit — Chinese, so three times as many bytes — kept whole on the
// refund and in admin_audit alike.
func TestResolveNoteLimit(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		f := failedRefund(t, e, "RN-1")
		c := e.signedIn(t, "alice")
		queue := c.mustGet(t, "/console/queues/refunds", http.StatusOK)
		path := "/console/refunds/" + f.OutRequestNo + "/resolve"
		long := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, queue.body)}, "note": {strings.Repeat("n", model.MaxNote+1)}}
		if r := c.post(t, path, long); r.status != http.StatusBadRequest || !strings.Contains(r.body, fmt.Sprintf("at most %d", model.MaxNote)) {
			t.Fatalf("a note of %d: %d, want 400 naming the limit\n%s", model.MaxNote+1, r.status, r.body)
		}
		if got := mustRefund(t, store, f.OutRequestNo); got.ResolvedTime != nil {
			t.Fatalf("resolved by a refused note: %+v", got)
		}
		if rows := actions(t, store, model.AuditRefundResolve); len(rows) != 0 {
			t.Fatalf("audited a refused note: %+v", rows)
		}
		whole := strings.Repeat("退", model.MaxNote)
		ok := url.Values{"csrf": long["csrf"], "key": long["key"], "note": {whole}}
		if r := c.post(t, path, ok); r.status != http.StatusSeeOther {
			t.Fatalf("a note of %d characters (%d bytes): %d\n%s", model.MaxNote, len(whole), r.status, r.body)
		}
		rows := actions(t, store, model.AuditRefundResolve)
		if got := mustRefund(t, store, f.OutRequestNo); got.Resolution != whole || len(rows) != 1 || rows[0].Note != whole {
			t.Fatalf("the note is not kept whole in both places: resolution %d bytes, audit %+v", len(got.Resolution), len(rows))
		}
	})
}
