package model

import (
	"fmt"
	"unicode/utf8"
)

// MaxNote is the longest note an operator may leave on an action (a
// resolution, a retry, a refund's reason is shorter still:
// MaxRefundReason), in characters: admin_audit.note, oms_refund.resolution
// and refund_change.note are VARCHAR(500), so the note an item keeps and
// the one admin_audit keeps are the same whole note. The console and the
// admin API refuse a longer one (CheckNote) before anything is written.
const MaxNote = 500

// CheckNote refuses a note longer than MaxNote characters, saying so.
func CheckNote(note string) error {
	if n := utf8.RuneCountInString(note); n > MaxNote {
		return fmt.Errorf("%w: the note is %d characters long; at most %d", ErrInvalidRequest, n, MaxNote)
	}
	return nil
}
