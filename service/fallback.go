package service

import (
	"errors"

	"paynotify/model"
)

// Fallback says why a notification that met group apply was not applied
// in a group transaction: it ran alone on today's path (observeOne), or
// was refused. Payments.OnFallback is told of each, for the metric.
type Fallback uint8

// Why a notification fell back. Fallbacks lists them all.
const (
	// FallbackDuplicateInGroup: two notices of one trade in one group.
	FallbackDuplicateInGroup Fallback = iota
	// FallbackTwoTradesOneOrder: two trades of one order in one group.
	FallbackTwoTradesOneOrder
	// FallbackNotEligible: not a first notice of an order awaiting payment
	// at its amount (no such order, paid already, amount differs: what
	// observeOne records UNMATCHED or REFUND_PENDING).
	FallbackNotEligible
	// FallbackAlone: the only member of its group left to apply.
	FallbackAlone
	// FallbackRecordedMeanwhile: a trade of the group was recorded by
	// another transaction between the lookup and the insert.
	FallbackRecordedMeanwhile
	// FallbackLockWait: the group transaction hit a deadlock or a
	// lock-wait timeout (model.ErrRetryable).
	FallbackLockWait
	// FallbackError: any other error of the group, or a panic.
	FallbackError
	// FallbackNearDeadline: too little time left to wait for a group.
	FallbackNearDeadline
	// FallbackExpired: its deadline passed while it waited in the queue;
	// answered failure (Alipay resends).
	FallbackExpired
	// FallbackBusy: the queue was full; answered failure (model.ErrBusy).
	FallbackBusy

	fallbacks // how many there are
)

var fallbackNames = [fallbacks]string{
	FallbackDuplicateInGroup:  "duplicate_in_group",
	FallbackTwoTradesOneOrder: "two_trades_one_order",
	FallbackNotEligible:       "not_eligible",
	FallbackAlone:             "alone",
	FallbackRecordedMeanwhile: "recorded_meanwhile",
	FallbackLockWait:          "lock_wait",
	FallbackError:             "error",
	FallbackNearDeadline:      "near_deadline",
	FallbackExpired:           "expired",
	FallbackBusy:              "busy",
}

// String is the reason's metric label.
func (f Fallback) String() string {
	if f < fallbacks {
		return fallbackNames[f]
	}
	return "unknown"
}

// Fallbacks lists every reason, in order: f's index is int(f).
func Fallbacks() []Fallback {
	all := make([]Fallback, fallbacks)
	for i := range all {
		all[i] = Fallback(i)
	}
	return all
}

// fallbackFor is why a group that failed with err sends its members alone.
func fallbackFor(err error) Fallback {
	switch {
	case errors.Is(err, errRegroup):
		return FallbackRecordedMeanwhile
	case errors.Is(err, model.ErrRetryable):
		return FallbackLockWait
	}
	return FallbackError
}

// fellBack tells OnFallback, if set, that a notification fell back.
func (p *Payments) fellBack(f Fallback) {
	if p.OnFallback != nil {
		p.OnFallback(f)
	}
}
