package model

import (
	"time"

	"github.com/shopspring/decimal"
)

// OrderStatus is an order's life-cycle state, with the codes of the mall
// project this service replaces.
type OrderStatus int

// Order statuses. An order moves only forward: 0→1→2→3, or 0→4.
const (
	OrderAwaitingPayment OrderStatus = 0
	OrderPaid            OrderStatus = 1
	OrderShipped         OrderStatus = 2
	OrderCompleted       OrderStatus = 3
	OrderClosed          OrderStatus = 4
	OrderInvalid         OrderStatus = 5
)

// PayType says how an order was paid.
type PayType int

// Pay types.
const (
	PayTypeNone   PayType = 0
	PayTypeAlipay PayType = 1
	// PayTypeWechatpay is WeChat Pay.
	PayTypeWechatpay PayType = 2
)

// Order is a row of oms_order: what the buyer owes and whether it is paid.
type Order struct {
	ID          int64
	OrderSN     string
	MemberID    int64
	PayAmount   decimal.Decimal
	Status      OrderStatus
	PayType     PayType
	PaymentTime *time.Time
	// What placing the order spent, so a cancel gives back exactly that.
	TotalAmount       decimal.Decimal
	CouponID          *int64
	CouponAmount      decimal.Decimal
	Integration       int
	IntegrationAmount decimal.Decimal
	// StockReservation is the stock the order holds reserved (see
	// FormatReservation); empty for orders placed elsewhere.
	StockReservation string
	CreateTime       time.Time
	ModifyTime       time.Time
}

// OrderItem is a row of oms_order_item: one SKU of an order, at the price
// it was ordered at.
type OrderItem struct {
	SKUID    int64
	Quantity int
	Price    decimal.Decimal
	// Name is the SKU's product name, where a read asks for it
	// (OrderItemsNamed: the console's timeline).
	Name string
}

// String is the status as the API spells it.
func (s OrderStatus) String() string {
	switch s {
	case OrderAwaitingPayment:
		return "AWAITING_PAYMENT"
	case OrderPaid:
		return "PAID"
	case OrderShipped:
		return "SHIPPED"
	case OrderCompleted:
		return "COMPLETED"
	case OrderClosed:
		return "CLOSED"
	case OrderInvalid:
		return "INVALID"
	}
	return "UNKNOWN"
}
