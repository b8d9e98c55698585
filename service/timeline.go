package service

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// Timeline is everything recorded about one order: what support needs to
// answer "I paid, why is my order not paid?" in one look.
type Timeline struct {
	Order    model.Order
	Items    []model.OrderItem
	Attempts []model.AttemptChange
	Payments []model.Payment
	Refunds  []model.Refund
	// RefundChanges is every recorded state change of Refunds, in order.
	RefundChanges []model.RefundChange
	Events        []model.OutboxRow
	Audit         []model.Audit
	// Recon is what reconciliation found about the order's payments and
	// refunds.
	Recon []model.ReconRow
	// Refundable is what an operator may still refund of the applied
	// payment (zero when nothing is), by the admin API's rule.
	Refundable decimal.Decimal
}

// Found is what a search term names.
type Found struct {
	// OrderSN is set when the term leads to one order.
	OrderSN string
	// Payment is set when the term is a payment with no order to show.
	Payment *model.Payment
	// MemberID and Orders are set when the term is a member id.
	MemberID int64
	Orders   []model.Order
}

// MemberPage is how many of a member's orders a search lists.
const MemberPage = 50

// Search finds what an operator typed: an order_sn, a trade_no, an
// out_trade_no, a refund's out_request_no, or a member id (digits that
// name nothing else). Nothing found is model.ErrOrderNotFound.
func (l *Lookup) Search(ctx context.Context, q string) (Found, error) {
	q = strings.TrimSpace(q)
	if !model.ValidID(q) {
		// Identifiers are ASCII: anything else names nothing, and must not
		// reach an ascii_bin column (MySQL refuses the comparison).
		return Found{}, model.ErrOrderNotFound
	}
	if len(q) <= 64 {
		if ord, err := l.store.Order(ctx, q); err == nil {
			return Found{OrderSN: ord.OrderSN}, nil
		} else if !errors.Is(err, model.ErrOrderNotFound) {
			return Found{}, err
		}
	}
	for _, provider := range model.Providers() {
		if p, err := l.store.Payment(ctx, provider, q); err == nil {
			return l.foundPayment(ctx, p)
		} else if !errors.Is(err, model.ErrPaymentNotFound) {
			return Found{}, err
		}
	}
	if len(q) <= 64 {
		if a, err := l.store.AttemptByOutTradeNo(ctx, q); err == nil {
			return l.foundOrderID(ctx, a.OrderID)
		} else if !errors.Is(err, model.ErrAttemptNotFound) {
			return Found{}, err
		}
		if f, err := l.store.Refund(ctx, q); err == nil {
			return l.foundOrderID(ctx, f.OrderID)
		} else if !errors.Is(err, model.ErrRefundNotFound) {
			return Found{}, err
		}
		ps, err := l.store.PaymentsByOutTradeNo(ctx, q)
		if err != nil {
			return Found{}, err
		}
		if len(ps) > 0 {
			return l.foundPayment(ctx, ps[0])
		}
	}
	if id, err := strconv.ParseInt(q, 10, 64); err == nil && id > 0 {
		orders, err := l.store.OrdersByMember(ctx, id, 0, MemberPage)
		if err != nil {
			return Found{}, err
		}
		if len(orders) > 0 {
			return Found{MemberID: id, Orders: orders}, nil
		}
	}
	return Found{}, model.ErrOrderNotFound
}

// MemberOrders lists a member's orders, newest first, below an order id.
func (l *Lookup) MemberOrders(ctx context.Context, memberID, before int64) ([]model.Order, error) {
	return l.store.OrdersByMember(ctx, memberID, before, MemberPage)
}

func (l *Lookup) foundPayment(ctx context.Context, p model.Payment) (Found, error) {
	f, err := l.foundOrderID(ctx, p.OrderID)
	if errors.Is(err, model.ErrOrderNotFound) {
		return Found{Payment: &p}, nil
	}
	return f, err
}

func (l *Lookup) foundOrderID(ctx context.Context, id int64) (Found, error) {
	ord, err := l.store.OrderByID(ctx, id)
	if err != nil {
		return Found{}, err
	}
	return Found{OrderSN: ord.OrderSN}, nil
}

// Timeline reads everything recorded about an order.
func (l *Lookup) Timeline(ctx context.Context, sn string) (Timeline, error) {
	var t Timeline
	if !model.ValidID(sn) {
		return t, model.ErrOrderNotFound
	}
	var err error
	if t.Order, err = l.store.Order(ctx, sn); err != nil {
		return t, err
	}
	id := t.Order.ID
	if t.Items, err = l.store.OrderItemsNamed(ctx, id); err != nil {
		return t, err
	}
	if t.Attempts, err = l.store.AttemptsByOrder(ctx, id); err != nil {
		return t, err
	}
	if t.Payments, err = l.store.PaymentsByOrder(ctx, id); err != nil {
		return t, err
	}
	if t.Refunds, err = l.store.RefundsByOrder(ctx, id); err != nil {
		return t, err
	}
	if t.Events, err = l.store.OutboxByOrder(ctx, id); err != nil {
		return t, err
	}
	if t.Audit, err = l.store.AuditByOrder(ctx, id); err != nil {
		return t, err
	}
	var trades, requests []string
	for _, p := range t.Payments {
		trades = append(trades, p.TradeNo)
	}
	for _, f := range t.Refunds {
		requests = append(requests, f.OutRequestNo)
	}
	if t.RefundChanges, err = l.store.RefundChanges(ctx, requests); err != nil {
		return t, err
	}
	if t.Recon, err = l.store.ReconItemsOf(ctx, trades, requests); err != nil {
		return t, err
	}
	if paid, left := refundable(t.Order, t.Payments, t.Refunds); paid != nil {
		t.Refundable = left
	}
	return t, nil
}

// refundable finds the payment that paid an order and what is left to
// refund of it: paid minus every refund of that trade not failed. It is
// nil when the order has nothing an operator may refund.
func refundable(order model.Order, pays []model.Payment, refunds []model.Refund) (*model.Payment, decimal.Decimal) {
	var paid *model.Payment
	for i := range pays {
		if pays[i].State == model.PaymentApplied {
			paid = &pays[i]
		}
	}
	if paid == nil || order.Status == model.OrderAwaitingPayment || order.Status == model.OrderClosed {
		return nil, decimal.Zero
	}
	return paid, leftOf(*paid, refunds)
}
