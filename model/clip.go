package model

import "unicode/utf8"

// clipAt is how many bytes of what a client sent an error message (or a
// log line) quotes.
const clipAt = 80

// Clip keeps an error message (or a log line) short whatever a client
// sends: at most 80 bytes of s, never a split character, "…" marking a
// cut.
func Clip(s string) string {
	if len(s) <= clipAt {
		return s
	}
	return Truncate(s, clipAt) + "…"
}

// Truncate keeps at most n bytes of s, never splitting a character: for a
// column that holds n bytes.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // never split a character: a note may be Chinese
	}
	return s[:n]
}

// TruncateChars keeps at most n characters of s: for a column that holds
// n characters (MySQL's VARCHAR(n) in utf8mb4), where n bytes would cut a
// Chinese note the column holds whole.
func TruncateChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
