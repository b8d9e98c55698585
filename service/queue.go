package service

import (
	"context"
	"fmt"

	"paynotify/dao"
	"paynotify/model"
)

// QueuePage is how many rows a queue page lists.
const QueuePage = 50

// RefundRow is a refund as a queue lists it, with its order's number.
type RefundRow struct {
	model.Refund
	OrderSN string
}

// EventRow is an outbox row as a queue lists it, with its order's number.
type EventRow struct {
	model.OutboxRow
	OrderSN string
}

// RefundQueue lists one page (from 0) of the refunds in a state, the
// longest unchanged first (REFUND_FAILED: those not resolved), and counts
// them all.
func (o *Ops) RefundQueue(ctx context.Context, state model.RefundState, page int) ([]RefundRow, model.QueueCount, error) {
	count, err := o.store.RefundQueue(ctx, state)
	if err != nil {
		return nil, count, err
	}
	refunds, err := o.store.RefundPage(ctx, state, page*QueuePage, QueuePage)
	if err != nil {
		return nil, count, err
	}
	out, err := withOrderSNs(ctx, o.store, refunds, func(f model.Refund) int64 { return f.OrderID },
		func(f model.Refund, sn string) RefundRow { return RefundRow{Refund: f, OrderSN: sn} })
	return out, count, err
}

// OutboxQueue lists the outbox rows in a state after a sequence number,
// oldest first, one page, and counts them all.
func (o *Ops) OutboxQueue(ctx context.Context, state model.OutboxState, after int64) ([]EventRow, model.QueueCount, error) {
	count, err := o.store.OutboxQueue(ctx, state)
	if err != nil {
		return nil, count, err
	}
	rows, err := o.store.OutboxPage(ctx, state, after, QueuePage)
	if err != nil {
		return nil, count, err
	}
	out, err := withOrderSNs(ctx, o.store, rows, func(r model.OutboxRow) int64 { return r.Event.AggregateID },
		func(r model.OutboxRow, sn string) EventRow { return EventRow{OutboxRow: r, OrderSN: sn} })
	return out, count, err
}

// AuditLog lists one page of operator actions, newest first, with an id
// below before (0: the newest), by one operator if set.
func (o *Ops) AuditLog(ctx context.Context, operator string, before int64, sessions bool) ([]model.Audit, error) {
	return o.store.AuditPage(ctx, operator, before, QueuePage, sessions)
}

// Payment reads one payment by its provider and trade_no, with its order's
// number and what operators did to it.
func (o *Ops) Payment(ctx context.Context, provider model.Provider, tradeNo string) (PaymentRow, []model.Audit, error) {
	if !model.ValidID(tradeNo) {
		return PaymentRow{}, nil, model.ErrPaymentNotFound
	}
	p, err := o.store.Payment(ctx, provider, tradeNo)
	if err != nil {
		return PaymentRow{}, nil, err
	}
	sns, err := o.store.OrderSNs(ctx, []int64{p.OrderID})
	if err != nil {
		return PaymentRow{}, nil, err
	}
	audit, err := o.store.AuditByTarget(ctx, model.TargetPayment, tradeNo)
	return PaymentRow{Payment: p, OrderSN: sns[p.OrderID]}, audit, err
}

// PaymentRow is a payment as a queue lists it, with its order's number
// (empty when the order is not there).
type PaymentRow struct {
	model.Payment
	OrderSN string
}

// PaymentQueue lists one page (from 0) of the payments in a state, oldest
// first, and counts them all.
func (o *Ops) PaymentQueue(ctx context.Context, state model.PaymentState, page int) ([]PaymentRow, model.QueueCount, error) {
	count, err := o.store.PaymentQueue(ctx, state)
	if err != nil {
		return nil, count, err
	}
	pays, err := o.store.PaymentPage(ctx, state, page*QueuePage, QueuePage)
	if err != nil {
		return nil, count, err
	}
	out, err := withOrderSNs(ctx, o.store, pays, func(p model.Payment) int64 { return p.OrderID },
		func(p model.Payment, sn string) PaymentRow { return PaymentRow{Payment: p, OrderSN: sn} })
	return out, count, err
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

// Refund reads one refund, with its order's number.
func (o *Ops) Refund(ctx context.Context, outRequestNo string) (RefundRow, error) {
	if !model.ValidID(outRequestNo) {
		return RefundRow{}, model.ErrRefundNotFound
	}
	f, err := o.store.Refund(ctx, outRequestNo)
	if err != nil {
		return RefundRow{}, err
	}
	sns, err := o.store.OrderSNs(ctx, []int64{f.OrderID})
	return RefundRow{Refund: f, OrderSN: sns[f.OrderID]}, err
}

// ReconQueue lists one page (from 0) of reconciliation items, newest bill
// date first: of one outcome if set, only those needing an operator if
// open; and counts them all.
func (o *Ops) ReconQueue(ctx context.Context, outcome model.ReconOutcome, open bool, page int) ([]dao.ReconRow, int64, error) {
	if outcome != "" && !outcome.Valid() {
		return nil, 0, fmt.Errorf("%w: outcome %q", model.ErrInvalidRequest, outcome)
	}
	n, err := o.store.ReconItemCount(ctx, outcome, open)
	if err != nil {
		return nil, 0, err
	}
	rows, err := o.store.ReconItemPage(ctx, outcome, open, page*QueuePage, QueuePage)
	return rows, n, err
}

// ReconRuns lists the newest reconciliation runs.
func (o *Ops) ReconRuns(ctx context.Context, limit int) ([]model.ReconRun, error) {
	return o.store.ReconRuns(ctx, model.ProviderAlipay, limit)
}

// ReconItem reads one reconciliation item with its bill date.
func (o *Ops) ReconItem(ctx context.Context, id int64) (dao.ReconRow, error) {
	return o.store.ReconItem(ctx, id)
}
