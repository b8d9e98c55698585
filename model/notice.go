package model

// Notice is a provider's notification once its adapter has verified it,
// in the ledger's terms: a payment (Payment.TradeNo set), or a refund's
// outcome (RefundNo, our out_request_no), which only hurries the refund
// worker's query and is never taken for a payment.
type Notice struct {
	// ID is the notification's own id (kept as the payment's Ref).
	ID       string
	Payment  Observation
	RefundNo string
}
