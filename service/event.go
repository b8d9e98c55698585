package service

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"paynotify/model"
)

// Reasons an order closes, carried by order.closed.
const (
	closeCancelled = "cancelled"
	closeTimeout   = "timeout"
)

// newEvent wraps data in an event envelope with a fresh id. Ids are UUIDv7:
// unique across instances, and ordered in time (kind to the unique index).
func newEvent(typ model.EventType, aggregateID int64, data any, now time.Time) (model.Event, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return model.Event{}, err
	}
	b, err := json.Marshal(data)
	if err != nil {
		return model.Event{}, err
	}
	return model.Event{ID: id.String(), Type: typ, AggregateID: aggregateID, OccurredAt: now.UTC().Truncate(time.Millisecond), Data: b}, nil
}

func orderEvent(typ model.EventType, o model.Order, reason string, now time.Time) (model.Event, error) {
	return newEvent(typ, o.ID, model.OrderEventData{
		OrderID: o.ID, OrderSN: o.OrderSN, MemberID: o.MemberID, PayAmount: o.PayAmount.StringFixed(2),
		TotalAmount: o.TotalAmount.StringFixed(2), Status: int(o.Status), Reason: reason,
	}, now)
}

func paymentEvent(typ model.EventType, p model.Payment, orderSN string, now time.Time) (model.Event, error) {
	return newEvent(typ, p.OrderID, model.PaymentEventData{
		OrderID: p.OrderID, OrderSN: orderSN, Provider: string(p.Provider), Account: p.Account, App: p.App, TradeNo: p.TradeNo,
		OutTradeNo: p.OutTradeNo, Amount: p.Amount.StringFixed(2), State: string(p.State),
		Reason: string(p.Reason), PaidAt: p.PaidAt,
	}, now)
}

// refundEvent is refund f's event of type typ; orderSN is its order's, if
// the caller has it at hand (a refund of an UNMATCHED payment has no
// order: OrderID 0).
func refundEvent(typ model.EventType, f model.Refund, orderSN string, now time.Time) (model.Event, error) {
	return newEvent(typ, f.OrderID, model.RefundEventData{
		OrderID: f.OrderID, OrderSN: orderSN, Provider: string(f.Provider), Account: f.Account, App: f.App, TradeNo: f.TradeNo,
		OutTradeNo: f.OutTradeNo, OutRequestNo: f.OutRequestNo, Kind: string(f.Kind),
		Amount: f.Amount.StringFixed(2), Reason: f.Reason,
	}, now)
}
