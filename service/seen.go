package service

import (
	"strings"
	"unique"

	lru "github.com/hashicorp/golang-lru/v2"

	"paynotify/model"
)

// DefaultDuplicateCacheSize is how many recorded trades an instance
// remembers to answer their duplicates without the database
// (NOTIFY_DUPLICATE_CACHE): about 500 bytes of heap each, some 50 MiB
// when full (TestSeenEntrySize).
const DefaultDuplicateCacheSize = 100_000

// seen remembers trades this instance saw committed to the ledger, so that
// a duplicate of one — a provider's resend, Alipay's TRADE_FINISHED after
// TRADE_SUCCESS is not one: its status differs — is answered from memory.
//
// It cannot answer wrongly: a committed payment never leaves the ledger
// and its out_trade_no and amount never change, so for an observation
// that names the same trade, out_trade_no and amount (and app and status,
// which the ledger does not even compare) the database would answer the
// same duplicate (see duplicate). Anything that differs in any of them goes
// the full path, where the database decides. Only what a committed
// transaction wrote, or a committed row read back, is added. Several
// instances each keep their own; the cache is a pure optimisation.
type seen struct {
	trades *lru.Cache[ledgerKey, seenTrade]
}

// seenTrade is what a duplicate must match to be answered from memory,
// with the payment to answer it with (as this instance recorded or read
// it: its state may have moved on since, which the answer does not
// depend on).
type seenTrade struct {
	app, status string
	pay         model.Payment
}

// newSeen is a cache of size trades; nil (no cache) if size < 1.
func newSeen(size int) *seen {
	if size < 1 {
		return nil
	}
	c, err := lru.New[ledgerKey, seenTrade](size)
	if err != nil {
		panic(err) // only for size < 1
	}
	return &seen{trades: c}
}

// answer is the duplicate answer to n if it matches a trade seen
// committed in every field that could make the database answer otherwise.
func (s *seen) answer(n model.Observation) (model.Payment, bool) {
	if s == nil {
		return model.Payment{}, false
	}
	t, ok := s.trades.Get(ledgerKey{n.Provider, n.TradeNo})
	if !ok || t.app != n.App || t.status != n.Status || !t.pay.SameTrade(n.OutTradeNo, n.Amount) {
		return model.Payment{}, false
	}
	return t.pay, true
}

// add remembers pay, committed for n (the observation it was recorded or
// found for), unless they disagree on the trade: then n was no duplicate
// of pay, and nothing is learnt.
func (s *seen) add(n model.Observation, pay model.Payment) {
	if s == nil || pay.Provider != n.Provider || pay.TradeNo != n.TradeNo || !pay.SameTrade(n.OutTradeNo, n.Amount) {
		return
	}
	pay = detached(pay)
	s.trades.Add(ledgerKey{pay.Provider, pay.TradeNo}, seenTrade{app: intern(n.App), status: intern(n.Status), pay: pay})
}

// detached is pay holding no memory of anyone else's: an observation's
// strings are slices of the request body they came in (handler.parseQuery
// slices them out of it), and an entry kept for hours must not keep a
// whole notification alive. Each trade's own strings are copied; the few
// providers, accounts, apps, states and reasons are interned.
func detached(pay model.Payment) model.Payment {
	pay.Provider = model.Provider(intern(string(pay.Provider)))
	pay.Account, pay.App = intern(pay.Account), intern(pay.App)
	pay.State, pay.Reason = model.PaymentState(intern(string(pay.State))), model.RefundReason(intern(string(pay.Reason)))
	pay.TradeNo, pay.OutTradeNo, pay.NotifyID = strings.Clone(pay.TradeNo), strings.Clone(pay.OutTradeNo), strings.Clone(pay.NotifyID)
	if pay.PaidAt != nil {
		at := *pay.PaidAt
		pay.PaidAt = &at
	}
	return pay
}

// intern is s's one canonical copy.
func intern(s string) string { return unique.Make(s).Value() }
