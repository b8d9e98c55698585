// Package racetest runs a race with two legal outcomes until both have
// happened: a race test that only ever sees one side has not raced.
package racetest

import "testing"

// MaxRounds bounds how many rounds BothWays runs to see both outcomes. A
// round usually shows both; a side still missing after this many has not
// raced at all.
const MaxRounds = 20

// BothWays runs rounds of a race that has two legal outcomes until both
// have happened, and fails the test if one never does. round(t, r) runs
// round r (fresh rows, names made with r), checks the invariant of every
// case it raced, and says how many ended each way. It stops at the first
// round that failed.
func BothWays(t *testing.T, first, second string, round func(t *testing.T, r int) (firstN, secondN int)) {
	t.Helper()
	var a, b int
	for r := range MaxRounds {
		x, y := round(t, r)
		a, b = a+x, b+y
		if t.Failed() {
			return
		}
		if a > 0 && b > 0 {
			t.Logf("%d %s, %d %s in %d round(s)", a, first, b, second, r+1)
			return
		}
	}
	t.Fatalf("after %d rounds: %d %s, %d %s; one legal outcome never happened, so the race was never run",
		MaxRounds, a, first, b, second)
}
