package dao

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"paynotify/model"
)

// A server that answers it cannot serve now is the database being
// unavailable (an outage: failure to Alipay, 503), whatever the
// statement; a server that refuses the statement itself is not. The
// cluster tests produce 1047 for real (galera_test.go); the others need a
// server switched read-only or shutting down, which no test may do to the
// shared one.
func TestServerAnswersThatMeanUnavailable(t *testing.T) {
	for _, tc := range []struct {
		number      uint16
		unavailable bool
	}{
		{1047, true}, // Galera: node not in the Primary component
		{1040, true},
		{1053, true},
		{1290, true},
		{1836, true},
		{1927, true},
		{1062, false}, // duplicate key
		{1213, false}, // deadlock: retryable, not unavailable
		{1064, false}, // syntax error: a bug
	} {
		t.Run(fmt.Sprint(tc.number), func(t *testing.T) {
			err := mapErr(fmt.Errorf("exec: %w", &mysql.MySQLError{Number: tc.number, Message: "x"}))
			if got := errors.Is(err, model.ErrUnavailable); got != tc.unavailable {
				t.Fatalf("error %d mapped to %v: unavailable %v, want %v", tc.number, err, got, tc.unavailable)
			}
		})
	}
}
