package handler_test

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// request is one POST to the notify endpoint.
type request struct {
	query string // the URL's query string, without "?"
	body  string // the form body, URL-encoded
}

// payWant is what one recorded payment must hold.
type payWant struct {
	tradeNo string
	amount  string
	state   model.PaymentState
	reason  model.RefundReason
}

// Every case gets its own order (order_sn "N-<case>", 100.00) in a store
// shared by the cases of one driver, and checks the answer, the order and
// its payments afterwards. A refused notification changes no row at all.
func TestNotify(t *testing.T) {
	// paid is the case's order paid in full by trade "T-<order_sn>", with
	// kv set on the form before it is signed.
	paid := func(kv ...string) func(*testing.T, *server, string) request {
		return func(t *testing.T, s *server, sn string) request {
			return request{body: s.signedBody(t, with(paidForm(sn, "T-"+sn, "100.00"), kv...))}
		}
	}
	// before answers one notification successfully before the case's own.
	before := func(form func(sn string) url.Values) func(*testing.T, *server, string) {
		return func(t *testing.T, s *server, sn string) {
			s.mustNotify(t, s.signedBody(t, form(sn)), "success")
		}
	}
	paidInFull := func(sn string) url.Values { return paidForm(sn, "T-"+sn, "100.00") }

	cases := []struct {
		name string
		// sn is the order's order_sn; empty means "N-"+name.
		sn string
		// noOrder: create no order for the case.
		noOrder bool
		setup   func(t *testing.T, s *server, sn string)
		req     func(t *testing.T, s *server, sn string) request
		// want is the answer: "success" or "failure".
		want string
		// code is the answer's status; 0 is 200.
		code int
		// outcome is the one paynotify_notifications_total label the
		// request must count: it tells one "failure" from another.
		outcome string
		// unchanged: the request must leave every row as it found it.
		unchanged  bool
		wantStatus model.OrderStatus
		// wantPayments are the order's payments afterwards, oldest first;
		// nil means none, or with wantPaid one APPLIED payment by "T-<sn>".
		wantPayments []payWant
		// wantPaid: the order is paid by Alipay at paidForm's gmt_payment.
		wantPaid bool
		// check asserts anything else the case is about.
		check func(t *testing.T, s *server, sn string)
	}{
		// The decision table, end to end.
		{name: "FirstNoticeApplies", outcome: "applied", req: paid(), want: "success",
			wantStatus: model.OrderPaid, wantPaid: true},
		{name: "DuplicateChangesNothing", outcome: "duplicate", setup: before(paidInFull), req: paid(), want: "success",
			unchanged: true, wantStatus: model.OrderPaid, wantPaid: true},
		{name: "TradeFinishedAfterSuccessChangesNothing", outcome: "duplicate", setup: before(paidInFull),
			req: paid("trade_status", "TRADE_FINISHED", "notify_id", "2026120100222140005099999999999999",
				"notify_time", "2026-12-01 14:00:06", "gmt_close", "2026-12-01 14:00:05"),
			want: "success", unchanged: true, wantStatus: model.OrderPaid, wantPaid: true},
		{name: "UnderpaymentIsRefundPending", outcome: "refund_pending",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidForm(sn, "T-"+sn, "0.01"))}
			},
			want: "success", wantStatus: model.OrderAwaitingPayment,
			wantPayments: []payWant{{amount: "0.01", state: model.PaymentRefundPending, reason: model.RefundAmountMismatch}}},
		{name: "ClosedOrderIsRefundPending", outcome: "refund_pending",
			setup: func(t *testing.T, s *server, sn string) { closeOrder(t, s.store, sn) },
			req:   paid(), want: "success", wantStatus: model.OrderClosed,
			wantPayments: []payWant{{amount: "100.00", state: model.PaymentRefundPending, reason: model.RefundOrderClosed}}},
		{name: "SecondTradeForPaidOrderIsRefundPending", outcome: "refund_pending",
			// "A-…" sorts before "T-…": the ledger breaks create_time ties by trade_no.
			setup: before(func(sn string) url.Values { return paidForm(sn, "A-"+sn, "100.00") }),
			req:   paid(), want: "success", wantStatus: model.OrderPaid,
			wantPayments: []payWant{
				{tradeNo: "A-N-SecondTradeForPaidOrderIsRefundPending", amount: "100.00", state: model.PaymentApplied},
				{amount: "100.00", state: model.PaymentRefundPending, reason: model.RefundAlreadyPaid},
			}},
		{name: "TradeBoundToAnotherOrderIsRefused", outcome: "trade_conflict",
			setup: func(t *testing.T, s *server, sn string) {
				mustOrder(t, s.store, sn+"-other", "100.00")
				s.mustNotify(t, s.signedBody(t, paidForm(sn+"-other", "T-"+sn, "100.00")), "success")
			},
			req: paid(), want: "failure", unchanged: true, wantStatus: model.OrderAwaitingPayment},
		{name: "WaitBuyerPayIsIgnored", outcome: "ignored", req: paid("trade_status", "WAIT_BUYER_PAY", "gmt_payment", ""),
			want: "success", unchanged: true},
		{name: "TradeClosedIsIgnored", outcome: "ignored", req: paid("trade_status", "TRADE_CLOSED", "gmt_close", "2026-11-30 14:30:00"),
			want: "success", unchanged: true},

		// Not signed by Alipay for us.
		{name: "AmountTamperedAfterSigning", outcome: "bad_signature",
			req: func(t *testing.T, s *server, sn string) request {
				form := s.sign(t, paidForm(sn, "T-"+sn, "0.01"))
				form.Set("total_amount", "100.00")
				return request{body: form.Encode()}
			},
			want: "failure", unchanged: true},
		{name: "SignTypeRSA", outcome: "bad_signature",
			req: func(t *testing.T, s *server, sn string) request {
				form := s.sign(t, paidInFull(sn))
				form.Set("sign_type", "RSA")
				return request{body: form.Encode()}
			},
			want: "failure", unchanged: true},
		{name: "SignMissing", outcome: "bad_signature",
			req: func(t *testing.T, s *server, sn string) request {
				form := s.sign(t, paidInFull(sn))
				form.Del("sign")
				return request{body: form.Encode()}
			},
			want: "failure", unchanged: true},
		{name: "WrongAppID", outcome: "wrong_merchant", req: paid("app_id", "2021000000000002", "auth_app_id", "2021000000000002"),
			want: "failure", unchanged: true},
		{name: "WrongSellerID", outcome: "wrong_merchant", req: paid("seller_id", "2088000000000002"), want: "failure", unchanged: true},

		// Signed, but malformed.
		{name: "AmountZero", outcome: "invalid", req: paid("total_amount", "0"), want: "failure", unchanged: true},
		{name: "AmountNegative", outcome: "invalid", req: paid("total_amount", "-1"), want: "failure", unchanged: true},
		{name: "AmountThreeDecimals", outcome: "invalid", req: paid("total_amount", "1.001"), want: "failure", unchanged: true},
		{name: "AmountNotANumber", outcome: "invalid", req: paid("total_amount", "abc"), want: "failure", unchanged: true},
		{name: "AmountExponent", outcome: "invalid", req: paid("total_amount", "1e3"), want: "failure", unchanged: true},
		{name: "TradeNoEmpty", outcome: "invalid", req: paid("trade_no", ""), want: "failure", unchanged: true},
		{name: "TradeNo129Chars", outcome: "invalid", req: paid("trade_no", strings.Repeat("2", 129)), want: "failure", unchanged: true},
		{name: "OutTradeNoWithSpace", outcome: "invalid", sn: "N-With Space",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidForm(sn, "T-N-WithSpace", "100.00"))}
			},
			want: "failure", unchanged: true},
		// Money taken for no order of ours: recorded UNMATCHED (no order),
		// answered success so Alipay stops, refunded when an operator says.
		{name: "UnknownOrder", outcome: "unmatched", noOrder: true, req: paid(), want: "success"},

		// Only the signed form body counts.
		{name: "QueryStringDoesNotCount", outcome: "applied",
			setup: func(t *testing.T, s *server, sn string) { mustOrder(t, s.store, sn+"-B", "0.01") },
			req: func(t *testing.T, s *server, sn string) request {
				return request{
					query: url.Values{"total_amount": {"0.01"}, "out_trade_no": {sn + "-B"}}.Encode(),
					body:  s.signedBody(t, paidInFull(sn)),
				}
			},
			want: "success", wantStatus: model.OrderPaid, wantPaid: true,
			check: func(t *testing.T, s *server, sn string) {
				b := mustGetOrder(t, s.store, sn+"-B")
				if ps := mustPayments(t, s.store, b.ID); b.Status != model.OrderAwaitingPayment || len(ps) != 0 {
					t.Errorf("order named only by the query string: status %d, payments %+v", b.Status, ps)
				}
			}},
		{name: "SignatureOnlyInQueryString", outcome: "bad_signature",
			req: func(t *testing.T, s *server, sn string) request {
				return request{query: s.signedBody(t, paidInFull(sn)), body: paidInFull(sn).Encode()}
			},
			want: "failure", unchanged: true},
		{name: "EverythingInQueryString", outcome: "bad_signature",
			req: func(t *testing.T, s *server, sn string) request {
				return request{query: s.signedBody(t, paidInFull(sn))}
			},
			want: "failure", unchanged: true},
		// As ParseForm refused it, though the query string counts for nothing.
		{name: "QueryStringMalformed", outcome: "bad_form",
			req: func(t *testing.T, s *server, sn string) request {
				return request{query: "%zz", body: s.signedBody(t, paidInFull(sn))}
			},
			want: "failure", unchanged: true},
		{name: "BodyOver64KiB", outcome: "bad_form", req: paid("body", strings.Repeat("x", 64<<10)), want: "failure", code: http.StatusRequestEntityTooLarge, unchanged: true},
		{name: "NotAForm", outcome: "bad_form",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidInFull(sn)) + "&%zz"}
			},
			want: "failure", unchanged: true},

		// Alipay's signing rule.
		{name: "RepeatedKey", outcome: "bad_signature",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidInFull(sn)) + "&total_amount=0.01"}
			},
			want: "failure", unchanged: true},
		{name: "RepeatedKeySameValue", outcome: "bad_signature",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidInFull(sn)) + "&total_amount=100.00"}
			},
			want: "failure", unchanged: true},
		{name: "EmptyParamAddedAfterSigning", outcome: "applied",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidInFull(sn)) + "&refund_fee="}
			},
			want: "success", wantStatus: model.OrderPaid, wantPaid: true},
		{name: "ReorderedAndReencodedApplies", outcome: "applied",
			req: func(t *testing.T, s *server, sn string) request {
				// The signature covers decoded values, not the bytes sent.
				form := s.sign(t, paidInFull(sn))
				keys := slices.Sorted(maps.Keys(form))
				slices.Reverse(keys)
				var parts []string
				for _, k := range keys {
					v := url.QueryEscape(form.Get(k))
					if k == "out_trade_no" {
						v = ""
						for _, c := range []byte(form.Get(k)) {
							v += fmt.Sprintf("%%%02X", c)
						}
					}
					parts = append(parts, k+"="+v)
				}
				return request{body: strings.Join(parts, "&")}
			},
			want: "success", wantStatus: model.OrderPaid, wantPaid: true},
		// A trade_no an operator could never name again (a path, a link, a
		// spreadsheet would read it as something else) is refused where it
		// enters, never recorded as money nobody can refund.
		{name: "UnreachableTradeNoRefused", outcome: "invalid",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidForm(sn, "T00:cmd|calc!A0", "100.00"))}
			},
			want: "failure", unchanged: true},
		{name: "TradeNo128CharsApplies", outcome: "applied",
			req: func(t *testing.T, s *server, sn string) request {
				return request{body: s.signedBody(t, paidForm(sn, strings.Repeat("2", 128), "100.00"))}
			},
			want: "success", wantStatus: model.OrderPaid, wantPaid: true,
			wantPayments: []payWant{{tradeNo: strings.Repeat("2", 128), amount: "100.00", state: model.PaymentApplied}}},
	}

	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newServer(t, store)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				sn := tc.sn
				if sn == "" {
					sn = "N-" + tc.name
				}
				if !tc.noOrder {
					mustOrder(t, store, sn, "100.00")
				}
				if tc.setup != nil {
					tc.setup(t, s, sn)
				}
				req := tc.req(t, s, sn)
				was, counted := snapshot(t, store), s.outcomes(t)

				code, answer := s.notify(req.query, req.body)
				if code != cmp.Or(tc.code, http.StatusOK) || answer != tc.want {
					t.Fatalf("answer: %d %q, want %d %q", code, answer, cmp.Or(tc.code, http.StatusOK), tc.want)
				}
				s.checkCounted(t, counted, tc.outcome)
				if tc.name == "WrongAppID" {
					// An app not configured is counted as such: the buyer paid.
					w := s.do(httptest.NewRequest(http.MethodGet, "/metrics", nil))
					if want := `paynotify_notify_refused_total{provider="alipay",reason="unknown_app"} 1`; !strings.Contains(w.Body.String(), want) {
						t.Errorf("/metrics lacks %s", want)
					}
				}

				if now := snapshot(t, store); tc.unchanged && now != was {
					t.Fatalf("the notification changed the database:\nbefore:\n%s\nafter:\n%s", was, now)
				}
				if tc.noOrder {
					if p, err := store.Payment(t.Context(), model.ProviderAlipay, "T-"+sn); err != nil || p.State != model.PaymentUnmatched || p.OrderID != 0 {
						t.Fatalf("payment for an unknown order: %+v, %v; want UNMATCHED without an order", p, err)
					}
					return
				}
				o := mustGetOrder(t, store, sn)
				if o.Status != tc.wantStatus {
					t.Errorf("order status = %d, want %d", o.Status, tc.wantStatus)
				}
				if tc.wantPaid {
					if o.PayType != model.PayTypeAlipay || o.PaymentTime == nil || !o.PaymentTime.Equal(gmtPaymentUTC) {
						t.Errorf("paid order: pay_type %d, payment_time %v; want %d, %v", o.PayType, o.PaymentTime, model.PayTypeAlipay, gmtPaymentUTC)
					}
				} else if tc.wantStatus == model.OrderAwaitingPayment && (o.PayType != model.PayTypeNone || o.PaymentTime != nil) {
					t.Errorf("unpaid order: pay_type %d, payment_time %v", o.PayType, o.PaymentTime)
				}
				want := tc.wantPayments
				if want == nil && tc.wantPaid {
					want = []payWant{{amount: "100.00", state: model.PaymentApplied}}
				}
				checkPayments(t, store, o, want)
				if tc.check != nil {
					tc.check(t, s, sn)
				}
			})
		}
	})
}

