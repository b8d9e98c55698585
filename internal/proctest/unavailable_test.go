package proctest_test

import (
	"testing"

	"paynotify/internal/proctest"
)

// A server a test needs is required in CI whatever CI says (CI=true,
// CI=1, CI=yes); elsewhere the test is skipped.
func TestUnavailableFailsUnderAnyCI(t *testing.T) {
	for _, tc := range []struct {
		ci   string
		want string
	}{
		{"", "skip"},
		{"true", "fail"},
		{"1", "fail"},
		{"yes", "fail"},
		{"woodpecker", "fail"},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			got := proctest.Verdict(t, func(tb testing.TB) { proctest.Unavailable(tb, "test-server", "it is not there") })
			if got != tc.want {
				t.Fatalf("CI=%q: the test was told to %s, want %s", tc.ci, got, tc.want)
			}
		})
	}
}
