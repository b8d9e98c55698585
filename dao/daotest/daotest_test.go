package daotest_test

import (
	"testing"

	"paynotify/dao/daotest"
	"paynotify/internal/proctest"
)

// Without TEST_MYSQL_DSN the MySQL half of a test is skipped on a laptop
// and fails in CI, whatever value the CI system gives CI.
func TestMissingMySQLFailsUnderAnyCI(t *testing.T) {
	t.Setenv("TEST_MYSQL_DSN", "")
	for _, tc := range []struct {
		ci   string
		want string
	}{
		{"", "skip"},
		{"true", "fail"},
		{"1", "fail"},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			if got := proctest.Verdict(t, func(tb testing.TB) { daotest.MySQLDatabase(tb) }); got != tc.want {
				t.Fatalf("CI=%q without TEST_MYSQL_DSN: the test was told to %q, want %q", tc.ci, got, tc.want)
			}
		})
	}
}