// checkPayments asserts that order holds exactly want, oldest first; an
// empty want.tradeNo stands for "T-<order_sn>". Each payment is read back
// by its trade too.
func checkPayments(t *testing.T, store *dao.Store, o model.Order, want []payWant) {
	t.Helper()
	got := mustPayments(t, store, o.ID)
	if len(got) != len(want) {
		t.Fatalf("order %s has %d payments %+v, want %d %+v", o.OrderSN, len(got), got, len(want), want)
	}
	for i, w := range want {
		if w.tradeNo == "" {
			w.tradeNo = "T-" + o.OrderSN
		}
		for _, p := range []model.Payment{got[i], mustPayment(t, store, w.tradeNo)} {
			if p.Provider != model.ProviderAlipay || p.TradeNo != w.tradeNo || p.OrderID != o.ID ||
				p.OutTradeNo != o.OrderSN || !p.Amount.Equal(decimal.RequireFromString(w.amount)) ||
				p.State != w.state || p.Reason != w.reason {
				t.Errorf("payment %d = %s %s order %d %s %s %s %q, want %s %s order %d %s %s %s %q", i,
					p.Provider, p.TradeNo, p.OrderID, p.OutTradeNo, p.Amount.StringFixed(2), p.State, p.Reason,
					model.ProviderAlipay, w.tradeNo, o.ID, o.OrderSN, w.amount, w.state, w.reason)
			}
			if p.PaidAt == nil || !p.PaidAt.Equal(gmtPaymentUTC) {
				t.Errorf("payment %s paid_at = %v, want gmt_payment %v", p.TradeNo, p.PaidAt, gmtPaymentUTC)
			}
		}
	}
}

