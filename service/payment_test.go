package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/internal/racetest"
	"paynotify/model"
	"paynotify/service"
)

var ctx = context.Background()

func mustOrder(t *testing.T, store *dao.Store, sn, amount string) model.Order {
	t.Helper()
	o, err := store.CreateOrder(ctx, sn, 7, decimal.RequireFromString(amount))
	if err != nil {
		t.Fatalf("create order %s: %v", sn, err)
	}
	return o
}

func paid(sn, tradeNo, amount string) model.Observation {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	return model.Observation{
		Provider: model.ProviderAlipay, Ref: "n-" + tradeNo, OutTradeNo: sn, TradeNo: tradeNo, Amount: decimal.RequireFromString(amount), PaidAt: &at,
	}
}

func mustGetOrder(t *testing.T, store *dao.Store, sn string) model.Order {
	t.Helper()
	o, err := store.Order(ctx, sn)
	if err != nil {
		t.Fatalf("read order %s: %v", sn, err)
	}
	return o
}

func mustPayments(t *testing.T, store *dao.Store, orderID int64) []model.Payment {
	t.Helper()
	ps, err := store.PaymentsByOrder(ctx, orderID)
	if err != nil {
		t.Fatalf("payments of %d: %v", orderID, err)
	}
	return ps
}

