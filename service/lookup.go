package service

import (
	"context"
	"time"

	"paynotify/dao"
	"paynotify/model"
)

// Lookup reads one thing by what an operator or support knows of it: a
// search term, an order's timeline, a member's orders, a payment, a refund,
// a reconciliation item, and the audit log.
type Lookup struct {
	store *dao.Store
	now   func() time.Time
}

// NewLookup returns the look-ups over store.
func NewLookup(store *dao.Store) *Lookup { return &Lookup{store: store, now: time.Now} }

// Refunds lists an order's refunds.
func (l *Lookup) Refunds(ctx context.Context, sn string) ([]model.Refund, error) {
	order, err := l.store.Order(ctx, sn)
	if err != nil {
		return nil, err
	}
	return l.store.RefundsByOrder(ctx, order.ID)
}

// AuditLog lists one page of operator actions, newest first, with an id
// below before (0: the newest), by one operator if set.
func (l *Lookup) AuditLog(ctx context.Context, operator string, before int64, sessions bool) ([]model.Audit, error) {
	return l.store.AuditPage(ctx, operator, before, QueuePage, sessions)
}

// Payment reads one payment by its provider and trade_no, with its order's
// number and what operators did to it.
func (l *Lookup) Payment(ctx context.Context, provider model.Provider, tradeNo string) (PaymentRow, []model.Audit, error) {
	if !model.ValidID(tradeNo) {
		return PaymentRow{}, nil, model.ErrPaymentNotFound
	}
	p, err := l.store.Payment(ctx, provider, tradeNo)
	if err != nil {
		return PaymentRow{}, nil, err
	}
	sns, err := l.store.OrderSNs(ctx, []int64{p.OrderID})
	if err != nil {
		return PaymentRow{}, nil, err
	}
	audit, err := l.store.AuditByTarget(ctx, model.TargetPayment, tradeNo)
	return PaymentRow{Payment: p, OrderSN: sns[p.OrderID]}, audit, err
}

// Refund reads one refund, with its order's number.
func (l *Lookup) Refund(ctx context.Context, outRequestNo string) (RefundRow, error) {
	if !model.ValidID(outRequestNo) {
		return RefundRow{}, model.ErrRefundNotFound
	}
	f, err := l.store.Refund(ctx, outRequestNo)
	if err != nil {
		return RefundRow{}, err
	}
	sns, err := l.store.OrderSNs(ctx, []int64{f.OrderID})
	return RefundRow{Refund: f, OrderSN: sns[f.OrderID]}, err
}

// ReconItem reads one reconciliation item with its bill date.
func (l *Lookup) ReconItem(ctx context.Context, id int64) (model.ReconRow, error) {
	return l.store.ReconItem(ctx, id)
}
