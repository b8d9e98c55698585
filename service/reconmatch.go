package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/sync/errgroup"

	"paynotify/model"
)

// matcher matches one attempt's bill lines to the ledger, a batch at a
// time, Workers batches at once.
type matcher struct {
	r       *BillReconciler
	run     model.ReconRun
	attempt int
	date    string
	// from and to bound when the bill's lines may have finished: its day,
	// and the Grace before it (a payment of 23:59:59 may be in the next
	// day's bill).
	from, to time.Time

	mu        sync.Mutex
	held      []model.BillEntry // refunds of payments not in the ledger yet
	items     int
	repaired  int
	renewedAt time.Time
}

// matchAll streams the bill's lines in batches to Workers goroutines. The
// database, not the CPU, is what a batch waits on (a commit's flush to
// disk, mostly), so batches overlap.
func (m *matcher) matchAll(ctx context.Context, bill model.Bill) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(m.r.Workers, 1))
	batch := make([]model.BillEntry, 0, m.r.Batch)
	send := func() {
		b := batch
		batch = make([]model.BillEntry, 0, m.r.Batch)
		g.Go(func() error { return m.flush(gctx, b) })
	}
	err := bill.Entries(func(e model.BillEntry) error {
		if err := gctx.Err(); err != nil {
			return err
		}
		batch = append(batch, e)
		if len(batch) == m.r.Batch {
			send()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		send()
	}
	if gerr := g.Wait(); gerr != nil {
		return gerr
	}
	if err != nil {
		return err
	}
	return m.unknownRefundsLater(ctx)
}

// renew extends the run's lease once a quarter of it has passed.
func (m *matcher) renew(ctx context.Context) error {
	r := m.r
	now := r.now()
	m.mu.Lock()
	due := now.Sub(m.renewedAt) >= r.Lease/4 || m.renewedAt.IsZero()
	if due {
		m.renewedAt = now
	}
	m.mu.Unlock()
	if !due {
		return nil
	}
	return r.store.RenewRun(ctx, m.run.ID, r.owner, now.Add(r.Lease))
}

// flush matches a batch: two reads (payments by trade_no, refunds by
// out_request_no), a repair per payment the ledger lacks, one write of
// the matched lines (booking their fees once) and one of the items.
func (m *matcher) flush(ctx context.Context, batch []model.BillEntry) error {
	r := m.r
	if err := m.renew(ctx); err != nil {
		return err
	}
	var items []model.ReconItem
	batch = slices.DeleteFunc(batch, func(e model.BillEntry) bool {
		if it, out := m.outsideDay(e); out {
			items = append(items, it)
			return true
		}
		return false
	})
	var tradeNos, requestNos []string
	for _, e := range batch {
		tradeNos = append(tradeNos, e.TradeNo)
		if e.Kind == model.BillRefund {
			requestNos = append(requestNos, e.OutRequestNo)
		}
	}
	pays, err := r.store.PaymentsByTradeNo(ctx, r.Provider, tradeNos)
	if err != nil {
		return err
	}
	refunds, err := r.store.RefundsByRequestNo(ctx, requestNos)
	if err != nil {
		return err
	}
	var seen []model.SeenLine
	// Payments first: a refund in the same batch may refund a payment
	// repaired here.
	for _, e := range batch {
		if e.Kind != model.BillPayment {
			continue
		}
		p, ok := pays[e.TradeNo]
		if !ok {
			it, p, err := m.repair(ctx, e)
			if err != nil {
				return err
			}
			items = append(items, it)
			if p == nil {
				continue // not recorded: not matched either, so never missing
			}
			pays[e.TradeNo] = *p
		} else {
			items = append(items, m.comparePayment(e, p)...)
		}
		seen = append(seen, model.SeenLine{Kind: model.BillPayment, Ref: e.TradeNo, TradeNo: e.TradeNo, Amount: e.Amount, Fee: e.Fee})
	}
	for _, e := range batch {
		if e.Kind != model.BillRefund {
			continue
		}
		amount := e.Amount.Neg()
		f, ok := refunds[e.OutRequestNo]
		if _, paid := pays[e.TradeNo]; !ok && !paid && m.later(e) {
			// Its payment may be a bill line another batch is repairing:
			// recorded once every batch is done (matchAll).
		} else if !ok {
			it, err := m.unknownRefund(ctx, e, pays)
			if err != nil {
				return err
			}
			items = append(items, it)
		} else if f.State == model.RefundFailed {
			it, err := m.settleFailed(ctx, e, f)
			if err != nil {
				return err
			}
			items = append(items, it)
		} else {
			items = append(items, m.compareRefund(e, f)...)
		}
		seen = append(seen, model.SeenLine{Kind: model.BillRefund, Ref: e.OutRequestNo, TradeNo: e.TradeNo, Amount: amount, Fee: e.Fee})
	}
	if _, err := r.store.RecordSeen(ctx, r.Provider, r.Account, m.date, seen, m.feeEvent); err != nil {
		return err
	}
	return m.save(ctx, items)
}

// outsideDay reports whether e finished outside the bill's day (and the
// Grace before it), and the item that says so. The bill vouches for its
// own day only: such a line is neither repaired nor matched, its fee is
// not booked, and an operator looks at it.
func (m *matcher) outsideDay(e model.BillEntry) (model.ReconItem, bool) {
	if !e.FinishedAt.Before(m.from) && e.FinishedAt.Before(m.to) {
		return model.ReconItem{}, false
	}
	it := model.ReconItem{Outcome: model.ReconOutsideBillDay, Ref: e.TradeNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		BillAmount: amountPtr(e.Amount)}
	if e.Kind == model.BillRefund {
		it.Ref, it.OutRequestNo, it.BillAmount = e.OutRequestNo, e.OutRequestNo, amountPtr(e.Amount.Neg())
	}
	at := e.FinishedAt.In(model.Beijing).Format(time.DateTime)
	it.Detail = "a " + strings.ToLower(string(e.Kind)) + " finished " + at + ", outside the bill's day " + m.date + ": neither repaired nor matched"
	m.r.log.Warn("reconciliation found a bill line outside the bill's day: not repaired", "bill_date", m.date, "line", e.Line,
		"kind", e.Kind, "trade_no", e.TradeNo, "finished_at", at)
	return it, true
}

// feeEvent is the event that books the fees of newly matched lines.
func (m *matcher) feeEvent(fresh []model.SeenLine) (*model.Event, error) {
	sum := decimal.Zero
	for _, l := range fresh {
		sum = sum.Add(l.Fee)
	}
	if sum.IsZero() {
		return nil, nil
	}
	ev, err := newEvent(model.EventFeesBooked, m.run.ID, model.FeeEventData{
		Provider: string(m.r.Provider), Account: m.r.Account, BillDate: m.date, Lines: len(fresh), Amount: sum.Neg().StringFixed(2),
	}, m.r.now())
	return &ev, err
}

func (m *matcher) save(ctx context.Context, items []model.ReconItem) error {
	for i := range items {
		items[i].RunID, items[i].AttemptNo = m.run.ID, m.attempt
		if m.r.OnItem != nil {
			m.r.OnItem(items[i].Outcome)
		}
	}
	if err := m.r.store.SaveItems(ctx, items); err != nil {
		return err
	}
	m.mu.Lock()
	m.items += len(items)
	m.mu.Unlock()
	return m.r.store.CountAttempt(ctx, m.run.ID, m.attempt, len(items), 0)
}

func amountPtr(d decimal.Decimal) *decimal.Decimal { return &d }

// repair records a bill payment the ledger lacks, through the
// notification path. The item says what became of it; the payment is nil
// when nothing could be recorded.
func (m *matcher) repair(ctx context.Context, e model.BillEntry) (model.ReconItem, *model.Payment, error) {
	at := e.FinishedAt
	// The repaired payment is recorded in the app the line names (WeChat
	// Pay's 公众账号ID) when it is one of the account's; a bill that names
	// none (Alipay's) leaves it to the attempt its out_trade_no names (see
	// Payments.attributed), else the account's first app.
	n := model.Observation{Provider: m.r.Provider, Account: m.r.Account, App: m.r.billApp(e), TradeNo: e.TradeNo,
		OutTradeNo: e.OutTradeNo, Amount: e.Amount, PaidAt: &at, Ref: model.BillRef(m.date)}
	it := model.ReconItem{Ref: e.TradeNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo, BillAmount: amountPtr(e.Amount)}
	pay, outcome, err := m.r.payments.Observe(ctx, n)
	switch {
	case errors.Is(err, model.ErrTradeConflict):
		it.Outcome, it.Detail = model.ReconRepairFailed, err.Error()
		m.r.log.Error("reconciliation cannot record a bill payment", "trade_no", e.TradeNo, "err", err)
		return it, nil, nil
	case err != nil:
		return it, nil, fmt.Errorf("repair %s: %w", e.TradeNo, err)
	}
	it.LedgerAmount = amountPtr(pay.Amount)
	switch outcome {
	case model.OutcomeUnmatched:
		it.Outcome, it.Detail = model.ReconUnmatched, "no order has out_trade_no "+e.OutTradeNo+": recorded UNMATCHED"
		m.r.log.Warn("reconciliation found a payment for no order: recorded UNMATCHED, refund it", "trade_no", e.TradeNo,
			"out_trade_no", e.OutTradeNo, "amount", e.Amount.StringFixed(2))
	case model.OutcomeDuplicate:
		// Recorded by a notification since our read: nothing to repair.
		return m.comparePaymentItem(e, pay), &pay, nil
	default:
		m.mu.Lock()
		m.repaired++
		m.mu.Unlock()
		// Counted as it committed (a stop asked for now does not skip
		// it): an attempt that never finishes still says what it did.
		if err := m.r.store.CountAttempt(context.WithoutCancel(ctx), m.run.ID, m.attempt, 0, 1); err != nil {
			return it, &pay, err
		}
		now := m.r.now().UTC()
		it.Outcome, it.Detail = model.ReconRepaired, "recorded from the bill as "+string(pay.State)
		it.ResolvedAt, it.ResolvedBy, it.Note = &now, "reconciliation", "repaired through the notification path"
		m.r.log.Warn("reconciliation repaired a payment the ledger lacked", "trade_no", e.TradeNo, "state", pay.State)
	}
	return it, &pay, nil
}

// comparePaymentItem is comparePayment's single item, or a REPAIRED-less
// placeholder: used when a repair found the payment recorded meanwhile.
func (m *matcher) comparePaymentItem(e model.BillEntry, p model.Payment) model.ReconItem {
	if its := m.comparePayment(e, p); len(its) > 0 {
		return its[0]
	}
	now := m.r.now().UTC()
	return model.ReconItem{Outcome: model.ReconRepaired, Ref: e.TradeNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		BillAmount: amountPtr(e.Amount), LedgerAmount: amountPtr(p.Amount), Detail: "recorded by a notification meanwhile",
		ResolvedAt: &now, ResolvedBy: "reconciliation"}
}

// comparePayment checks a bill payment against its ledger row.
func (m *matcher) comparePayment(e model.BillEntry, p model.Payment) []model.ReconItem {
	it := model.ReconItem{Ref: e.TradeNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		BillAmount: amountPtr(e.Amount), LedgerAmount: amountPtr(p.Amount)}
	var out []model.ReconItem
	if !p.Amount.Equal(e.Amount) {
		it.Outcome, it.Detail = model.ReconAmountDiffers, "the bill and the ledger disagree on the amount"
		m.r.log.Warn("reconciliation: amount differs", "trade_no", e.TradeNo, "bill", e.Amount, "ledger", p.Amount)
		out = append(out, it)
	}
	if p.State == model.PaymentUnmatched {
		it.Outcome, it.Detail = model.ReconUnmatched, "the payment is UNMATCHED: no order has out_trade_no "+p.OutTradeNo
		out = append(out, it)
	}
	return out
}

// compareRefund checks a bill refund against our refund.
func (m *matcher) compareRefund(e model.BillEntry, f model.Refund) []model.ReconItem {
	amount := e.Amount.Neg()
	it := model.ReconItem{Ref: e.OutRequestNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo, OutRequestNo: e.OutRequestNo,
		BillAmount: amountPtr(amount), LedgerAmount: amountPtr(f.Amount)}
	switch {
	case f.Kind == model.RefundConsole:
		it.Outcome, it.Detail = model.ReconUnknownRefund, "a refund we never asked for (merchant console); recorded against its payment"
		return []model.ReconItem{it}
	case settledFromBill(f):
		// A refund we held as FAILED, settled by settleFailed when a run
		// first saw it: still a difference until an operator resolves it.
		it.Outcome, it.Detail = model.ReconUnknownRefund, settledDetail
		return []model.ReconItem{it}
	case !f.Amount.Equal(amount):
		it.Outcome, it.Detail = model.ReconAmountDiffers, "the bill and our refund disagree on the amount"
		m.r.log.Warn("reconciliation: refund amount differs", "out_request_no", e.OutRequestNo, "bill", amount, "ledger", f.Amount)
		return []model.ReconItem{it}
	}
	return nil
}

// unknownRefund records a bill refund we never made against its payment,
// so later refunds never exceed what is left of it.
func (m *matcher) unknownRefund(ctx context.Context, e model.BillEntry, pays map[string]model.Payment) (model.ReconItem, error) {
	amount := e.Amount.Neg()
	it := model.ReconItem{Outcome: model.ReconUnknownRefund, Ref: e.OutRequestNo, TradeNo: e.TradeNo, OutTradeNo: e.OutTradeNo,
		OutRequestNo: e.OutRequestNo, BillAmount: amountPtr(amount)}
	m.r.log.Warn("reconciliation found a refund we never made", "trade_no", e.TradeNo, "out_request_no", e.OutRequestNo, "amount", amount)
	p, ok := pays[e.TradeNo]
	if !ok {
		it.Detail = "a refund we never asked for, of a payment neither in our ledger nor in this bill: reconcile the payment's day, then this one again"
		return it, nil
	}
	f := model.Refund{
		OutRequestNo: e.OutRequestNo, Kind: model.RefundConsole, Provider: p.Provider, Account: p.Account, App: p.App, TradeNo: p.TradeNo,
		OutTradeNo: p.OutTradeNo, OrderID: p.OrderID, Amount: amount, Reason: "found in " + m.r.Provider.Name() + "'s bill of " + m.date,
		State: model.RefundRefunded,
	}
	// Money left Alipay: the journal books it as a refund (payment.refunded,
	// kind CONSOLE) — once, with the refund's row.
	ev, err := newEvent(model.EventRefunded, p.OrderID, model.RefundEventData{
		OrderID: p.OrderID, Provider: string(p.Provider), Account: p.Account, App: p.App, TradeNo: p.TradeNo, OutTradeNo: p.OutTradeNo,
		OutRequestNo: e.OutRequestNo, Kind: string(model.RefundConsole), Amount: amount.StringFixed(2), Reason: f.Reason,
	}, m.r.now())
	if err != nil {
		return it, err
	}
	if err := m.r.store.RecordConsoleRefund(ctx, f, ev); err != nil {
		return it, fmt.Errorf("record console refund %s: %w", e.OutRequestNo, err)
	}
	it.LedgerAmount = amountPtr(amount)
	it.Detail = "a refund we never asked for (merchant console); recorded against its payment"
	return it, nil
}

// billApp is the app bill line e names when it is one of the account's
// apps, else "": the payment then takes its attempt's app, or the
// account's first (Payments.attributed). An app the account does not
// have is logged: its trades could be asked of no app of ours.
func (r *BillReconciler) billApp(e model.BillEntry) string {
	if e.App == "" || r.apps == nil {
		return ""
	}
	if _, err := r.apps.App(r.Account, e.App); err != nil {
		r.log.Warn("a bill line names an app the account does not have: recorded in its attempt's app, else the account's first",
			"provider", r.Provider, "account", r.Account, "app", model.Clip(e.App), "trade_no", e.TradeNo)
		return ""
	}
	return e.App
}
