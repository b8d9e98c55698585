package service

import (
	"strings"
	"time"
	"unique"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/shopspring/decimal"

	"paynotify/model"
)

// DefaultDuplicateCacheSize is how many recorded trades an instance
// remembers to answer their duplicates without the database
// (NOTIFY_DUPLICATE_CACHE): about 380 bytes of heap each, some 36 MiB
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
// with what the answer's payment is made of (as this instance recorded or
// read it: its state may have moved on since, which the answer does not
// depend on). It is kept lean, for the heap and for the collector: its
// strings are its own (an observation's are slices of the request body
// they came in, handler.parseQuery) and the few apps, statuses, accounts,
// states and reasons are interned. The answer leaves out what no caller
// of a duplicate reads: the notify_id and the row's own times.
type seenTrade struct {
	app, status unique.Handle[string] // the notification's
	outTradeNo  string
	amount      decimal.Decimal
	// The payment's own account and app: an attempt's, which may differ
	// from what the notification named (Payments.attributed).
	account, payApp unique.Handle[string]
	state           unique.Handle[string]
	reason          unique.Handle[string]
	orderID         int64
	paidAt          time.Time // zero: none
}

// payment is the payment t answers with, for trade key.
func (t seenTrade) payment(key ledgerKey) model.Payment {
	pay := model.Payment{Provider: key.provider, TradeNo: key.tradeNo, Account: t.account.Value(), OrderID: t.orderID,
		OutTradeNo: t.outTradeNo, Amount: t.amount, State: model.PaymentState(t.state.Value()),
		Reason: model.RefundReason(t.reason.Value()), App: t.payApp.Value()}
	if !t.paidAt.IsZero() {
		at := t.paidAt
		pay.PaidAt = &at
	}
	return pay
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
	key := ledgerKey{n.Provider, n.TradeNo}
	t, ok := s.trades.Get(key)
	if !ok || t.app.Value() != n.App || t.status.Value() != n.Status {
		return model.Payment{}, false
	}
	pay := t.payment(key)
	if !pay.SameTrade(n.OutTradeNo, n.Amount) {
		return model.Payment{}, false
	}
	return pay, true
}

// add remembers pay, committed for n (the observation it was recorded or
// found for), unless they disagree on the trade: then n was no duplicate
// of pay, and nothing is learnt.
func (s *seen) add(n model.Observation, pay model.Payment) {
	if s == nil || pay.Provider != n.Provider || pay.TradeNo != n.TradeNo || !pay.SameTrade(n.OutTradeNo, n.Amount) {
		return
	}
	t := seenTrade{app: unique.Make(n.App), status: unique.Make(n.Status), outTradeNo: strings.Clone(pay.OutTradeNo),
		amount: pay.Amount, account: unique.Make(pay.Account), payApp: unique.Make(pay.App), state: unique.Make(string(pay.State)),
		reason: unique.Make(string(pay.Reason)), orderID: pay.OrderID}
	if pay.PaidAt != nil {
		t.paidAt = *pay.PaidAt
	}
	s.trades.Add(ledgerKey{pay.Provider, strings.Clone(pay.TradeNo)}, t)
}
