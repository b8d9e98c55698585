package service

import (
	"context"

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

// RefundQueue lists one page (from 0) of the refunds in a state, oldest
// first (REFUND_FAILED: those not resolved), and counts them all.
func (o *Ops) RefundQueue(ctx context.Context, state model.RefundState, page int) ([]RefundRow, model.QueueCount, error) {
	count, err := o.store.RefundQueue(ctx, state)
	if err != nil {
		return nil, count, err
	}
	refunds, err := o.store.RefundPage(ctx, state, page*QueuePage, QueuePage)
	if err != nil {
		return nil, count, err
	}
	ids := make([]int64, len(refunds))
	for i, f := range refunds {
		ids[i] = f.OrderID
	}
	sns, err := o.store.OrderSNs(ctx, ids)
	if err != nil {
		return nil, count, err
	}
	out := make([]RefundRow, len(refunds))
	for i, f := range refunds {
		out[i] = RefundRow{Refund: f, OrderSN: sns[f.OrderID]}
	}
	return out, count, nil
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
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.Event.AggregateID
	}
	sns, err := o.store.OrderSNs(ctx, ids)
	if err != nil {
		return nil, count, err
	}
	out := make([]EventRow, len(rows))
	for i, r := range rows {
		out[i] = EventRow{OutboxRow: r, OrderSN: sns[r.Event.AggregateID]}
	}
	return out, count, nil
}

// AuditLog lists one page of operator actions, newest first, with an id
// below before (0: the newest), by one operator if set.
func (o *Ops) AuditLog(ctx context.Context, operator string, before int64) ([]model.Audit, error) {
	return o.store.AuditPage(ctx, operator, before, QueuePage)
}

// Payment reads one payment by trade_no, with what operators did to it.
func (o *Ops) Payment(ctx context.Context, tradeNo string) (model.Payment, []model.Audit, error) {
	if !model.ValidID(tradeNo) {
		return model.Payment{}, nil, model.ErrPaymentNotFound
	}
	p, err := o.store.Payment(ctx, model.ProviderAlipay, tradeNo)
	if err != nil {
		return p, nil, err
	}
	audit, err := o.store.AuditByTarget(ctx, model.TargetPayment, tradeNo)
	return p, audit, err
}
