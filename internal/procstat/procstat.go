// Package procstat reads what the running process has used — its peak
// resident set size (VmHWM) and its CPU time — for benchmarks that report
// the memory and the CPU a run took on a shared machine.
package procstat

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ResetPeakRSS resets the process's peak RSS to its current RSS (Linux's
// /proc/self/clear_refs); where it cannot, it says so in the log and the
// peak includes what came before.
func ResetPeakRSS(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Logf("cannot reset the peak RSS (%v): it includes what ran before", err)
	}
}

// PeakRSS is the process's peak RSS (VmHWM) in bytes.
func PeakRSS(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// CPUTime is the CPU time the process has used, user and system: on a
// shared machine, what a run cost apart from what others took meanwhile.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
