package model

import (
	"regexp"
	"strings"
	"testing"
)

// The patterns ValidID, ParseAmount and ParseNotification's notify_id
// check were regexps; the loops that replaced them must accept exactly
// what these did.
var (
	idRegexp       = regexp.MustCompile(`^[\x21-\x25\x27-\x3c\x3e-\x7e]+$`)
	amountRegexp   = regexp.MustCompile(`^(0|[1-9][0-9]{0,15})(\.[0-9]{1,2})?$`) // the OpenAPI pattern, at most 16 digits
	notifyIDRegexp = regexp.MustCompile(`^[\x21-\x7e]+$`)
)

var patternCases = []string{
	"", " ", "a", "A-1_b.c:d", "a&b", "a=b", "a b", "a\n", "\na", "~!", "\x7f", "测试", "\xff",
	"0", "1", "100", "100.", ".5", "100.0", "100.00", "100.000", "1.2.3", "-1", "+1", "1e2",
	"1234567890123456", "12345678901234567", "1234567890123456.99", "0.01", "00.00", "1,00",
	strings.Repeat("x", 128), strings.Repeat("x", 129),
}

func TestPatternsAreTheRegexps(t *testing.T) {
	for _, s := range patternCases {
		checkPatterns(t, s)
	}
}

func FuzzPatterns(f *testing.F) {
	for _, s := range patternCases {
		f.Add(s)
	}
	f.Fuzz(checkPatterns)
}

func checkPatterns(t *testing.T, s string) {
	if got, want := ValidID(s), len(s) <= maxIDLen && idRegexp.MatchString(s); got != want {
		t.Errorf("ValidID(%q) = %v, regexp says %v", s, got, want)
	}
	if got, want := isAmount(s), amountRegexp.MatchString(s); got != want {
		t.Errorf("isAmount(%q) = %v, regexp says %v", s, got, want)
	}
	if got, want := VisibleASCII(s), notifyIDRegexp.MatchString(s); got != want {
		t.Errorf("VisibleASCII(%q) = %v, regexp says %v", s, got, want)
	}
}
