package model

import (
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// Observation is a payment a provider says it took, in the ledger's terms:
// the one way into the ledger (service.Payments.Observe). Each provider's
// adapter builds it only after its own checks — a notification's
// signature and fields, a signed query answer, a line of the provider's
// own bill — so nothing here is about how it was learnt except Ref.
type Observation struct {
	Provider Provider
	// TradeNo is the provider's number of the payment: the ledger's key
	// with Provider (Alipay's trade_no, WeChat Pay's transaction_id).
	TradeNo string
	// OutTradeNo is ours: the order_sn, or a later attempt's out_trade_no.
	OutTradeNo string
	// Amount is what the buyer paid, in yuan.
	Amount decimal.Decimal
	// PaidAt is when the buyer paid, in UTC; nil if the provider did not
	// say (the ledger then records when it was observed).
	PaidAt *time.Time
	// Ref says where the observation came from, kept for reference only:
	// a notification's id, QueryRef, or BillRef.
	Ref string
	// Account and App are the provider account (Alipay's seller_id, WeChat
	// Pay's mchid) and app (Alipay's app_id, WeChat Pay's appid) that took
	// the money, recorded with the payment: a notification names them, a
	// query takes its attempt's. Empty when unknown (a bill line): the
	// provider's first account, its first app.
	Account, App string
	// Status is the provider's word for the trade's state (Alipay's
	// trade_status, WeChat Pay's trade_state), kept for no row. A duplicate
	// is answered from memory only for a notification that names the same
	// app and status as the one recorded (service.DuplicateCache); empty
	// when not learnt from a notification.
	Status string
}

// QueryRef is the Ref of a payment an active query found.
func QueryRef(tradeNo string) string { return "query:" + tradeNo }

// BillRef is the Ref of a payment found in the bill of a Beijing day
// (yyyy-MM-dd) and missing from the ledger.
func BillRef(date string) string { return "recon-" + date }

// Check refuses an observation the ledger cannot take: an unknown
// provider, identifiers that are not Recordable (an operator could never
// name the payment again to refund it), or an amount CheckAmount refuses
// (not positive, more than two decimals, over MaxAmount). Errors wrap
// ErrInvalidNotification.
func (o Observation) Check() error {
	if o.Provider.PayType() == PayTypeNone {
		return fmt.Errorf("%w: provider %q", ErrInvalidNotification, Clip(string(o.Provider)))
	}
	if err := checkRef("out_trade_no", o.OutTradeNo, MaxRefLen); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidNotification, err)
	}
	if err := checkRef("trade_no", o.TradeNo, MaxTradeNoLen); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidNotification, err)
	}
	if err := CheckAmount(o.Amount); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidNotification, err)
	}
	return nil
}

// Observation is a trade a query of attempt a found paid, as the ledger
// takes it: in a's account and app, which were asked.
func (t Trade) Observation(a PayAttempt) Observation {
	return Observation{Provider: t.Provider, Account: a.Account, App: a.App, TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo,
		Amount: t.Amount, PaidAt: t.PaidAt, Ref: QueryRef(t.TradeNo)}
}
