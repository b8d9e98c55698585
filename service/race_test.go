package service_test

import (
	"testing"

	"paynotify/internal/racetest"
)

// maxRaceRounds bounds how many rounds raceBothWays runs.
const maxRaceRounds = racetest.MaxRounds

// raceBothWays runs rounds of a race that has two legal outcomes until
// both have happened (racetest.BothWays).
func raceBothWays(t *testing.T, first, second string, round func(t *testing.T, r int) (firstN, secondN int)) {
	t.Helper()
	racetest.BothWays(t, first, second, round)
}
