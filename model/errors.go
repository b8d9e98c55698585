package model

import (
	"errors"
	"fmt"
)

// Domain errors. The dao turns driver errors into these; the handler maps
// them to answers through one table.
var (
	// ErrBadSignature: the notification is not signed by its provider's
	// key (Alipay's RSA2, WeChat Pay's SHA256-RSA, …).
	ErrBadSignature = errors.New("bad signature")
	// ErrSignatureProbe: a provider's probe of whether we verify (WeChat
	// Pay's WECHATPAY/SIGNTEST/ signatures): refused as a bad signature,
	// but no notification, so never counted as one to be sent again.
	ErrSignatureProbe = fmt.Errorf("%w: a signature probe", ErrBadSignature)
	// ErrWrongMerchant: validly signed, but for another app or seller.
	ErrWrongMerchant = errors.New("notification for another merchant")
	// ErrUnknownApp: validly signed (or opened) for an app or merchant
	// this instance is not configured for. It is an ErrWrongMerchant.
	ErrUnknownApp = fmt.Errorf("%w: app not configured", ErrWrongMerchant)
	// ErrConfigRefused: a reload found the providers' configuration (a
	// file, a key) unusable and changed nothing; the text says why.
	ErrConfigRefused = errors.New("configuration refused, nothing changed")
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
	// ErrProviderOff: a provider this instance is not configured for (its
	// variables are not set).
	ErrProviderOff = errors.New("provider not configured")
	// ErrUnavailable: the database did not answer in time, or answered that
	// it cannot serve now (a Galera node not in the Primary component,
	// read-only, shutting down).
	ErrUnavailable = errors.New("database unavailable")
	// ErrBusy: the notify queue is full; Alipay resends later.
	ErrBusy = errors.New("too many notifications waiting")
)

// NotReadyError is ErrUnavailable as the readiness check found it: the
// database answers, but what it said of itself (a Galera node that is not
// Synced, a read-only server) means it cannot serve now. Reason is in our
// words, safe to show a load balancer or an operator.
type NotReadyError struct{ Reason string }

func (e *NotReadyError) Error() string { return ErrUnavailable.Error() + ": " + e.Reason }

// Unwrap makes a NotReadyError an ErrUnavailable.
func (e *NotReadyError) Unwrap() error { return ErrUnavailable }

// ErrPaymentNotFound: no payment is recorded under that trade.
var ErrPaymentNotFound = errors.New("payment not found")

// ErrStateChanged: a compare-and-set found the row no longer in the state
// it expected. Under the order lock this means a bug, never a race.
var ErrStateChanged = errors.New("state changed under compare-and-set")

// Errors of placing and cancelling orders.
var (
	// ErrInvalidRequest: the client's request is malformed.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrIdempotencyKeyReused: the key was used before for another request.
	ErrIdempotencyKeyReused = errors.New("idempotency key already used for a different request")
	// ErrRequestInFlight: the first request with this key has not finished.
	ErrRequestInFlight = errors.New("a request with this idempotency key is still in progress")
	// ErrSKUNotFound: an ordered SKU does not exist.
	ErrSKUNotFound = errors.New("sku not found")
	// ErrOutOfStock: not enough unreserved stock.
	ErrOutOfStock = errors.New("out of stock")
	// ErrCouponUnusable: the coupon is not the member's, or already used.
	ErrCouponUnusable = errors.New("coupon not usable")
	// ErrInsufficientPoints: the member has fewer points than asked to use.
	ErrInsufficientPoints = errors.New("not enough points")
	// ErrMemberNotFound: the token's member does not exist.
	ErrMemberNotFound = errors.New("member not found")
	// ErrOrderNotCancellable: the order is paid (or beyond); it cannot be
	// cancelled, only refunded.
	ErrOrderNotCancellable = errors.New("order is paid and cannot be cancelled")
)

// ErrRequestNotFound: no request is recorded under that key.
var ErrRequestNotFound = errors.New("request not found")
