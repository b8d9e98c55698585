package model

import "errors"

// Domain errors. The dao turns driver errors into these; the handler maps
// them to answers through one table.
var (
	// ErrBadSignature: the notification is not signed by Alipay with RSA2.
	ErrBadSignature = errors.New("bad signature")
	// ErrWrongMerchant: validly signed, but for another app or seller.
	ErrWrongMerchant = errors.New("notification for another merchant")
	// ErrInvalidNotification: a field is missing or malformed.
	ErrInvalidNotification = errors.New("invalid notification")
	// ErrOrderNotFound: no order has that order_sn.
	ErrOrderNotFound = errors.New("order not found")
	// ErrTradeConflict: the trade_no is already recorded for another order
	// or another amount. Alipay never does this; it is an anomaly.
	ErrTradeConflict = errors.New("trade already bound to another order or amount")
	// ErrRetryable: a deadlock or lock-wait timeout; the transaction was
	// rolled back and may be run again.
	ErrRetryable = errors.New("transaction conflict, retry")
	// ErrUnavailable: the database did not answer in time.
	ErrUnavailable = errors.New("database unavailable")
)

// ErrPaymentNotFound: no payment is recorded under that trade.
var ErrPaymentNotFound = errors.New("payment not found")

// ErrStateChanged: a compare-and-set found the row no longer in the state
// it expected. Under the order lock this means a bug, never a race.
var ErrStateChanged = errors.New("state changed under compare-and-set")
