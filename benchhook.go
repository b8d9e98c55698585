//go:build benchhook

// This file is compiled only into the load tool's profiling build
// (`go build -tags benchhook`, see bench/profile.go); the shipped binary
// and the tool's measured binary are built without it. It adds a control
// listener on loopback that starts and stops the CPU profiler, so the
// tool can profile exactly the measured part of a run. CI vets it with
// `go vet -tags benchhook .`.

package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

// benchHookEnv names the address the control listener takes; the hook
// does nothing when it is unset.
const benchHookEnv = "PAYNOTIFY_BENCH_CONTROL_ADDR"

// init is the one way to add behaviour to package main without touching
// main.go, and this file exists only in the profiling build.
func init() {
	addr := os.Getenv(benchHookEnv)
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench profile hook:", err)
		os.Exit(3)
	}
	srv := &http.Server{Handler: benchHookControl(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
}

// benchHookControl serves POST /cpu/start?path=, POST /cpu/stop,
// POST /allocs?path= and POST /memstats (mallocs, bytes allocated and GC
// cycles so far, space-separated).
func benchHookControl() http.Handler {
	var (
		mu  sync.Mutex
		out *os.File
	)
	fail := func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), http.StatusInternalServerError) }
	mux := http.NewServeMux()
	mux.HandleFunc("POST /cpu/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if out != nil {
			fail(w, errors.New("already profiling"))
			return
		}
		f, err := os.Create(r.URL.Query().Get("path"))
		if err != nil {
			fail(w, err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			fail(w, err)
			return
		}
		out = f
	})
	mux.HandleFunc("POST /cpu/stop", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if out == nil {
			fail(w, errors.New("not profiling"))
			return
		}
		pprof.StopCPUProfile()
		err := out.Close()
		out = nil
		if err != nil {
			fail(w, err)
		}
	})
	mux.HandleFunc("POST /allocs", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Create(r.URL.Query().Get("path"))
		if err != nil {
			fail(w, err)
			return
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			fail(w, err)
		}
	})
	mux.HandleFunc("POST /memstats", func(w http.ResponseWriter, r *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(w, "%d %d %d", ms.Mallocs, ms.TotalAlloc, ms.NumGC)
	})
	return mux
}
