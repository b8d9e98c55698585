package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/internal/racetest"
	"paynotify/model"
	"paynotify/service"
)

// refundsAt is a provider that only refunds, and remembers what it was
// asked to refund: enough to see which provider a refund went back
// through. (The providers' own fakes serve their wire protocols; the
// refund path through them is tested with each adapter.)
type refundsAt struct {
	service.Provider // nil: any other call panics, and would fail the test
	name             model.Provider
	mu               sync.Mutex
	refunded         map[string]decimal.Decimal // by trade number
}

func newRefundsAt(name model.Provider) *refundsAt {
	return &refundsAt{name: name, refunded: map[string]decimal.Decimal{}}
}

func (p *refundsAt) Refund(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal, reason string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunded[tradeNo] = p.refunded[tradeNo].Add(amount)
	return nil
}

func (p *refundsAt) RefundDone(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.refunded[tradeNo]
	return ok, nil
}

// has reports what p refunded of tradeNo.
func (p *refundsAt) has(tradeNo string) (decimal.Decimal, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.refunded[tradeNo]
	return d, ok
}

// wxPaid is a WeChat Pay payment as its adapter hands it over: the key is
// the transaction_id, the reference the notification's id.
func wxPaid(sn, transactionID, amount string) model.Observation {
	at := time.Date(2026, 11, 30, 6, 0, 1, 0, time.UTC)
	return model.Observation{Provider: model.ProviderWechatpay, Ref: "wx-" + transactionID, OutTradeNo: sn,
		TradeNo: transactionID, Amount: decimal.RequireFromString(amount), PaidAt: &at}
}

// refundAll runs the refund worker until it has nothing left to do.
func refundAll(t *testing.T, w *service.Refunds) {
	t.Helper()
	for range 20 {
		n, err := w.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// An order paid once through each provider, in either order: the first
// payment pays it (pay_type says whose), the second is owed back as
// already paid, and goes back through the provider that took it — never
// through the other.
func TestOrderPaidThroughBothProviders(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		p := service.NewPayments(store)
		ali, wx := newRefundsAt(model.ProviderAlipay), newRefundsAt(model.ProviderWechatpay)
		w := service.NewRefunds(store, service.Providers{model.ProviderAlipay: ali, model.ProviderWechatpay: wx}, quietLog)
		for _, tc := range []struct {
			name          string
			first, second func(sn string) model.Observation
			payType       model.PayType
			back          *refundsAt
			notBack       *refundsAt
		}{
			{"AlipayThenWechatpay", func(sn string) model.Observation { return paid(sn, "T-"+sn, "10.00") },
				func(sn string) model.Observation { return wxPaid(sn+"-2", "4200-"+sn, "10.00") }, model.PayTypeAlipay, wx, ali},
			{"WechatpayThenAlipay", func(sn string) model.Observation { return wxPaid(sn, "4200-"+sn, "10.00") },
				func(sn string) model.Observation { return paid(sn+"-2", "T-"+sn, "10.00") }, model.PayTypeWechatpay, ali, wx},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sn := "X-" + tc.name
				o := mustOrder(t, store, sn, "10.00")
				attempt(t, store, o, 2, model.ProviderAlipay) // the second trade's out_trade_no
				first, second := tc.first(sn), tc.second(sn)
				if pay, outcome, err := p.Observe(ctx, first); err != nil || outcome != model.OutcomeApplied || pay.Provider != first.Provider {
					t.Fatalf("first: %+v %s %v", pay, outcome, err)
				}
				pay, outcome, err := p.Observe(ctx, second)
				if err != nil || outcome != model.OutcomeRefundPending || pay.Reason != model.RefundAlreadyPaid || pay.Provider != second.Provider {
					t.Fatalf("second: %+v %s %v", pay, outcome, err)
				}
				got := mustGetOrder(t, store, sn)
				racetest.PaidOnce(t, sn, got, mustPayments(t, store, o.ID))
				if got.PayType != tc.payType {
					t.Fatalf("pay_type %d, want %d", got.PayType, tc.payType)
				}
				refundAll(t, w)
				if d, ok := tc.back.has(second.TradeNo); !ok || !d.Equal(second.Amount) {
					t.Fatalf("%s refunded %s of %s (%v), want %s", tc.back.name, d, second.TradeNo, ok, second.Amount)
				}
				if _, ok := tc.notBack.has(second.TradeNo); ok {
					t.Fatalf("%s refunded %s, which %s took", tc.notBack.name, second.TradeNo, tc.back.name)
				}
				if _, ok := tc.notBack.has(first.TradeNo); ok {
					t.Fatalf("the applied payment %s was refunded", first.TradeNo)
				}
			})
		}
	})
}

