package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Targets from the issue.
const (
	targetDupSpeedup = 3.0
	targetP99Level   = 32
	targetP99        = 50 * time.Millisecond
	targetPeakRSS    = 128 << 20
)

// envInfo is what the numbers were measured on.
type envInfo struct {
	when      time.Time
	goVersion string
	binGo     string
	cpu       string
	cores     int
	kernel    string
	mariadb   string
	flushLog  string
	commit    string // git HEAD, "+dirty" if the working tree differs
}

func environment(ctx context.Context, admin *sql.DB, bin, root string) (envInfo, error) {
	e := envInfo{when: time.Now().UTC(), goVersion: runtime.Version(), cores: runtime.NumCPU(), cpu: "unknown", commit: "unknown"}
	if out, err := gitOutput(ctx, root, "rev-parse", "--short", "HEAD"); err == nil {
		e.commit = out
		if st, err := gitOutput(ctx, root, "status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
			e.commit += "+dirty"
		}
	}
	if out, err := exec.CommandContext(ctx, "go", "version", bin).Output(); err == nil {
		// "<path>: go1.x.y"
		_, v, _ := strings.Cut(strings.TrimSpace(string(out)), ": ")
		e.binGo = v
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				e.cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.kernel = strings.TrimSpace(string(b))
	}
	if err := admin.QueryRowContext(ctx, "SELECT VERSION(), @@innodb_flush_log_at_trx_commit").Scan(&e.mariadb, &e.flushLog); err != nil {
		return e, err
	}
	return e, nil
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// report is everything one run found.
type report struct {
	opt         options
	env         envInfo
	cells       []cell
	warmupFails int64
	// roundFails: failures in the rounds a cell's median round left out.
	roundFails int64
	peakRSS    int64
	invariant  string // empty if the database holds what was sent
	profile    *profileResult
	profileErr string
	conflict   *conflictResult // -galera
	// leftOutbox, leftLines: what -purge left to delete at the end.
	leftOutbox, leftLines int64
	// purgeBatch, purgePause: the retention job's tuning the rounds ran with.
	purgeBatch int
	purgePause time.Duration
}

func (r *report) valid() bool {
	if r.warmupFails > 0 || r.roundFails > 0 || r.invariant != "" {
		return false
	}
	for _, c := range r.cells {
		if c.res.fails > 0 || (c.purge != nil && c.purge.errs > 0) {
			return false
		}
	}
	return true
}

// writePurge sets each level's first notices beside the same during
// purge rounds.
func (r *report) writePurge(w io.Writer) {
	fmt.Fprintf(w, "### First notices during purge rounds (-purge %d)\n\n", r.opt.purge)
	fmt.Fprintf(w, "Before the run the service database got %d SENT outbox rows past OUTBOX_RETENTION and %d bill lines\n", r.opt.purge, r.opt.purge)
	fmt.Fprintln(w, "(recon_seen) of dates reconciled cleanly past RECON_RETENTION. In the \"purging\" cells the retention job's")
	fmt.Fprintf(w, "rounds (service.Retention.RunOnce, %d rows of each table a round, %v apart) ran in the tool's process,\n", r.purgeBatch, r.purgePause)
	fmt.Fprintln(w, "as another instance's job would, from the end of the warm-up to the end of the measured requests.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| c | first notices p50 / p99 ms | while purging p50 / p99 ms | req/s, while purging | rows purged | rounds | rows/s | longest round ms | failed rounds |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, lvl := range r.opt.levels {
		base, ok1 := r.find(lvl, kindFirst)
		p, ok2 := r.find(lvl, kindFirstPurge)
		if !ok1 || !ok2 || p.purge == nil {
			continue
		}
		st := p.purge
		fmt.Fprintf(w, "| %d | %.2f / %.2f | %.2f / %.2f | %.0f, %.0f | %d | %d | %.0f | %.1f | %d |\n", lvl,
			ms(base.res.quantile(.5)), ms(base.res.quantile(.99)), ms(p.res.quantile(.5)), ms(p.res.quantile(.99)),
			base.res.throughput(), p.res.throughput(), st.rows, st.rounds, float64(st.rows)/st.took.Seconds(), ms(st.longest), st.errs)
	}
	fmt.Fprintf(w, "\nLeft to purge at the end: %d SENT outbox rows, %d bill lines.\n\n", r.leftOutbox, r.leftLines)
}

func (r *report) find(level int, kind string) (cell, bool) {
	for _, c := range r.cells {
		if c.level == level && c.kind == kind {
			return c, true
		}
	}
	return cell{}, false
}

// write prints the report as markdown.
func (r *report) write(w io.Writer) {
	e := r.env
	fmt.Fprintf(w, "## paynotify load benchmark, %s\n\n", e.when.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- command: `%s` (effective: -n %d -warmup %d -c %s -pool %d -instances %d), paynotify at %s\n",
		strings.Join(append([]string{"go -C bench run ."}, r.opt.args...), " "), r.opt.n, r.opt.warmup, joinInts(r.opt.levels), r.opt.pool, r.opt.instances, e.commit)
	fmt.Fprintf(w, "- CPU: %s, %d cores (load tool, service and MariaDB share them)\n", e.cpu, e.cores)
	fmt.Fprintf(w, "- Go: %s (tool), %s (paynotify binary)\n", e.goVersion, e.binGo)
	fmt.Fprintf(w, "- MariaDB %s, innodb_flush_log_at_trx_commit=%s; kernel %s\n", e.mariadb, e.flushLog, e.kernel)
	fmt.Fprintf(w, "- pool: %d connections for the service (DB_MAX_OPEN_CONNS) and for each baseline\n", r.opt.pool)
	if r.opt.apps > 0 {
		fmt.Fprintf(w, "- [%d apps]: a second set of `serve` processes on the same database, configured by a PROVIDERS_FILE of %d Alipay apps under one seller, each its own keys; their notices go to the apps in turn (the one-app set runs on the ALIPAY_* variables)\n", r.opt.apps, r.opt.apps)
	}
	if r.opt.instances > 1 {
		fmt.Fprintf(w, "- service: %d `serve` processes on one database, requests round-robin; service CPU is theirs together, peak RSS the largest one's\n", r.opt.instances)
	}
	if r.opt.galera {
		fmt.Fprintf(w, "- Galera rows (%s): a private 3-node MariaDB Galera cluster on loopback (galera-4, internal/galeratest: evs.suspect_timeout=PT2S, innodb_flush_log_at_trx_commit=2, 64 MiB buffer pool per node) on the same cores; one `serve` on node 1 and one on node 2, requests alternating between them; each session runs with wsrep_sync_wait=1; their MariaDB CPU is the three nodes'\n", strings.TrimSpace(galeraTag))
		fmt.Fprintf(w, "- one-server rows (%s): a private plain MariaDB set up as a node is (same buffer pool, same flush setting), no Galera, two `serve` processes on it: the cluster's comparison in this run. The stmts and prepares columns of both count only the -dsn server\n", strings.TrimSpace(singleTag))
	}
	fmt.Fprintf(w, "- per cell: %d measured requests after %d warm-up requests\n", r.opt.n, r.opt.warmup)
	rounds := r.opt.rounds > 1
	if rounds {
		fmt.Fprintf(w, "- rounds: every cell of a level ran %d times, in turn (every other round in reverse order); each row is the cell's median round (by req/s), its other columns from that round, every round's req/s in the last column\n", r.opt.rounds)
	}
	fmt.Fprintln(w)

	if rounds {
		fmt.Fprintln(w, "| c | workload | req/s | p50 ms | p99 ms | max ms | vs tuned | fails | rounds req/s |")
		fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---|")
	} else {
		fmt.Fprintln(w, "| c | workload | req/s | p50 ms | p99 ms | max ms | vs tuned | fails |")
		fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|")
	}
	for _, c := range r.cells {
		vs := "—"
		if t, ok := r.find(c.level, kindTuned); ok {
			vs = fmt.Sprintf("%.2f×", c.res.throughput()/t.res.throughput())
		}
		kind := c.kind
		if o := c.cpu.otherCores(); o >= maxOtherCores {
			kind += fmt.Sprintf(" (disturbed: other work used %.2f cores)", o)
		}
		fmt.Fprintf(w, "| %d | %s | %.0f | %.2f | %.2f | %.1f | %s | %d |",
			c.level, kind, c.res.throughput(), ms(c.res.quantile(.50)), ms(c.res.quantile(.99)),
			ms(c.res.quantile(1)), vs, c.res.fails)
		if rounds {
			each := make([]string, len(c.rounds))
			for i, t := range c.rounds {
				each[i] = fmt.Sprintf("%.0f", t)
			}
			fmt.Fprintf(w, " %s |", strings.Join(each, " / "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Where each cell's CPU went, per request (from /proc; \"tool\" is the load generator for service rows and the whole")
	fmt.Fprintln(w, "database/sql client for baseline rows), the statements MariaDB executed per request (global `Questions`) and")
	fmt.Fprintln(w, "server-side prepares per request (`Com_stmt_prepare`); \"other\" is CPU used by anything else on the machine")
	fmt.Fprintln(w, "during the cell, in cores (near 0 in a clean cell: the tool waits for quiet before each cell and runs a")
	fmt.Fprintln(w, "disturbed cell again on fresh orders, up to -retries times; \"runs\" counts those runs).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| c | workload | service µs | MariaDB µs | tool µs | total µs | other cores | runs | stmts | prepares |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.cells {
		per := func(sec float64) float64 { return sec * 1e6 / float64(c.res.n) }
		fmt.Fprintf(w, "| %d | %s | %.0f | %.0f | %.0f | %.0f | %.2f | %d | %.1f | %.1f |\n", c.level, c.kind,
			per(c.cpu.service), per(c.cpu.mariadb), per(c.cpu.tool), per(c.cpu.busy), c.cpu.otherCores(), c.attempts, c.stmts, c.prepares)
	}
	fmt.Fprintf(w, "\nService peak RSS (VmHWM at the end of the run): %.1f MiB\n\n", float64(r.peakRSS)/(1<<20))

	if r.conflict != nil {
		r.conflict.write(w)
	}
	if r.opt.purge > 0 {
		r.writePurge(w)
	}
	fmt.Fprintln(w, "### Targets")
	fmt.Fprintln(w)
	for _, lvl := range r.opt.levels {
		first, ok1 := r.find(lvl, kindFirst)
		tuned, ok2 := r.find(lvl, kindTuned)
		dup, ok3 := r.find(lvl, kindDuplicate)
		if ok1 && ok2 {
			ratio := first.res.throughput() / tuned.res.throughput()
			fmt.Fprintf(w, "- c=%d: service first notices at least as fast as the tuned baseline: %.0f vs %.0f req/s (%.2f×): **%s**\n",
				lvl, first.res.throughput(), tuned.res.throughput(), ratio, verdict(ratio >= 1))
		}
		if ok1 && ok3 {
			tp := dup.res.throughput() / first.res.throughput()
			p50 := ms(first.res.quantile(.5)) / ms(dup.res.quantile(.5))
			fmt.Fprintf(w, "- c=%d: duplicates at least %.0f× faster than first notices: throughput %.2f×, p50 %.2f×: **%s**\n",
				lvl, targetDupSpeedup, tp, p50, verdict(tp >= targetDupSpeedup && p50 >= targetDupSpeedup))
		}
		for _, kind := range []string{kindFirst, kindDuplicate} {
			one, ok1 := r.find(lvl, kind)
			many, ok2 := r.find(lvl, r.opt.compared(kind))
			if r.opt.apps > 0 && ok1 && ok2 {
				q := many.res.throughput() / one.res.throughput()
				fmt.Fprintf(w, "- c=%d: %s with %s within %.0f %% of one app's: %.0f vs %.0f req/s (%.2f×): **%s**\n",
					lvl, kind, r.opt.compareLabel(), (1-targetApps)*100, many.res.throughput(), one.res.throughput(), q, verdict(q >= targetApps))
			}
		}
	}
	for _, kind := range []string{kindFirst, kindDuplicate} {
		if c, ok := r.find(targetP99Level, kind); ok {
			p99 := c.res.quantile(.99)
			fmt.Fprintf(w, "- c=%d: %s p99 under %v: %.2f ms: **%s**\n", targetP99Level, kind, targetP99, ms(p99), verdict(p99 < targetP99))
		} else {
			fmt.Fprintf(w, "- c=%d: %s p99 under %v: not measured in this run\n", targetP99Level, kind, targetP99)
		}
	}
	fmt.Fprintf(w, "- peak RSS under %d MiB: %.1f MiB: **%s**\n", targetPeakRSS>>20, float64(r.peakRSS)/(1<<20), verdict(r.peakRSS < targetPeakRSS))
	if r.valid() {
		fmt.Fprintln(w, "- run valid: every answer was `success`, and the service database holds exactly one APPLIED payment per distinct notice and every order paid")
	} else {
		fmt.Fprintf(w, "- **RUN INVALID**: %d warm-up failures; %d in rounds other than the ones shown; database check: %q; failures per cell in the table\n", r.warmupFails, r.roundFails, r.invariant)
	}
	if r.profile != nil {
		r.profile.write(w)
	}
	if r.profileErr != "" {
		fmt.Fprintf(w, "\n**Profiling failed**: %s\n", r.profileErr)
	}
	r.writeHeadline(w)
}

// Issue 26's targets, at c=headlineLevel.
const (
	headlineLevel    = 32
	targetVsTuned    = 2.5
	targetVsCeiling  = 0.9
	targetDupVsFirst = 5.0
	targetFirstP99   = 15 * time.Millisecond
	targetDupP99     = 10 * time.Millisecond
	targetWeChat     = 0.9
	// targetGalera: first notices on the 3-node cluster against one server, both with 2 instances.
	targetGalera = 0.6
)

// writeHeadline prints the short table BENCHMARKS.md starts with: each
// figure beside its baseline in this run, their ratio, and the target.
func (r *report) writeHeadline(w io.Writer) {
	c := headlineLevel
	first, okF := r.find(c, kindFirst)
	if !okF {
		return
	}
	if r.opt.rounds > 1 {
		fmt.Fprintf(w, "\n### Headline (c=%d, one run, each cell its median of %d rounds)\n\n", c, r.opt.rounds)
	} else {
		fmt.Fprintf(w, "\n### Headline (c=%d, one run)\n\n", c)
	}
	fmt.Fprintln(w, "| figure | this run | baseline, same run | ratio | target |")
	fmt.Fprintln(w, "|---|---:|---|---:|---|")
	rps := func(x cell) string { return fmt.Sprintf("%.0f req/s", x.res.throughput()) }
	ratio := func(a, b cell, target float64) (string, string) {
		q := a.res.throughput() / b.res.throughput()
		return fmt.Sprintf("%.2f×", q), fmt.Sprintf("≥ %.1f× %s", target, verdict(q >= target))
	}
	if t, ok := r.find(c, kindTuned); ok {
		q, v := ratio(first, t, targetVsTuned)
		fmt.Fprintf(w, "| first notices | %s | tuned seed transaction %s | %s | %s |\n", rps(first), rps(t), q, v)
	}
	if g, ok := r.find(c, kindCeiling); ok {
		q, v := ratio(first, g, targetVsCeiling)
		fmt.Fprintf(w, "| first notices | %s | database-only group ceiling %s | %s | %s |\n", rps(first), rps(g), q, v)
	}
	if d, ok := r.find(c, kindDuplicate); ok {
		q, v := ratio(d, first, targetDupVsFirst)
		fmt.Fprintf(w, "| duplicates | %s, %.2f stmts/req | first notices | %s | %s |\n", rps(d), d.stmts, q, v)
	}
	p99 := func(name string, x cell, target time.Duration) {
		v := x.res.quantile(.99)
		fmt.Fprintf(w, "| %s p99 | %.2f ms | — | — | < %v %s |\n", name, ms(v), target, verdict(v < target))
	}
	p99("first notices", first, targetFirstP99)
	if d, ok := r.find(c, kindDuplicate); ok {
		p99("duplicates", d, targetDupP99)
	}
	if wx, ok := r.find(c, kindWeChatFirst); ok {
		q, v := ratio(wx, first, targetWeChat)
		fmt.Fprintf(w, "| WeChat Pay first notices | %s | Alipay's %s | %s | %s |\n", rps(wx), rps(first), q, v)
	}
	if wd, ok := r.find(c, kindWeChatDuplicate); ok {
		if d, ok := r.find(c, kindDuplicate); ok {
			q, v := ratio(wd, d, targetWeChat)
			fmt.Fprintf(w, "| WeChat Pay duplicates | %s | Alipay's %s | %s | %s |\n", rps(wd), rps(d), q, v)
		}
	}
	for _, k := range []struct{ name, kind string }{{"first notices", kindFirst}, {"duplicates", kindDuplicate}} {
		cluster, ok1 := r.find(c, k.kind+galeraTag)
		single, ok2 := r.find(c, k.kind+singleTag)
		if !ok1 || !ok2 {
			continue
		}
		target := "—"
		if k.kind == kindFirst {
			_, target = ratio(cluster, single, targetGalera)
		}
		fmt.Fprintf(w, "| Galera %s (3 nodes, 2 instances) | %s | one server, 2 instances: %s | %.2f× | %s |\n", k.name, rps(cluster), rps(single),
			cluster.res.throughput()/single.res.throughput(), target)
	}
	if r.opt.comparePGO || len(r.opt.compare) > 0 || r.opt.apps > 0 {
		for _, k := range []struct{ name, kind string }{{"first notices", kindFirst}, {"duplicates", kindDuplicate}} {
			this, ok1 := r.find(c, k.kind)
			other, ok2 := r.find(c, r.opt.compared(k.kind))
			switch {
			case !ok1 || !ok2:
			case r.opt.apps > 0:
				// The figure is the N apps' throughput against one app's.
				q := other.res.throughput() / this.res.throughput()
				fmt.Fprintf(w, "| %s with %s | %s | one app: %s | %.2f× | ≥ %.2f× %s |\n", k.name, r.opt.compareLabel(), rps(other), rps(this),
					q, targetApps, verdict(q >= targetApps))
			default:
				fmt.Fprintf(w, "| %s | %s | with %s: %s | %.2f× | — |\n", k.name, rps(this), r.opt.compareLabel(), rps(other),
					this.res.throughput()/other.res.throughput())
			}
		}
	}
	fmt.Fprintf(w, "| peak RSS | %.1f MiB | — | — | < %d MiB %s |\n", float64(r.peakRSS)/(1<<20), targetPeakRSS>>20, verdict(r.peakRSS < targetPeakRSS))
	other := 0.0
	for _, x := range r.cells {
		if x.level == c {
			other = max(other, x.cpu.otherCores())
		}
	}
	fmt.Fprintf(w, "\nCommand: `%s` at %s; other work on the machine: up to %.2f cores in these cells.\n",
		strings.Join(append([]string{"go -C bench run ."}, r.opt.args...), " "), r.env.commit, other)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