func TestObserveDecisionTable(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		p := service.NewPayments(store)
		orders := service.NewOrders(store)
		cases := []struct {
			name        string
			setup       func(t *testing.T) // runs after the order is created
			order       string
			n           model.Observation
			wantOutcome model.Outcome
			wantErr     error
			wantState   model.PaymentState
			wantReason  model.RefundReason
			wantStatus  model.OrderStatus
		}{
			{name: "FirstNoticeApplies", order: "100.00", n: paid("A1", "T-A1", "100.00"),
				wantOutcome: model.OutcomeApplied, wantState: model.PaymentApplied, wantStatus: model.OrderPaid},
			{name: "AmountMismatchIsRefundPending", order: "100.00", n: paid("A2", "T-A2", "0.01"),
				wantOutcome: model.OutcomeRefundPending, wantState: model.PaymentRefundPending,
				wantReason: model.RefundAmountMismatch, wantStatus: model.OrderAwaitingPayment},
			{name: "ClosedOrderIsNeverReopened", order: "100.00", n: paid("A3", "T-A3", "100.00"),
				setup: func(t *testing.T) {
					if _, err := orders.Cancel(ctx, rigMember, "A3"); err != nil {
						t.Fatalf("cancel: %v", err)
					}
				},
				wantOutcome: model.OutcomeRefundPending, wantState: model.PaymentRefundPending,
				wantReason: model.RefundOrderClosed, wantStatus: model.OrderClosed},
			{name: "SecondTradeIsRefundPending", order: "100.00", n: paid("A4", "T-A4-second", "100.00"),
				setup: func(t *testing.T) {
					if _, _, err := p.Observe(ctx, paid("A4", "T-A4-first", "100.00")); err != nil {
						t.Fatal(err)
					}
				},
				wantOutcome: model.OutcomeRefundPending, wantState: model.PaymentRefundPending,
				wantReason: model.RefundAlreadyPaid, wantStatus: model.OrderPaid},
			{name: "SameTradeAgainIsDuplicate", order: "100.00", n: paid("A5", "T-A5", "100.00"),
				setup: func(t *testing.T) {
					if _, _, err := p.Observe(ctx, paid("A5", "T-A5", "100.00")); err != nil {
						t.Fatal(err)
					}
				},
				wantOutcome: model.OutcomeDuplicate, wantState: model.PaymentApplied, wantStatus: model.OrderPaid},
			{name: "TradeFinishedAfterSuccessIsDuplicate", order: "100.00",
				n: func() model.Observation {
					at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
					return alipay.Notification{NotifyID: "n-finished", TradeStatus: alipay.TradeFinished, OutTradeNo: "A6",
						TradeNo: "T-A6", TotalAmount: decimal.RequireFromString("100.00"), GmtPayment: &at}.Observation()
				}(),
				setup: func(t *testing.T) {
					if _, _, err := p.Observe(ctx, paid("A6", "T-A6", "100.00")); err != nil {
						t.Fatal(err)
					}
				},
				wantOutcome: model.OutcomeDuplicate, wantState: model.PaymentApplied, wantStatus: model.OrderPaid},
			{name: "TradeBoundToAnotherOrderIsConflict", order: "100.00", n: paid("A7", "T-A7-other", "100.00"),
				setup: func(t *testing.T) {
					mustOrder(t, store, "A7-other", "100.00")
					if _, _, err := p.Observe(ctx, paid("A7-other", "T-A7-other", "100.00")); err != nil {
						t.Fatal(err)
					}
				},
				wantErr: model.ErrTradeConflict, wantStatus: model.OrderAwaitingPayment},
			{name: "SameTradeOtherAmountIsConflict", order: "100.00", n: paid("A8", "T-A8", "99.00"),
				setup: func(t *testing.T) {
					if _, _, err := p.Observe(ctx, paid("A8", "T-A8", "100.00")); err != nil {
						t.Fatal(err)
					}
				},
				wantErr: model.ErrTradeConflict, wantStatus: model.OrderPaid},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := mustOrder(t, store, tc.n.OutTradeNo, tc.order)
				if tc.setup != nil {
					tc.setup(t)
				}
				before := mustPayments(t, store, o.ID)
				pay, outcome, err := p.Observe(ctx, tc.n)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("err = %v, want %v", err, tc.wantErr)
					}
					if after := mustPayments(t, store, o.ID); len(after) != len(before) {
						t.Fatalf("payments changed on error: %d → %d", len(before), len(after))
					}
				} else {
					if err != nil {
						t.Fatalf("Observe: %v", err)
					}
					if outcome != tc.wantOutcome || pay.State != tc.wantState || pay.Reason != tc.wantReason {
						t.Fatalf("got %s %s %q, want %s %s %q", outcome, pay.State, pay.Reason, tc.wantOutcome, tc.wantState, tc.wantReason)
					}
					stored, err := store.Payment(ctx, model.ProviderAlipay, tc.n.TradeNo)
					if err != nil || stored.State != tc.wantState || stored.OrderID != o.ID || !stored.Amount.Equal(tc.n.Amount) {
						t.Fatalf("stored payment = %+v, %v", stored, err)
					}
				}
				got := mustGetOrder(t, store, tc.n.OutTradeNo)
				if got.Status != tc.wantStatus {
					t.Fatalf("order status = %d, want %d", got.Status, tc.wantStatus)
				}
				if got.Status == model.OrderPaid && (got.PayType != model.PayTypeAlipay || got.PaymentTime == nil) {
					t.Fatalf("paid order lacks pay type or time: %+v", got)
				}
			})
		}
		t.Run("OrderNotFoundIsUnmatched", func(t *testing.T) {
			// Money Alipay took for no order of ours: recorded, no order.
			pay, outcome, err := p.Observe(ctx, paid("NOPE", "T-NOPE", "1.00"))
			if err != nil || outcome != model.OutcomeUnmatched || pay.State != model.PaymentUnmatched || pay.OrderID != 0 {
				t.Fatalf("Observe = %+v, %s, %v; want UNMATCHED", pay, outcome, err)
			}
			if stored, err := store.Payment(ctx, model.ProviderAlipay, "T-NOPE"); err != nil || stored.State != model.PaymentUnmatched {
				t.Fatalf("stored %+v, %v", stored, err)
			}
			if _, outcome, err := p.Observe(ctx, paid("NOPE", "T-NOPE", "1.00")); err != nil || outcome != model.OutcomeDuplicate {
				t.Fatalf("again: %s, %v; want duplicate", outcome, err)
			}
		})
		t.Run("PaymentTimeIsGmtPaymentInUTC", func(t *testing.T) {
			mustOrder(t, store, "A9", "1.00")
			n := paid("A9", "T-A9", "1.00")
			if _, _, err := p.Observe(ctx, n); err != nil {
				t.Fatal(err)
			}
			got := mustGetOrder(t, store, "A9")
			if got.PaymentTime == nil || !got.PaymentTime.Equal(*n.PaidAt) {
				t.Fatalf("payment_time = %v, want %v", got.PaymentTime, n.PaidAt)
			}
		})
	})
}

