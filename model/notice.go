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
	// Refund is set on a refund's notice, RefundNo or not (a number that
	// is no id of ours is left out, and named in Dropped).
	Refund bool
	// Status is the provider's word for the trade's state, for the log.
	Status string
	// Dropped says, one line each, which reference fields the adapter
	// left out as unusable: the notice is still taken; the notify path
	// logs each as a warning.
	Dropped []string
}
