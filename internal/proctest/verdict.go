package proctest

import (
	"runtime"
	"testing"
)

// Verdict runs check with a recording testing.TB and says what check told
// the test: "fail", "skip", or "" (go on). It is for testing helpers that
// decide whether a test may run.
func Verdict(t *testing.T, check func(tb testing.TB)) string {
	t.Helper()
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return rec.verdict
}

// recorder is a testing.TB that notes a Fatal or a Skip and stops the
// goroutine there, as the real ones do, instead of ending the test.
type recorder struct {
	testing.TB
	verdict string
}

func (r *recorder) Helper()                       {}
func (r *recorder) Fatal(args ...any)             { r.stop("fail") }
func (r *recorder) Fatalf(string, ...any)         { r.stop("fail") }
func (r *recorder) Skip(args ...any)              { r.stop("skip") }
func (r *recorder) Skipf(format string, _ ...any) { r.stop("skip") }
func (r *recorder) stop(v string)                 { r.verdict = v; runtime.Goexit() }
