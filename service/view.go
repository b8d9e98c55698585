package service

import (
	"time"

	"paynotify/model"
)

// OrderView is an order as the API shows it, and as a request's saved
// response replays it. Amounts are strings with two decimals.
type OrderView struct {
	OrderSN           string        `json:"order_sn"`
	Status            int           `json:"status"`
	StatusName        string        `json:"status_name"`
	PayAmount         string        `json:"pay_amount"`
	TotalAmount       string        `json:"total_amount"`
	CouponID          *int64        `json:"coupon_id,omitempty"`
	CouponAmount      string        `json:"coupon_amount"`
	Integration       int           `json:"integration"`
	IntegrationAmount string        `json:"integration_amount"`
	PaymentTime       *time.Time    `json:"payment_time,omitempty"`
	CreateTime        time.Time     `json:"create_time"`
	Items             []ItemView    `json:"items"`
	Payments          []PaymentView `json:"payments,omitempty"`
}

// ItemView is one line of an order.
type ItemView struct {
	SKUID    int64  `json:"sku_id"`
	Quantity int    `json:"quantity"`
	Price    string `json:"price"`
}

// PaymentView is one movement of money as the APIs show it: each of an
// order's payments (the member API) and a ledger row (the admin API).
type PaymentView struct {
	Provider string `json:"provider"`
	// Account and App took the money ("" for a payment recorded before
	// paynotify knew several: the provider's first account, its first app).
	Account    string `json:"account"`
	App        string `json:"app"`
	TradeNo    string `json:"trade_no"`
	OutTradeNo string `json:"out_trade_no"`
	Amount     string `json:"amount"`
	State      string `json:"state"`
	Reason     string `json:"reason,omitempty"`
	PaidAt     string `json:"paid_at,omitempty"`
}

// NewPaymentView is p as the APIs show it.
func NewPaymentView(p model.Payment) PaymentView {
	v := PaymentView{Provider: string(p.Provider), Account: p.Account, App: p.App, TradeNo: p.TradeNo, OutTradeNo: p.OutTradeNo,
		Amount: p.Amount.StringFixed(2), State: string(p.State), Reason: string(p.Reason)}
	if p.PaidAt != nil {
		v.PaidAt = p.PaidAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return v
}

func newOrderView(o model.Order, items []model.OrderItem, pays []model.Payment) OrderView {
	v := OrderView{
		OrderSN: o.OrderSN, Status: int(o.Status), StatusName: o.Status.String(),
		PayAmount: o.PayAmount.StringFixed(2), TotalAmount: o.TotalAmount.StringFixed(2),
		CouponID: o.CouponID, CouponAmount: o.CouponAmount.StringFixed(2),
		Integration: o.Integration, IntegrationAmount: o.IntegrationAmount.StringFixed(2),
		PaymentTime: o.PaymentTime, CreateTime: o.CreateTime.UTC(),
		Items: make([]ItemView, 0, len(items)),
	}
	for _, it := range items {
		v.Items = append(v.Items, ItemView{SKUID: it.SKUID, Quantity: it.Quantity, Price: it.Price.StringFixed(2)})
	}
	for _, p := range pays {
		v.Payments = append(v.Payments, NewPaymentView(p))
	}
	return v
}
