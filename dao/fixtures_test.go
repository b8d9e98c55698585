package dao

import (
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

var fixedTime = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

var testPayment = model.Payment{
	Provider: model.ProviderAlipay, TradeNo: "T", OrderID: 1, OutTradeNo: "X",
	Amount: decimal.RequireFromString("1.00"), State: model.PaymentApplied, PaidAt: &fixedTime,
}
