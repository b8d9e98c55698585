package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Beijing is the zone of every time a provider sends and of a bill's day
// (China has no DST).
var Beijing = time.FixedZone("CST", 8*60*60)

// AmountPattern is isAmount's rule as a regular expression (anchored
// whole, as an HTML input's pattern attribute is): the console's refund
// form gives it to the browser, so what the browser lets through is what
// ParseAmount reads (zero and amounts past MaxAmount aside).
const AmountPattern = `(0|[1-9][0-9]{0,15})(\.[0-9]{1,2})?`

// isAmount: 1 to 16 digits without a leading zero (but "0.50"), then at
// most 2 decimals after a dot (fits DECIMAL(18,2)): the OpenAPI document's
// '^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$'. No sign, no exponent. ParseAmount
// refuses zero.
func isAmount(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	return digits(whole, 16) && (whole == "0" || whole[0] != '0') && (!dot || digits(frac, 2))
}

// MaxRefundReason is the longest reason a refund may carry, in characters:
// its column is VARCHAR(200).
const MaxRefundReason = 200

// EarliestPayment is before any payment a provider can report (Alipay,
// the older, opened in December 2004).
var EarliestPayment = time.Date(2004, 1, 1, 0, 0, 0, 0, Beijing)

// ParseAmount parses a yuan amount as providers and requests write it
// ("100.00"), never through a float, and holds it to CheckAmount:
// positive, at most two decimals, at most MaxAmount.
func ParseAmount(s string) (decimal.Decimal, error) {
	if !isAmount(s) {
		return decimal.Decimal{}, fmt.Errorf("%q is not an amount with at most 2 decimals", Clip(s))
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, err
	}
	if err := CheckAmount(d); err != nil {
		return decimal.Decimal{}, err
	}
	return d, nil
}
