package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Queues is what waits for a worker or an operator, page by page — the
// refunds, outbox events, payments and reconciliation items of one state —
// and the one action on a queue row that is not a refund's (requeueing an
// event).
type Queues struct {
	store *dao.Store
	now   func() time.Time
}

// NewQueues returns the work queues over store.
func NewQueues(store *dao.Store) *Queues { return &Queues{store: store, now: time.Now} }

// QueuePage is how many rows a queue page lists.
const QueuePage = 50

// RefundRow is a refund as a queue lists it, with its order's number.
type RefundRow struct {
	model.Refund
	OrderSN string
}

// EventRow is an outbox row as a queue lists it, with its order's number,
// or the run it belongs to (a day's fees).
type EventRow struct {
	model.OutboxRow
	OrderSN string
	// Run is set for a reconciliation run's event.
	Run *RunRef
}

// RunRef names a reconciliation run.
type RunRef struct {
	Provider model.Provider
	Account  string
	BillDate string
}

func eventRow(r model.OutboxRow, sn string) EventRow {
	row := EventRow{OutboxRow: r, OrderSN: sn}
	if r.Event.Type.OfRun() {
		var d model.FeeEventData
		if json.Unmarshal(r.Event.Data, &d) == nil && d.Provider != "" {
			row.Run = &RunRef{Provider: model.Provider(d.Provider), Account: d.Account, BillDate: d.BillDate}
		}
	}
	return row
}

// RefundQueue lists one page (from 0) of the refunds in a state, the
// longest unchanged first (REFUND_FAILED: those not resolved), and counts
// them all.
func (q *Queues) RefundQueue(ctx context.Context, state model.RefundState, page int) ([]RefundRow, model.QueueCount, error) {
	return queuePage(ctx, q.store,
		func() (model.QueueCount, error) { return q.store.RefundQueue(ctx, state) },
		func() ([]model.Refund, error) { return q.store.RefundPage(ctx, state, page*QueuePage, QueuePage) },
		func(f model.Refund) int64 { return f.OrderID },
		func(f model.Refund, sn string) RefundRow { return RefundRow{Refund: f, OrderSN: sn} })
}

// OutboxQueue lists the outbox rows in a state after a sequence number,
// oldest first, one page, and counts them all.
func (q *Queues) OutboxQueue(ctx context.Context, state model.OutboxState, after int64) ([]EventRow, model.QueueCount, error) {
	return queuePage(ctx, q.store,
		func() (model.QueueCount, error) { return q.store.OutboxQueue(ctx, state) },
		func() ([]model.OutboxRow, error) { return q.store.OutboxPage(ctx, state, after, QueuePage) },
		func(r model.OutboxRow) int64 { return r.Event.OrderID() },
		func(r model.OutboxRow, sn string) EventRow { return eventRow(r, sn) })
}

// PaymentRow is a payment as a queue lists it, with its order's number
// (empty when the order is not there).
type PaymentRow struct {
	model.Payment
	OrderSN string
}

// PaymentQueue lists one page (from 0) of the payments in a state, oldest
// first, and counts them all.
func (q *Queues) PaymentQueue(ctx context.Context, state model.PaymentState, page int) ([]PaymentRow, model.QueueCount, error) {
	return queuePage(ctx, q.store,
		func() (model.QueueCount, error) { return q.store.PaymentQueue(ctx, state) },
		func() ([]model.Payment, error) { return q.store.PaymentPage(ctx, state, page*QueuePage, QueuePage) },
		func(p model.Payment) int64 { return p.OrderID },
		func(p model.Payment, sn string) PaymentRow { return PaymentRow{Payment: p, OrderSN: sn} })
}

// queuePage counts a queue, reads one page of its rows and pairs each
// with its order's number.
func queuePage[T, R any](ctx context.Context, store *dao.Store, count func() (model.QueueCount, error), page func() ([]T, error),
	orderID func(T) int64, pair func(T, string) R) ([]R, model.QueueCount, error) {
	n, err := count()
	if err != nil {
		return nil, n, err
	}
	rows, err := page()
	if err != nil {
		return nil, n, err
	}
	out, err := withOrderSNs(ctx, store, rows, orderID, pair)
	return out, n, err
}

// withOrderSNs pairs each of a queue's rows with the number of the order
// orderID names (empty when it is not there), read in one query.
func withOrderSNs[T, R any](ctx context.Context, store *dao.Store, rows []T, orderID func(T) int64, pair func(T, string) R) ([]R, error) {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = orderID(r)
	}
	sns, err := store.OrderSNs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]R, len(rows))
	for i, r := range rows {
		out[i] = pair(r, sns[orderID(r)])
	}
	return out, nil
}

// ReconQueue lists one page (from 0) of reconciliation items, newest bill
// date first: of one outcome if set, only those needing an operator if
// open; and counts them all.
func (q *Queues) ReconQueue(ctx context.Context, outcome model.ReconOutcome, open bool, page int) ([]model.ReconRow, int64, error) {
	if outcome != "" && !outcome.Valid() {
		return nil, 0, fmt.Errorf("%w: outcome %q", model.ErrInvalidRequest, outcome)
	}
	n, err := q.store.ReconItemCount(ctx, outcome, open)
	if err != nil {
		return nil, 0, err
	}
	rows, err := q.store.ReconItemPage(ctx, outcome, open, page*QueuePage, QueuePage)
	return rows, n, err
}

