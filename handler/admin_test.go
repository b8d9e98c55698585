package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// get sends a GET to path with the Authorization header auth (left out if
// empty).
func (c *cashier) get(t *testing.T, path, auth string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// mustGetJSON GETs path as the admin, wants 200, and decodes the answer
// into v.
func (c *cashier) mustGetJSON(t *testing.T, path string, v any) {
	t.Helper()
	status, body := c.get(t, path, "Bearer "+payAdminToken)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s, want 200", path, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decode %s: %v", path, body, err)
	}
}

// mustObserve applies a paying notification of amount to order sn, as
// Alipay's notification or the active query would.
func mustObserve(t *testing.T, store *dao.Store, sn, tradeNo, amount string) model.Outcome {
	t.Helper()
	_, outcome, err := service.NewPayments(store).Observe(t.Context(), model.Observation{
		Provider: model.ProviderAlipay, OutTradeNo: sn, TradeNo: tradeNo, Amount: decimal.RequireFromString(amount),
	})
	if err != nil {
		t.Fatalf("observe %s on %s: %v", tradeNo, sn, err)
	}
	return outcome
}

// Every admin route wants the ADMIN_TOKEN as a bearer token: anything
// else is 401 unauthorized and changes nothing.
func TestAdminAuth(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	c := newCashier(t, store)
	mustOrder(t, store, "ADMIN-AUTH", "10.00")
	mustObserve(t, store, "ADMIN-AUTH", "T-ADMIN-AUTH", "10.00")
	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/admin/outbox", ""},
		{http.MethodGet, "/admin/outbox?state=failed&limit=5", ""},
		{http.MethodGet, "/admin/journal/totals", ""},
		{http.MethodGet, refundsPath("ADMIN-AUTH"), ""},
		{http.MethodPost, refundsPath("ADMIN-AUTH"), `{"amount":"1.00"}`},
	}
	auths := []struct{ name, header string }{
		{"None", ""},
		{"WrongToken", "Bearer not-the-admin-token"},
		{"TokenWithSuffix", "Bearer " + payAdminToken + "x"},
		{"TokenPrefix", "Bearer " + payAdminToken[:len(payAdminToken)-1]},
		{"LowercaseScheme", "bearer " + payAdminToken},
		{"Basic", "Basic " + payAdminToken},
		{"BareToken", payAdminToken},
		{"MemberToken", memberAuth(t, owner)},
	}
	for _, r := range routes {
		for _, a := range auths {
			t.Run(r.method+strings.ReplaceAll(r.path, "/", "_")+"/"+a.name, func(t *testing.T) {
				before := snapshot(t, store)
				var status int
				var body []byte
				if r.method == http.MethodPost {
					status, _, body = c.post(t, r.path, a.header, "auth-key", r.body)
				} else {
					status, body = c.get(t, r.path, a.header)
				}
				if status != http.StatusUnauthorized || codeOf(t, body) != "unauthorized" {
					t.Fatalf("%d %s, want 401 unauthorized", status, body)
				}
				if after := snapshot(t, store); after != before {
					t.Fatalf("a refused request changed rows:\nbefore:\n%s\nafter:\n%s", before, after)
				}
			})
		}
	}
}

// outboxPage is the answer of GET /admin/outbox.
type outboxPage struct {
	State  model.OutboxState `json:"state"`
	Count  int64             `json:"count"`
	Events []struct {
		Seq       int64             `json:"seq"`
		Event     model.Event       `json:"event"`
		Attempts  int               `json:"attempts"`
		LastError string            `json:"last_error"`
		State     model.OutboxState `json:"state"`
	} `json:"events"`
}

// types lists the event types of a page, in its order.
func (p outboxPage) types() []model.EventType {
	out := []model.EventType{}
	for _, e := range p.Events {
		out = append(out, e.Event.Type)
	}
	return out
}

// brokerRefusing is a broker that acknowledges every event but those of
// one type: the seam the relay publishes through (NATS, not ours).
type brokerRefusing model.EventType

func (b brokerRefusing) Publish(_ context.Context, events []model.Event) []error {
	errs := make([]error, len(events))
	for i, ev := range events {
		if ev.Type == model.EventType(b) {
			errs[i] = errBrokerRefused
		}
	}
	return errs
}

type brokerError string

func (e brokerError) Error() string { return string(e) }

const errBrokerRefused = brokerError("stream unavailable")

