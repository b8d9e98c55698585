package main

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"testing"
	"time"
)

// burn spins for d of this goroutine's time, so the profiler samples it.
//
//go:noinline
func burn(d time.Duration) (n int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 1000 {
			n += i
		}
	}
	return n
}

// TestReadCPUProfile reads a real CPU profile written by runtime/pprof
// and finds the function that burnt the CPU on the stacks, with every
// sample's time adding up to the total.
func TestReadCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	burn(500 * time.Millisecond)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	p, err := readCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sum, inBurn int64
	for _, s := range p.samples {
		sum += s.ns
		if slices.Contains(s.frames, "paynotify/bench.burn") {
			inBurn += s.ns
		}
	}
	if p.total == 0 || sum != p.total {
		t.Fatalf("total %d ns, samples add up to %d", p.total, sum)
	}
	if inBurn == 0 {
		t.Fatalf("no sample has burn on its stack; flat: %v", p.flat(5))
	}
	if got := p.cumulative("paynotify/bench.burn"); got != inBurn {
		t.Errorf("cumulative(burn) = %d, want %d", got, inBurn)
	}
}

// TestReadCPUProfileRefusesOtherProfiles: an allocation profile has no
// CPU time to report.
func TestReadCPUProfileRefusesOtherProfiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allocs.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readCPUProfile(path); err == nil {
		t.Fatal("read an allocation profile as a CPU profile")
	}
}
