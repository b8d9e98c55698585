package galeratest

import (
	"testing"

	"paynotify/internal/proctest"
)

// Without rsync (or Galera) the cluster tests skip on a laptop and fail
// in CI, where .ci/run installs them.
func TestMissingRsyncFailsUnderCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no rsync, no wsrep_sst_rsync
	for _, tc := range []struct{ ci, want string }{{"", "skip"}, {"true", "fail"}} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			if got := proctest.Verdict(t, checkInstalled); got != tc.want {
				t.Fatalf("CI=%q without rsync: the test was told to %q, want %q", tc.ci, got, tc.want)
			}
		})
	}
}
