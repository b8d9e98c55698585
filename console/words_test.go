package console

import "testing"

// Enums in audit rows and refusals read as words; other capitals (a
// provider's error code, an id) stay as they are.
func TestWords(t *testing.T) {
	for in, want := range map[string]string{
		"REFUND_PENDING ALREADY_PAID":                         "owed back (order already paid)",
		"refund RP-1 is REFUNDING, not an unresolved failure": "refund RP-1 is refunding, not an unresolved failure",
		"UNMATCHED of 2026-11-30, open":                       "unmatched (no order) of 2026-11-30, open",
		"ACQ.SYSTEM_ERROR after 3 tries":                      "ACQ.SYSTEM_ERROR after 3 tries",
	} {
		if got := words(in); got != want {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
		}
	}
}
