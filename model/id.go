package model

import "regexp"

// maxIDLen is the longest identifier any of our columns holds (trade_no,
// VARCHAR(128): twice the String(64) Alipay documents, so a longer trade
// number than promised still fits).
const maxIDLen = 128

// maxOutTradeNoLen is out_trade_no's documented length, String(64), and
// order_sn's column.
const maxOutTradeNoLen = 64

// idPattern: visible ASCII, but no '&' or '=': the signed content joins
// "k=v" pairs with '&', so an identifier holding them could be a
// neighbouring field glued onto it.
var idPattern = regexp.MustCompile(`^[\x21-\x25\x27-\x3c\x3e-\x7e]+$`)

// ValidID reports whether s can name something of ours: an order_sn, an
// out_trade_no, Alipay's trade_no, a refund's out_request_no — 1 to 128
// visible ASCII characters without '&' or '='. The columns holding them
// are ASCII, so anything else names nothing here: it is refused where it
// enters (a 404 for a path, a refused notification) and never reaches a
// query, where MySQL would answer "Illegal mix of collations".
func ValidID(s string) bool { return len(s) <= maxIDLen && idPattern.MatchString(s) }
