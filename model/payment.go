package model

import (
	"time"

	"github.com/shopspring/decimal"
)

// ClearingAccount is the journal account of the money p holds for us
// in account (alipay_clearing, wechatpay_clearing): "" is the provider's
// first account — as the ledger's "" is — and any other account is a
// sub-account, "wechatpay_clearing:1900054321". An event written before
// events carried a provider is DefaultProvider's.
func ClearingAccount(p Provider, account string) string {
	if account == "" {
		return string(p.OrDefault()) + "_clearing"
	}
	return string(p.OrDefault()) + "_clearing:" + account
}

// PaymentState is where a real movement of money stands.
type PaymentState string

// Payment states.
const (
	// PaymentReceived: recorded, not yet decided. The notify path decides
	// under the order lock before it inserts, so it never commits this state.
	PaymentReceived PaymentState = "RECEIVED"
	// PaymentApplied: this payment paid its order.
	PaymentApplied PaymentState = "APPLIED"
	// PaymentRefundPending: the money could not be applied (order closed,
	// paid by another trade, or a different amount) and is owed back.
	PaymentRefundPending PaymentState = "REFUND_PENDING"
)

// RefundReason says why a payment could not be applied.
type RefundReason string

// Refund reasons, stored with a REFUND_PENDING payment.
const (
	RefundNone           RefundReason = ""
	RefundOrderClosed    RefundReason = "ORDER_CLOSED"
	RefundAlreadyPaid    RefundReason = "ALREADY_PAID"
	RefundAmountMismatch RefundReason = "AMOUNT_MISMATCH"
)

// Payment is a row of oms_order_payment: one real movement of money,
// identified by (Provider, TradeNo).
type Payment struct {
	Provider Provider
	// Account and App are the provider account (Alipay's seller_id, WeChat
	// Pay's mchid) and app (Alipay's app_id, WeChat Pay's appid) that took
	// the money: its refunds go through them. Empty in a row written
	// before paynotify knew several: the provider's first account, its
	// first app (see Accounts.Default).
	Account, App string
	TradeNo      string
	OrderID      int64
	OutTradeNo   string
	Amount       decimal.Decimal
	State        PaymentState
	Reason       RefundReason
	NotifyID     string
	PaidAt       *time.Time
	CreateTime   time.Time
	UpdateTime   time.Time
}