// GET /admin/outbox lists the events in one state (pending by default,
// case-insensitive), oldest first, up to limit, with the count of all of
// them; a bad state or limit is 400.
func TestAdminOutbox(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)

		var empty outboxPage
		c.mustGetJSON(t, "/admin/outbox", &empty)
		if empty.State != model.OutboxPending || empty.Count != 0 || empty.Events == nil || len(empty.Events) != 0 {
			t.Fatalf("empty outbox: %+v, want PENDING, count 0, events []", empty)
		}

		// Two orders paid (order.paid each) and an underpayment
		// (payment.refund_pending).
		for _, sn := range []string{"OUTBOX-1", "OUTBOX-2"} {
			mustOrder(t, store, sn, "10.00")
			if got := mustObserve(t, store, sn, "T-"+sn, "10.00"); got != model.OutcomeApplied {
				t.Fatalf("pay %s: %s", sn, got)
			}
		}
		mustOrder(t, store, "OUTBOX-3", "10.00")
		if got := mustObserve(t, store, "OUTBOX-3", "T-OUTBOX-3", "0.01"); got != model.OutcomeRefundPending {
			t.Fatalf("underpay OUTBOX-3: %s", got)
		}

		var pending outboxPage
		c.mustGetJSON(t, "/admin/outbox?state=pending", &pending)
		want := []model.EventType{model.EventOrderPaid, model.EventOrderPaid, model.EventRefundPending}
		if diff := cmp.Diff(want, pending.types()); diff != "" || pending.Count != 3 || pending.State != model.OutboxPending {
			t.Fatalf("pending outbox (count %d, state %s), types -want +got:\n%s", pending.Count, pending.State, diff)
		}
		for i := 1; i < len(pending.Events); i++ {
			if pending.Events[i].Seq <= pending.Events[i-1].Seq {
				t.Fatalf("pending events not oldest first: seq %d after %d", pending.Events[i].Seq, pending.Events[i-1].Seq)
			}
		}

		var first outboxPage
		c.mustGetJSON(t, "/admin/outbox?limit=1", &first)
		if len(first.Events) != 1 || first.Count != 3 || first.Events[0].Seq != pending.Events[0].Seq {
			t.Fatalf("limit=1: %d events of count %d, want the oldest of 3", len(first.Events), first.Count)
		}

		// The relay publishes: the broker takes the payments and refuses the
		// refund event, which fails at once (FailAfter 1).
		relay := service.NewRelay(store, brokerRefusing(model.EventRefundPending), slog.New(slog.NewTextHandler(io.Discard, nil)))
		relay.FailAfter = 1
		if _, err := relay.RunOnce(t.Context()); err != nil {
			t.Fatalf("relay: %v", err)
		}

		for _, tc := range []struct {
			query string
			state model.OutboxState
			want  []model.EventType
		}{
			{"", model.OutboxPending, []model.EventType{}},
			{"?state=sent", model.OutboxSent, []model.EventType{model.EventOrderPaid, model.EventOrderPaid}},
			{"?state=SENT&limit=1000", model.OutboxSent, []model.EventType{model.EventOrderPaid, model.EventOrderPaid}},
			{"?state=Failed", model.OutboxFailed, []model.EventType{model.EventRefundPending}},
		} {
			t.Run("After relay"+tc.query, func(t *testing.T) {
				var p outboxPage
				c.mustGetJSON(t, "/admin/outbox"+tc.query, &p)
				if diff := cmp.Diff(tc.want, p.types()); diff != "" || p.State != tc.state || p.Count != int64(len(tc.want)) {
					t.Fatalf("state %s count %d, want %s %d; types -want +got:\n%s", p.State, p.Count, tc.state, len(tc.want), diff)
				}
				for _, e := range p.Events {
					if e.State != tc.state {
						t.Fatalf("event %d is %s in the %s list", e.Seq, e.State, tc.state)
					}
					if tc.state == model.OutboxFailed && (e.Attempts != 1 || !strings.Contains(e.LastError, string(errBrokerRefused))) {
						t.Fatalf("failed event: attempts %d, last_error %q; want 1 and the broker's error", e.Attempts, e.LastError)
					}
				}
			})
		}

		for _, query := range []string{"?state=bogus", "?state=", "?limit=0", "?limit=1001", "?limit=ten", "?limit=-1"} {
			t.Run("Refused"+query, func(t *testing.T) {
				status, body := c.get(t, "/admin/outbox"+query, "Bearer "+payAdminToken)
				if status != http.StatusBadRequest || codeOf(t, body) != "invalid_request" {
					t.Fatalf("%d %s, want 400 invalid_request", status, body)
				}
			})
		}
	})
}

