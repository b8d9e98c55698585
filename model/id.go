package model

import "strings"

// maxIDLen is the longest identifier any of our columns holds (trade_no,
// VARCHAR(128): twice the String(64) Alipay documents, so a longer trade
// number than promised still fits).
const maxIDLen = 128

// maxOutTradeNoLen is out_trade_no's documented length, String(64), and
// order_sn's column.
const maxOutTradeNoLen = 64

// ValidID reports whether s can name something of ours: an order_sn, an
// out_trade_no, Alipay's trade_no, a refund's out_request_no — 1 to 128
// visible ASCII characters without '&' or '='. The columns holding them
// are ASCII, so anything else names nothing here: it is refused where it
// enters (a 404 for a path, a refused notification) and never reaches a
// query, where MySQL would answer "Illegal mix of collations".
//
// No '&' or '=': the signed content joins "k=v" pairs with '&', so an
// identifier holding them could be a neighbouring field glued onto it.
// (A loop, not a regexp: every notification checks several.)
func ValidID(s string) bool {
	if len(s) > maxIDLen || !visibleASCII(s) {
		return false
	}
	return !strings.ContainsAny(s, "&=")
}

// visibleASCII reports whether s is one or more of '!' to '~'.
func visibleASCII(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// digits reports whether s is 1 to most ASCII digits.
func digits(s string, most int) bool {
	if s == "" || len(s) > most {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
