package model

import "strings"

// maxIDLen is the longest identifier any of our columns holds (trade_no,
// VARCHAR(128): twice the String(64) Alipay documents, so a longer trade
// number than promised still fits).
const maxIDLen = 128

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
	if len(s) > maxIDLen || !VisibleASCII(s) {
		return false
	}
	return !strings.ContainsAny(s, "&=")
}

// MaxRefLen is the longest out_trade_no or out_request_no the ledger
// records: Alipay documents both as String(64), and their columns hold 64.
// (trade_no's holds 128, maxIDLen.)
const MaxRefLen = 64

// Recordable reports whether s may name money the ledger records on a
// provider's word (a trade_no, out_trade_no or out_request_no from a
// notification, a query or a bill): at most max characters (128 for a
// trade_no, MaxRefLen for the others), each a letter, a digit, '-', '_',
// '.' or ':'. Whatever is recorded must be reachable
// again as itself — in /admin/payments/{trade_no}/refund, in the console's
// links, in a spreadsheet — so a space, '&', '=', '|', '/', '%', '#', a
// quote or a control byte is refused where it enters, with the reason,
// never recorded as money nobody can return.
func Recordable(s string, max int) bool {
	if s == "" || len(s) > max || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// MaxTradeNoLen is the longest trade_no the ledger records: its column's
// 128, twice what Alipay documents.
const MaxTradeNoLen = maxIDLen

// VisibleASCII reports whether s is one or more of '!' to '~'.
func VisibleASCII(s string) bool {
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
