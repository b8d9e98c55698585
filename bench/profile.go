package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profileLevel is the concurrency the profiling phase runs at.
const profileLevel = 32

// The profiling phase profiles the real binary, wired exactly as `serve`
// wires it, built with the build tag benchhook. That adds the repository's
// benchhook.go to package main: a loopback control listener, started when
// PAYNOTIFY_BENCH_CONTROL_ADDR is set, that starts and stops the CPU
// profiler. The measured binary is built without it.
const (
	controlEnv = "PAYNOTIFY_BENCH_CONTROL_ADDR"
	hookTag    = "benchhook"
	hookFile   = "benchhook.go"
)

// buildProfiled builds paynotify from root with the profiling hook, into dir.
func buildProfiled(ctx context.Context, root, dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(root, hookFile)); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s has no %s: profile a revision that has it, or run without -profile", root, hookFile)
	}
	bin := filepath.Join(dir, "paynotify-profiled")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", hookTag, "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -tags %s: %v\n%s", hookTag, err, out)
	}
	return bin, nil
}

// profiledCell is one workload run under the CPU profiler.
type profiledCell struct {
	kind    string
	res     result
	cpu     *cpuProfile
	path    string
	mallocs float64 // heap allocations per request
	bytes   float64 // heap bytes allocated per request
	gcs     int64   // GC cycles during the cell
	procCPU float64 // the service's CPU seconds from /proc
}

// profileResult is what the profiling phase found.
type profileResult struct {
	dir   string
	cells []profiledCell
}

// profile re-runs first notices and duplicates (with -wechatpay, WeChat
// Pay's too) at profileLevel against
// `paynotify serve` built with the profiling hook (see buildProfiled), with the
// CPU profiler on for the measured part only.
func (b *bench) profile(ctx context.Context) (*profileResult, error) {
	dir, err := filepath.Abs(b.opt.profile)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w, per := b.opt.warmup, b.opt.warmup+b.opt.profileN
	orders := makeOrders(fmt.Sprintf("P%02d", profileLevel), per)
	svcDB, err := sql.Open("mysql", dsnFor(b.server, b.svcDB, nil))
	if err != nil {
		return nil, err
	}
	defer svcDB.Close()
	if err := seedOrders(ctx, svcDB, orders); err != nil {
		return nil, err
	}
	bodies, err := b.sign(ctx, b.mainApps(), orders)
	if err != nil {
		return nil, err
	}
	exe := b.profBin
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ctl, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// A no-op unless the tree gained a migration since bin was built.
	if err := migrateDB(ctx, exe, b.serviceEnv(addr)); err != nil {
		return nil, err
	}
	env := append(b.serviceEnv(addr), controlEnv+"="+ctl)
	b.progress("profiling: paynotify serve (profiled build) on %s", addr)
	child, err := startProcess(ctx, exe, []string{"serve"}, env, addr, filepath.Join(b.tmp, "profile-serve.log"))
	if err != nil {
		return nil, err
	}
	defer child.stop()
	meter := newCPUMeter(0)
	meter.watch("service", child.cmd.Process.Pid)

	alipayOps := func(order []int) func() (op, func(), error) { return notifyOps([]string{addr}, bodies, order) }
	type cell struct {
		kind       string
		warm, meas []int
		file       string
		ops        func(order []int) func() (op, func(), error)
	}
	cells := []cell{
		{kindFirst, seq(0, w), seq(w, per), "cpu-first.pprof", alipayOps},
		{kindDuplicate, shuffled(seq(0, w), 7), shuffled(seq(w, per), 8), "cpu-duplicate.pprof", alipayOps},
	}
	if b.opt.wechatpay {
		wxOrders := makeOrders(fmt.Sprintf("Q%02d", profileLevel), per)
		if err := seedOrders(ctx, svcDB, wxOrders); err != nil {
			return nil, err
		}
		wxReqs, err := weChatNotices(ctx, b.wxKeys, wxOrders)
		if err != nil {
			return nil, err
		}
		wxOps := func(order []int) func() (op, func(), error) { return weChatOps([]string{addr}, wxReqs, order) }
		cells = append(cells,
			cell{kindWeChatFirst, seq(0, w), seq(w, per), "cpu-wechatpay-first.pprof", wxOps},
			cell{kindWeChatDuplicate, shuffled(seq(0, w), 9), shuffled(seq(w, per), 10), "cpu-wechatpay-duplicate.pprof", wxOps})
	}

	pr := &profileResult{dir: dir}
	for _, k := range cells {
		if w > 0 {
			if _, err := drive(ctx, profileLevel, w, k.ops(k.warm)); err != nil {
				return nil, err
			}
		}
		m0, err := control(ctl, "/memstats")
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, k.file)
		if _, err := control(ctl, "/cpu/start?path="+path); err != nil {
			return nil, err
		}
		s0 := meter.snap()
		res, err := drive(ctx, profileLevel, b.opt.profileN, k.ops(k.meas))
		if err != nil {
			return nil, err
		}
		use := s0.to(meter.snap())
		if _, err := control(ctl, "/cpu/stop"); err != nil {
			return nil, err
		}
		m1, err := control(ctl, "/memstats")
		if err != nil {
			return nil, err
		}
		cpu, err := readCPUProfile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		pc := profiledCell{kind: k.kind, res: res, cpu: cpu, path: path, procCPU: use.service}
		var a0, b0, g0, a1, b1, g1 int64
		fmt.Sscan(m0, &a0, &b0, &g0)
		fmt.Sscan(m1, &a1, &b1, &g1)
		pc.mallocs, pc.bytes, pc.gcs = float64(a1-a0)/float64(res.n), float64(b1-b0)/float64(res.n), g1-g0
		pr.cells = append(pr.cells, pc)
		b.progress("profiled c=%d %s: %.0f/s, p50 %.2f ms, p99 %.2f ms, %d failures, service CPU %.0f µs/req (%.0f in the profile), other %.2f cores",
			profileLevel, k.kind, res.throughput(), ms(res.quantile(.5)), ms(res.quantile(.99)), res.fails,
			use.service*1e6/float64(res.n), float64(cpu.total)/float64(res.n)/1e3, use.otherCores())
	}
	if _, err := control(ctl, "/allocs?path="+filepath.Join(dir, "allocs.pprof")); err != nil {
		return nil, err
	}
	return pr, nil
}