// journalTotals is the answer of GET /admin/journal/totals.
type journalTotals struct {
	Accounts []struct {
		Account string `json:"account"`
		Debit   string `json:"debit"`
		Credit  string `json:"credit"`
	} `json:"accounts"`
	Debit    string `json:"debit"`
	Credit   string `json:"credit"`
	Balanced bool   `json:"balanced"`
}

// GET /admin/journal/totals sums what the accounting consumer booked, per
// account and in all, and says whether it balances.
func TestAdminJournalTotals(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)

		var empty journalTotals
		c.mustGetJSON(t, "/admin/journal/totals", &empty)
		if empty.Accounts == nil || len(empty.Accounts) != 0 || empty.Debit != "0.00" || empty.Credit != "0.00" || !empty.Balanced {
			t.Fatalf("empty journal: %+v, want no accounts, 0.00 = 0.00, balanced", empty)
		}

		mustOrder(t, store, "JOURNAL-1", "10.00")
		mustObserve(t, store, "JOURNAL-1", "T-JOURNAL-1", "10.00")
		mustOrder(t, store, "JOURNAL-2", "25.50")
		mustObserve(t, store, "JOURNAL-2", "T-JOURNAL-2", "25.50")
		mustObserve(t, store, "JOURNAL-2", "T-JOURNAL-2-AGAIN", "25.50") // a second trade: REFUND_PENDING
		rows, err := store.OutboxRows(t.Context(), model.OutboxPending, 100)
		if err != nil {
			t.Fatal(err)
		}
		books := service.NewAccounting(store)
		for _, r := range rows {
			// Twice, as a redelivery would: booked once.
			for range 2 {
				if err := books.Book(t.Context(), r.Event); err != nil {
					t.Fatalf("book %s: %v", r.Event.Type, err)
				}
			}
		}

		var got journalTotals
		c.mustGetJSON(t, "/admin/journal/totals", &got)
		byAccount := map[string][2]string{}
		for _, a := range got.Accounts {
			byAccount[a.Account] = [2]string{a.Debit, a.Credit}
		}
		want := map[string][2]string{
			model.AccountAlipayClearing: {"61.00", "0.00"},
			model.AccountSales:          {"0.00", "35.50"},
			model.AccountRefundsPayable: {"0.00", "25.50"},
		}
		if diff := cmp.Diff(want, byAccount); diff != "" || got.Debit != "61.00" || got.Credit != "61.00" || !got.Balanced {
			t.Fatalf("totals %s = %s balanced %v, want 61.00 = 61.00 balanced; accounts [debit credit] -want +got:\n%s",
				got.Debit, got.Credit, got.Balanced, diff)
		}
	})
}

// refundList is the answer of GET /admin/orders/{sn}/refunds.
type refundList struct {
	OrderSN string `json:"order_sn"`
	Refunds []struct {
		OutRequestNo string `json:"out_request_no"`
		Kind         string `json:"kind"`
		TradeNo      string `json:"trade_no"`
		Amount       string `json:"amount"`
		State        string `json:"state"`
	} `json:"refunds"`
}