// mustPayment reads a payment back by its trade.
func mustPayment(t *testing.T, store *dao.Store, tradeNo string) model.Payment {
	t.Helper()
	p, err := store.Payment(t.Context(), model.ProviderAlipay, tradeNo)
	if err != nil {
		t.Fatalf("payment %s: %v", tradeNo, err)
	}
	return p
}

// Many copies of one notification at once, as Alipay's retries and a
// replaying proxy can deliver them: every copy is answered success, and
// the order is paid by exactly one APPLIED payment.
func TestNotifyCopiesInParallel(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		s := newServer(t, store)
		const copies = 50
		o := mustOrder(t, store, "PAR-1", "100.00")
		body := s.signedBody(t, paidForm("PAR-1", "T-PAR-1", "100.00"))
		answers := make([]string, copies)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range copies {
			wg.Go(func() {
				<-start
				code, answer := s.notify("", body)
				answers[i] = fmt.Sprintf("%d %s", code, answer)
			})
		}
		close(start)
		wg.Wait()
		for i, a := range answers {
			if a != "200 success" {
				t.Errorf("copy %d answered %q, want 200 success", i, a)
			}
		}
		if got := mustGetOrder(t, store, "PAR-1"); got.Status != model.OrderPaid {
			t.Fatalf("order status = %d, want paid", got.Status)
		}
		checkPayments(t, store, o, []payWant{{amount: "100.00", state: model.PaymentApplied}})
	})
}