// ReconRuns lists the newest reconciliation runs of every provider and
// account, at most limit: newest date first, a date's runs in the order
// model.Providers() lists them, a provider's by account.
func (q *Queues) ReconRuns(ctx context.Context, limit int) ([]model.ReconRun, error) {
	var runs []model.ReconRun
	for _, p := range model.Providers() {
		some, err := q.store.ProviderRuns(ctx, p, limit)
		if err != nil {
			return nil, err
		}
		runs = append(runs, some...)
	}
	// Each provider's are newest first already: a stable sort by date
	// keeps a date's runs in provider order.
	slices.SortStableFunc(runs, func(a, b model.ReconRun) int { return cmp.Compare(b.BillDate, a.BillDate) })
	return runs[:min(len(runs), limit)], nil
}

// ReconRunPage is one provider account's run of one date for the console: the
// run, its attempts, and its first items.
type ReconRunPage struct {
	Run     model.ReconRun
	History []model.ReconAttempt
	Rows    []model.ReconRow
	// Fees are the fees the run booked (payment.fees_booked), one event
	// per batch of newly matched lines.
	Fees []RunFee
}

// RunFee is one payment.fees_booked event of a run.
type RunFee struct {
	model.FeeEventData
	Seq   int64
	State model.OutboxState
}

// ReconRunPageSize is how many of a run's items ReconRun lists.
const ReconRunPageSize = 500

// ReconRun reads account's run of date with its attempts and its first
// ReconRunPageSize items (of one outcome if set), each beside where its
// payment stands now. It reads any provider's runs, configured here or
// not.
func (q *Queues) ReconRun(ctx context.Context, account model.BillAccount, date string, outcome model.ReconOutcome) (ReconRunPage, error) {
	if _, err := ParseBillDate(date); err != nil {
		return ReconRunPage{}, err
	}
	if outcome != "" && !outcome.Valid() {
		return ReconRunPage{}, fmt.Errorf("%w: outcome %q", model.ErrInvalidRequest, outcome)
	}
	run, err := q.store.ReconRun(ctx, account, date)
	if err != nil {
		return ReconRunPage{}, err
	}
	p := ReconRunPage{Run: run}
	if p.History, err = q.store.ReconAttempts(ctx, run.ID); err != nil {
		return ReconRunPage{}, err
	}
	if p.Rows, err = q.store.ReconRowsOfRun(ctx, run.ID, outcome, ReconRunPageSize); err != nil {
		return ReconRunPage{}, err
	}
	evs, err := q.store.OutboxByRun(ctx, run.ID)
	if err != nil {
		return ReconRunPage{}, err
	}
	for _, e := range evs {
		var d model.FeeEventData
		if err := json.Unmarshal(e.Event.Data, &d); err != nil {
			return ReconRunPage{}, fmt.Errorf("fee event %d: %w", e.Seq, err)
		}
		p.Fees = append(p.Fees, RunFee{FeeEventData: d, Seq: e.Seq, State: e.State})
	}
	return p, nil
}

// Outbox lists up to limit events in a state, oldest first, and counts all
// of them.
func (q *Queues) Outbox(ctx context.Context, state model.OutboxState, limit int) ([]model.OutboxRow, int64, error) {
	rows, err := q.store.OutboxRows(ctx, state, limit)
	if err != nil {
		return nil, 0, err
	}
	n, err := q.store.OutboxCount(ctx, state)
	return rows, n, err
}

// RequeueEvent makes a FAILED outbox row pending again, due at once, with
// its attempts from zero: for after the broker is fixed, rather than
// waiting out the row's back-off.
func (q *Queues) RequeueEvent(ctx context.Context, act model.Act, seq int64) error {
	if err := checkAct(act, false); err != nil {
		return err
	}
	row, err := q.store.OutboxRow(ctx, seq)
	if err != nil {
		return err
	}
	return q.store.UpdateOutbox(ctx, func(ctx context.Context, tx *dao.OutboxTx) error {
		var orderID *int64
		if id := row.Event.OrderID(); id != 0 {
			orderID = &id
		}
		if err := tx.InsertAudit(ctx, model.Audit{Key: act.Key, Operator: act.Operator, Action: model.AuditOutboxRequeue, OrderID: orderID,
			TargetKind: model.TargetOutbox, TargetID: strconv.FormatInt(seq, 10),
			Before: fmt.Sprintf("%s after %d attempts: %s", row.State, row.Attempts, row.LastError), After: string(model.OutboxPending),
			Note: act.Note}); err != nil {
			return err
		}
		moved, err := tx.RequeueEvent(ctx, seq, q.now())
		if err != nil || !moved {
			return notActionable(err, "event %d is not FAILED", seq)
		}
		return nil
	})
}