// mustAudited checks that admin_audit records action on (kind, id) want
// times, by model.OperatorAdminAPI, and that no row holds the admin token,
// and returns the rows.
func mustAudited(t *testing.T, store *dao.Store, action model.AuditAction, kind, id string, want int) []model.Audit {
	t.Helper()
	rows, err := store.AuditByTarget(t.Context(), kind, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []model.Audit
	for _, a := range rows {
		if strings.Contains(fmt.Sprintf("%+v", a), payAdminToken) {
			t.Errorf("the admin token is in admin_audit: %+v", a)
		}
		if a.Action == action {
			if a.Operator != model.OperatorAdminAPI {
				t.Errorf("%s on %s %s by %q, want %q", action, kind, id, a.Operator, model.OperatorAdminAPI)
			}
			got = append(got, a)
		}
	}
	if len(got) != want {
		t.Fatalf("%s on %s %s recorded %d times, want %d: %+v", action, kind, id, len(got), want, rows)
	}
	return got
}

// GET /admin/orders/{sn}/refunds lists what POST accepted — once per key,
// however often it is sent — and knows no unknown order.
func TestAdminRefundsList(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)
		admin := "Bearer " + payAdminToken
		sn := "LIST-1"
		mustOrder(t, store, sn, "50.00")
		c.mustPay(t, sn, "qr", "k-pay")
		if err := c.fake.Pay(t.Context(), sn); err != nil {
			t.Fatal(err)
		}

		var none refundList
		c.mustGetJSON(t, refundsPath(sn), &none)
		if none.OrderSN != sn || none.Refunds == nil || len(none.Refunds) != 0 {
			t.Fatalf("before any refund: %+v, want %s with refunds []", none, sn)
		}

		var answers [][]byte
		for range 3 {
			status, _, body := c.post(t, refundsPath(sn), admin, "rma-1", `{"amount":"20.00","reason":"returned"}`)
			if status != http.StatusAccepted {
				t.Fatalf("POST: %d %s, want 202", status, body)
			}
			answers = append(answers, body)
		}
		for _, a := range answers[1:] {
			if string(a) != string(answers[0]) {
				t.Fatalf("replayed key answered\n%s\nfirst answer\n%s", a, answers[0])
			}
		}
		// What the OpenAPI pattern refuses, the one parser refuses, and a
		// body that says a member twice is no request: nothing is refunded.
		for i, bad := range []string{
			`{"amount":"1e1"}`, `{"amount":"+1.00"}`, `{"amount":"0001.00"}`, `{"amount":"1e-2"}`, `{"amount":" 1.00"}`,
			`{"amount":"1.001"}`, `{"amount":"-1.00"}`, `{"amount":"0x10"}`,
			`{"amount":"0.01","amount":"30.00"}`, `{"amount":"30.00","Amount":"0.01"}`,
			`{"amount":"1.00","reason":"` + strings.Repeat("退", model.MaxRefundReason+1) + `"}`,
		} {
			status, _, body := c.post(t, refundsPath(sn), admin, fmt.Sprintf("rma-bad-%d", i), bad)
			if status != http.StatusBadRequest || codeOf(t, body) != "invalid_request" {
				t.Errorf("%s: %d %s, want 400 invalid_request", bad, status, body)
			}
		}
		status, _, body := c.post(t, refundsPath(sn), admin, "rma-r", `{"amount":"0.50","reason":"`+strings.Repeat("退", model.MaxRefundReason)+`"}`)
		if status != http.StatusAccepted {
			t.Fatalf("a reason as long as the column: %d %s", status, body)
		}
		status, _, body = c.post(t, refundsPath(sn), admin, "rma-2", `{"amount":"29.50"}`)
		if status != http.StatusAccepted {
			t.Fatalf("second refund: %d %s, want 202", status, body)
		}
		status, _, body = c.post(t, refundsPath(sn), admin, "rma-3", `{"amount":"0.01"}`)
		if status != http.StatusUnprocessableEntity || codeOf(t, body) != "refund_too_large" {
			t.Fatalf("past the paid amount: %d %s, want 422 refund_too_large", status, body)
		}

		var list refundList
		c.mustGetJSON(t, refundsPath(sn), &list)
		var got []string
		for _, f := range list.Refunds {
			if f.Kind != string(model.RefundAfterSale) || f.State != string(model.RefundRefunding) || f.TradeNo == "" || f.OutRequestNo == "" {
				t.Fatalf("refund %+v, want an AFTER_SALE refund in progress of Alipay's trade", f)
			}
			got = append(got, f.Amount)
		}
		if diff := cmp.Diff([]string{"20.00", "0.50", "29.50"}, got); diff != "" || list.OrderSN != sn {
			t.Fatalf("refunds of %s, amounts -want +got:\n%s", list.OrderSN, diff)
		}
		// Each refund in admin_audit once, however often its key was sent;
		// the one refused, nowhere.
		for i, f := range list.Refunds {
			a := mustAudited(t, store, model.AuditOrderRefund, model.TargetRefund, f.OutRequestNo, 1)
			if a[0].OrderID == nil || i == 0 && a[0].Note != "returned" {
				t.Errorf("refund %s audited as %+v, want its order and the reason as the note", f.OutRequestNo, a[0])
			}
		}
		if all, err := store.AuditPage(t.Context(), model.OperatorAdminAPI, 0, 10, true); err != nil || len(all) != 3 {
			t.Fatalf("admin-api actions %+v %v, want the three refunds", all, err)
		}

		for _, tc := range []struct{ name, method string }{{"GetUnknownOrder", http.MethodGet}, {"PostUnknownOrder", http.MethodPost}} {
			t.Run(tc.name, func(t *testing.T) {
				var status int
				var body []byte
				if tc.method == http.MethodGet {
					status, body = c.get(t, refundsPath("LIST-NOPE"), admin)
				} else {
					status, _, body = c.post(t, refundsPath("LIST-NOPE"), admin, "rma-x", `{"amount":"1.00"}`)
				}
				if status != http.StatusNotFound || codeOf(t, body) != "order_not_found" {
					t.Fatalf("%d %s, want 404 order_not_found", status, body)
				}
			})
		}
	})
}
