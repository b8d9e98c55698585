package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The profiling phase profiles the real binary, wired exactly as `serve`
// wires it: it builds paynotify again with `go build -overlay`, adding to
// package main one file (hookSource) that starts a loopback control
// listener when PAYNOTIFY_BENCH_CONTROL_ADDR is set. Nothing is written to
// the repository; the measured binary is built without the hook.
const controlEnv = "PAYNOTIFY_BENCH_CONTROL_ADDR"

// hookFile is the name the hook takes in package main.
const hookFile = "zz_bench_profile_hook.go"

// hookSource serves POST /cpu/start?path=, POST /cpu/stop,
// POST /allocs?path= and POST /memstats.
const hookSource = `// Code injected by go run ./bench into its profiling build only. DO NOT COMMIT.

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

func init() {
	addr := os.Getenv("` + controlEnv + `")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench profile hook:", err)
		os.Exit(3)
	}
	srv := &http.Server{Handler: zzBenchProfileControl(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
}

func zzBenchProfileControl() http.Handler {
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
`

// buildProfiled builds paynotify from root with the hook, into dir.
func buildProfiled(ctx context.Context, root, dir string) (string, error) {
	src := filepath.Join(dir, hookFile)
	if err := os.WriteFile(src, []byte(hookSource), 0o644); err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(root, hookFile): src},
	})
	if err != nil {
		return "", err
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "paynotify-profiled")
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", ov, "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -overlay: %v\n%s", err, out)
	}
	return bin, nil
}
