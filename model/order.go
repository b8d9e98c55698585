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
	CreateTime  time.Time
	ModifyTime  time.Time
}