// Hundreds of copies of one notification at once: one APPLIED row, the
// order paid once, every answer a success.
func TestObserveIdenticalNotificationsInParallel(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		p := service.NewPayments(store)
		o := mustOrder(t, store, "STORM-1", "100.00")
		const n = 300
		outcomes := make([]model.Outcome, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, outcomes[i], errs[i] = p.Observe(ctx, paid("STORM-1", "T-STORM-1", "100.00"))
			}()
		}
		close(start)
		wg.Wait()
		applied := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("notification %d: %v", i, errs[i])
			}
			switch outcomes[i] {
			case model.OutcomeApplied:
				applied++
			case model.OutcomeDuplicate:
			default:
				t.Fatalf("notification %d: outcome %s", i, outcomes[i])
			}
		}
		if applied != 1 {
			t.Fatalf("applied %d times, want once", applied)
		}
		ps := mustPayments(t, store, o.ID)
		if len(ps) != 1 || ps[0].State != model.PaymentApplied {
			t.Fatalf("payments = %+v, want one APPLIED", ps)
		}
		if got := mustGetOrder(t, store, "STORM-1"); got.Status != model.OrderPaid {
			t.Fatalf("order status = %d, want paid", got.Status)
		}
	})
}

// Two different trades racing for one order, many orders over: exactly one
// pays it, the other is owed back — whichever comes first.
func TestObserveTwoTradesRaceForOneOrder(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		p := service.NewPayments(store)
		raceBothWays(t, "paid by trade a", "paid by trade b", func(t *testing.T, r int) (aN, bN int) {
			const orders = 60
			sns := make([]string, orders)
			errs := make([]error, 2*orders)
			for i := range sns {
				sns[i] = fmt.Sprintf("RACE-%d-%d", r, i)
				mustOrder(t, store, sns[i], "10.00")
			}
			startAll(2*orders, func(i int) {
				sn := sns[i/2]
				trade := sn + "-" + [2]string{"a", "b"}[i%2]
				_, _, errs[i] = p.Observe(ctx, paid(sn, trade, "10.00"))
			})
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, sn := range sns {
				o := mustGetOrder(t, store, sn)
				if racetest.PaidOnce(t, sn, o, mustPayments(t, store, o.ID)) == sn+"-a" {
					aN++
				} else {
					bN++
				}
			}
			return aN, bN
		})
	})
}

// The member's real cancel (Orders.Cancel) racing the notification of the
// same order, many times over: the order ends either paid with an APPLIED
// payment (the cancel refused) or closed with the money owed back (the
// cancel done) — never paid-and-closed, never money dropped.
func TestObserveRacesCancel(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		p := service.NewPayments(store)
		orders := service.NewOrders(store)
		raceBothWays(t, "paid first", "cancelled first", func(t *testing.T, r int) (paidN, closedN int) {
			const n = 150
			sns := make([]string, n)
			cancelErrs := make([]error, n)
			notifyErrs := make([]error, n)
			for i := range sns {
				sns[i] = fmt.Sprintf("CLOSE-%d-%d", r, i)
				mustOrder(t, store, sns[i], "5.00")
			}
			startAll(2*n, func(i int) {
				if sn := sns[i/2]; i%2 == 0 {
					_, cancelErrs[i/2] = orders.Cancel(ctx, rigMember, sn)
				} else {
					_, _, notifyErrs[i/2] = p.Observe(ctx, paid(sn, "T-"+sn, "5.00"))
				}
			})
			for i, sn := range sns {
				if notifyErrs[i] != nil {
					t.Fatalf("%s: notify: %v", sn, notifyErrs[i])
				}
				o := mustGetOrder(t, store, sn)
				ps := mustPayments(t, store, o.ID)
				if len(ps) != 1 {
					t.Fatalf("%s: %d payments, want 1", sn, len(ps))
				}
				switch {
				case o.Status == model.OrderPaid && ps[0].State == model.PaymentApplied:
					paidN++
					if !errors.Is(cancelErrs[i], model.ErrOrderNotCancellable) {
						t.Fatalf("%s: paid, but the cancel answered %v", sn, cancelErrs[i])
					}
				case o.Status == model.OrderClosed && ps[0].State == model.PaymentRefundPending && ps[0].Reason == model.RefundOrderClosed:
					closedN++
					if cancelErrs[i] != nil {
						t.Fatalf("%s: closed, but the cancel answered %v", sn, cancelErrs[i])
					}
				default:
					t.Fatalf("%s: order status %d with payment %s/%s", sn, o.Status, ps[0].State, ps[0].Reason)
				}
			}
			return paidN, closedN
		})
	})
}