// An Alipay and a WeChat Pay payment of one order racing, many orders
// over, group apply on: one APPLIED, one REFUND_PENDING whichever wins,
// and the one owed back is refunded through its own provider.
func TestProvidersRaceForOneOrder(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		p := service.NewPayments(store)
		ali, wx := newRefundsAt(model.ProviderAlipay), newRefundsAt(model.ProviderWechatpay)
		w := service.NewRefunds(store, service.Providers{model.ProviderAlipay: ali, model.ProviderWechatpay: wx}, quietLog)
		raceBothWays(t, "paid through Alipay", "paid through WeChat Pay", func(t *testing.T, r int) (aliN, wxN int) {
			const orders = 40
			sns := make([]string, orders)
			errs := make([]error, 2*orders)
			for i := range sns {
				sns[i] = fmt.Sprintf("XR-%d-%d", r, i)
				o := mustOrder(t, store, sns[i], "10.00")
				attempt(t, store, o, 2, model.ProviderWechatpay)
			}
			startAll(2*orders, func(i int) {
				sn := sns[i/2]
				if i%2 == 0 {
					_, _, errs[i] = p.Observe(ctx, paid(sn, "T-"+sn, "10.00"))
				} else {
					_, _, errs[i] = p.Observe(ctx, wxPaid(sn+"-2", "4200-"+sn, "10.00"))
				}
			})
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			applied := map[string]string{}
			for _, sn := range sns {
				o := mustGetOrder(t, store, sn)
				applied[sn] = racetest.PaidOnce(t, sn, o, mustPayments(t, store, o.ID))
			}
			refundAll(t, w)
			for _, sn := range sns {
				o := mustGetOrder(t, store, sn)
				switch applied := applied[sn]; applied {
				case "T-" + sn:
					aliN++
					if _, ok := wx.has("4200-" + sn); !ok || o.PayType != model.PayTypeAlipay {
						t.Fatalf("%s: paid through Alipay (pay_type %d), WeChat Pay's payment not refunded through WeChat Pay", sn, o.PayType)
					}
					if _, ok := ali.has("4200-" + sn); ok {
						t.Fatalf("%s: WeChat Pay's payment refunded through Alipay", sn)
					}
				case "4200-" + sn:
					wxN++
					if _, ok := ali.has("T-" + sn); !ok || o.PayType != model.PayTypeWechatpay {
						t.Fatalf("%s: paid through WeChat Pay (pay_type %d), Alipay's payment not refunded through Alipay", sn, o.PayType)
					}
					if _, ok := wx.has("T-" + sn); ok {
						t.Fatalf("%s: Alipay's payment refunded through WeChat Pay", sn)
					}
				default:
					t.Fatalf("%s: applied %q", sn, applied)
				}
			}
			return aliN, wxN
		})
	})
}

// A WeChat Pay payment is decided by the same table as Alipay's: for a
// closed order it is owed back (ORDER_CLOSED) and refunded through WeChat
// Pay; for no order it is recorded UNMATCHED; again, it is a duplicate; an
// Alipay trade of the same number is another payment.
func TestWechatpayPaymentDecidedAsAlipays(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		p := service.NewPayments(store)
		wx := newRefundsAt(model.ProviderWechatpay)
		w := service.NewRefunds(store, service.Providers{model.ProviderWechatpay: wx}, quietLog)
		t.Run("ClosedOrder", func(t *testing.T) {
			o := mustOrder(t, store, "WX-CLOSED", "10.00")
			if _, err := service.NewOrders(store).Cancel(ctx, o.MemberID, o.OrderSN); err != nil {
				t.Fatal(err)
			}
			pay, outcome, err := p.Observe(ctx, wxPaid("WX-CLOSED", "4200-closed", "10.00"))
			if err != nil || outcome != model.OutcomeRefundPending || pay.Reason != model.RefundOrderClosed {
				t.Fatalf("%+v %s %v", pay, outcome, err)
			}
			if got := mustGetOrder(t, store, "WX-CLOSED"); got.Status != model.OrderClosed {
				t.Fatalf("order reopened: status %d", got.Status)
			}
			refundAll(t, w)
			if d, ok := wx.has("4200-closed"); !ok || !d.Equal(dec("10.00")) {
				t.Fatalf("refunded through WeChat Pay: %s %v", d, ok)
			}
		})
		t.Run("NoOrder", func(t *testing.T) {
			pay, outcome, err := p.Observe(ctx, wxPaid("WX-NOBODY", "4200-nobody", "3.00"))
			if err != nil || outcome != model.OutcomeUnmatched || pay.State != model.PaymentUnmatched || pay.Provider != model.ProviderWechatpay {
				t.Fatalf("%+v %s %v", pay, outcome, err)
			}
		})
		t.Run("SameNumberOtherProvider", func(t *testing.T) {
			mustOrder(t, store, "WX-DUP", "10.00")
			if _, outcome, err := p.Observe(ctx, wxPaid("WX-DUP", "SAME-NO", "10.00")); err != nil || outcome != model.OutcomeApplied {
				t.Fatalf("first: %s %v", outcome, err)
			}
			if _, outcome, err := p.Observe(ctx, wxPaid("WX-DUP", "SAME-NO", "10.00")); err != nil || outcome != model.OutcomeDuplicate {
				t.Fatalf("again: %s %v", outcome, err)
			}
			if _, outcome, err := p.Observe(ctx, paid("WX-DUP", "SAME-NO", "10.00")); err != nil || outcome != model.OutcomeRefundPending {
				t.Fatalf("Alipay's trade of the same number: %s %v", outcome, err)
			}
		})
	})
}

// attempt records attempt no of order o, open at provider.
func attempt(t *testing.T, store *dao.Store, o model.Order, no int, provider model.Provider) {
	t.Helper()
	if _, err := store.SQL().Exec(`INSERT INTO oms_pay_attempt (order_id, attempt_no, provider, out_trade_no, method, amount, state)
		VALUES (?, ?, ?, ?, 'qr', ?, ?)`, o.ID, no, provider, fmt.Sprintf("%s-%d", o.OrderSN, no), o.PayAmount.StringFixed(2), model.AttemptOpen); err != nil {
		t.Fatal(err)
	}
}
