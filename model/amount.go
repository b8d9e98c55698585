package model

import (
	"fmt"

	"github.com/shopspring/decimal"
)

// MaxAmount is the most one payment, one refund or one line of a bill may
// move: 100,000,000.00 yuan, the most Alipay documents for one trade's
// total_amount ([0.01, 100000000]). WeChat Pay documents no higher one for
// a payment (its limits per merchant and per buyer are far lower), and
// every amount column (DECIMAL(18,2)) holds a hundred million times more,
// so an amount within it always fits, on MariaDB and SQLite alike.
var MaxAmount = decimal.New(1, 8)

// CheckAmount is the one rule for an amount of money entering the ledger
// from outside — a notification, a provider's answer to a query, a refund
// asked for or reported, a bill line: positive, at most two decimals, at
// most MaxAmount. Anything else is refused where it enters, before
// anything is written. The error says why, without a sentinel: callers
// wrap it in theirs.
func CheckAmount(d decimal.Decimal) error {
	switch {
	case !d.IsPositive():
		return fmt.Errorf("amount %s is not positive", Clip(d.String()))
	case !d.Equal(d.Round(2)):
		return fmt.Errorf("amount %s has more than two decimals", Clip(d.String()))
	case d.GreaterThan(MaxAmount):
		return fmt.Errorf("amount %s is over %s, the most one payment may be", Clip(d.String()), MaxAmount.StringFixed(2))
	}
	return nil
}

// checkRef refuses an identifier the ledger cannot record (Recordable, at
// most max characters), naming it.
func checkRef(name, s string, max int) error {
	if !Recordable(s, max) {
		return fmt.Errorf("%s %q: at most %d letters, digits, '-', '_', '.', ':'", name, Clip(s), max)
	}
	return nil
}