// control posts to the child's control listener.
func control(addr, path string) (string, error) {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Post("http://"+addr+path, "text/plain", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("profile control %s: %s", path, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// write prints where the service's CPU time went.
func (p *profileResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### Profile: paynotify serve (built with the profiling hook), c=%d, profiles in %s\n\n", profileLevel, p.dir)
	fmt.Fprintln(w, "| workload | req/s | p50 ms | p99 ms | service CPU µs/req (/proc) | in profile | allocs/req | KiB/req | GCs | fails |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range p.cells {
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.2f | %.0f | %.0f | %.0f | %.1f | %d | %d |\n", c.kind, c.res.throughput(),
			ms(c.res.quantile(.5)), ms(c.res.quantile(.99)), c.procCPU*1e6/float64(c.res.n), float64(c.cpu.total)/float64(c.res.n)/1e3,
			c.mallocs, c.bytes/1024, c.gcs, c.res.fails)
	}
	for _, c := range p.cells {
		n := float64(c.res.n)
		us := func(ns int64) float64 { return float64(ns) / n / 1e3 }
		fmt.Fprintf(w, "\n#### %s: service CPU by layer (each sample charged to the innermost layer on its stack)\n\n", c.kind)
		fmt.Fprintln(w, "| layer | share | µs/req | of which allocation | of which syscalls |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
		for _, s := range c.cpu.breakdown() {
			fmt.Fprintf(w, "| %s | %s | %.1f | %s | %s |\n", s.name, pct(s.ns, c.cpu.total), us(s.ns), pct(s.inAlloc, c.cpu.total), pct(s.inSys, c.cpu.total))
		}
		fmt.Fprintln(w, "\nCumulative (overlapping): ")
		for _, q := range []struct {
			name     string
			prefixes []string
		}{
			{"VerifyNotification (RSA2 + sign content)", []string{"paynotify/alipay.(*Client).VerifyNotification"}},
			{"WeChat Pay VerifyNotification (signature, AES-GCM, JSON)", []string{"paynotify/wechatpay.(*Client).VerifyNotification"}},
			{"WeChat Pay signature (verifySigned)", []string{"paynotify/wechatpay.(*Client).verifySigned"}},
			{"WeChat Pay AES-GCM open", []string{"paynotify/wechatpay.(*Client).open"}},
			{"Payments.Observe (all database work)", []string{"paynotify/service.(*Payments).Observe"}},
			{"GORM and below", []string{"gorm.io/"}},
			{"go-sql-driver and below", []string{"github.com/go-sql-driver/mysql"}},
			{"log/slog and below", []string{"log/slog."}},
			{"encoding/json and below", []string{"encoding/json."}},
			{"request parsing: ParseForm or handler.postForm, and below", []string{"net/http.(*Request).ParseForm", "paynotify/handler.postForm"}},
			{"system calls", []string{"syscall.", "internal/runtime/syscall."}},
			{"allocation and GC (mallocgc, assists, background mark)", []string{"runtime.mallocgc", "runtime.gcAssistAlloc", "runtime.gcBgMarkWorker"}},
		} {
			ns := c.cpu.cumulative(q.prefixes...)
			fmt.Fprintf(w, "- %s: %s (%.0f µs/req)\n", q.name, pct(ns, c.cpu.total), us(ns))
		}
		fmt.Fprintln(w, "\nTop functions (flat):")
		fmt.Fprintln(w)
		for _, s := range c.cpu.flat(12) {
			fmt.Fprintf(w, "- %s %s\n", pct(s.ns, c.cpu.total), s.name)
		}
	}
	fmt.Fprintf(w, "\nExplore: `go tool pprof -http=: %s`\n", filepath.Join(p.dir, "cpu-first.pprof"))
}
