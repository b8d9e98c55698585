package main

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"paynotify/internal/galeratest"
)

// maxOtherCores is how much CPU other work may use before a cell starts.
const maxOtherCores = 0.15

// Workloads, one per row of the table.
const (
	kindNaive     = "baseline naive"
	kindTuned     = "baseline tuned"
	kindFirst     = "service first notice"
	kindDuplicate = "service duplicate"
)

// bench holds what a run set up, so teardown can undo it.
type bench struct {
	opt      options
	log      io.Writer
	server   *mysql.Config
	admin    *sql.DB
	tmp      string
	root     string
	commit   string // the revision built, if -rev
	bin      string
	binNoPGO string // bin built with -pgo=off, if -compare-pgo-off
	profBin  string // bin plus the profiling hook, if -profile
	keys     keys
	wxKeys   weChatKeys // with -wechatpay
	// apps and providersFile configure the -apps processes.
	apps          []benchApp
	providersFile string
	dbNames       []string
	svcDB         string
	baseDB        string
	keepLogs      bool
	cluster       *galeratest.Cluster // -galera: three nodes
	single        *galeratest.Cluster // -galera: one plain server beside them
	purger        *purger             // -purge
}

// setup checks the server, creates the databases, builds the binary,
// generates the keys and applies the schema.
func setup(ctx context.Context, opt options, log io.Writer) (*bench, error) {
	server, err := mysql.ParseDSN(opt.dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	if server.DBName != "" {
		return nil, fmt.Errorf("-dsn names database %q: give the server only; the tool creates its own databases", server.DBName)
	}
	b := &bench{opt: opt, log: log, server: server}
	ok := false
	defer func() {
		if !ok {
			b.teardown()
		}
	}()
	if b.admin, err = sql.Open("mysql", opt.dsn); err != nil {
		return nil, err
	}
	if err := b.admin.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("MariaDB at -dsn: %w", err)
	}
	root := opt.root
	if root == "" {
		if root, err = repoRoot(); err != nil {
			return nil, err
		}
	}
	if b.tmp, err = os.MkdirTemp("", "paynotify-bench-"); err != nil {
		return nil, err
	}
	if opt.rev != "" {
		src := filepath.Join(b.tmp, "src")
		if b.commit, err = exportRevision(ctx, root, opt.rev, src); err != nil {
			return nil, err
		}
		root = src
	}
	b.root = root
	b.progress("building %s", root)
	if b.bin, err = buildBinary(ctx, root, b.tmp); err != nil {
		return nil, err
	}
	if opt.comparePGO {
		b.progress("building %s with -pgo=off", root)
		if b.binNoPGO, err = buildBinary(ctx, root, filepath.Join(b.tmp, "nopgo"), "-pgo=off"); err != nil {
			return nil, err
		}
	}
	if opt.profile != "" {
		// Built now, from the same tree as bin: others may be editing it.
		if b.profBin, err = buildProfiled(ctx, root, b.tmp); err != nil {
			return nil, err
		}
	}
	b.progress("generating RSA-2048 keys")
	if b.keys, err = newKeys(); err != nil {
		return nil, err
	}
	if opt.wechatpay {
		if b.wxKeys, err = newWeChatKeys(b.tmp); err != nil {
			return nil, err
		}
	}
	if opt.apps > 0 {
		b.progress("generating the keys of %d apps", opt.apps)
		if b.apps, err = newApps(ctx, opt.apps); err != nil {
			return nil, err
		}
		if b.providersFile, err = writeProvidersFile(filepath.Join(b.tmp, "apps"), b.apps); err != nil {
			return nil, err
		}
	}

	suffix := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().Unix()%100000)
	b.svcDB, b.baseDB = "paynotify_bench_svc_"+suffix, "paynotify_bench_base_"+suffix
	for _, name := range []string{b.svcDB, b.baseDB} {
		if err := createDatabase(ctx, b.admin, name); err != nil {
			return nil, fmt.Errorf("create database %s: %w", name, err)
		}
		b.dbNames = append(b.dbNames, name)
	}
	// Both databases get the schema of the binary under test: `paynotify
	// migrate` is migrations.Up of the revision built.
	for _, name := range []string{b.svcDB, b.baseDB} {
		b.progress("paynotify migrate (%s)", name)
		env := append(b.serviceEnv("127.0.0.1:0"), "DB_DSN="+dsnFor(server, name, nil))
		if err := migrateDB(ctx, b.bin, env); err != nil {
			return nil, err
		}
	}
	if opt.galera {
		if err := b.startGalera(ctx); err != nil {
			return nil, err
		}
	}
	if opt.purge > 0 {
		db, err := sql.Open("mysql", dsnFor(server, b.svcDB, nil))
		if err != nil {
			return nil, err
		}
		err = fillPurgeable(ctx, db, opt.purge, log)
		db.Close()
		if err != nil {
			return nil, err
		}
	}
	ok = true
	return b, nil
}

func (b *bench) serviceEnv(addr string) []string {
	// Later entries win: -env can override the defaults.
	env := serviceEnv(addr, dsnFor(b.server, b.svcDB, nil), b.opt.pool, b.keys)
	if b.opt.purge > 0 {
		env = append(env, serviceRetention...)
	}
	if b.opt.wechatpay {
		env = append(env, b.wxKeys.env()...)
	}
	return append(env, b.opt.extraEnv...)
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

// teardown drops the databases and removes the temporary directory, unless
// asked to keep them (or a failed run needs its service log).
func (b *bench) teardown() {
	if b.opt.keep || b.keepLogs {
		b.progress("kept %s and databases %v", b.tmp, b.dbNames)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range b.dbNames {
			if err := dropDatabase(ctx, b.admin, name); err != nil {
				b.progress("drop %s: %v", name, err)
			}
		}
		if b.tmp != "" {
			os.RemoveAll(b.tmp)
		}
	}
	if b.admin != nil {
		b.admin.Close()
	}
	for _, c := range []*galeratest.Cluster{b.cluster, b.single} {
		if c != nil {
			c.Stop()
		}
	}
}

// cell is one measured row of the table.
type cell struct {
	level int
	kind  string
	res   result
	// stmts and prepares per request, from the server's global counters.
	stmts, prepares float64
	cpu             cpuUse
	attempts        int // 1, or more if other work disturbed earlier runs
	// round is the round the cell ran in (-rounds); rounds, once the
	// median is chosen, is every round's req/s, in round order.
	round  int
	rounds []float64
	// purge is what the retention job's rounds did during the cell
	// (kindFirstPurge).
	purge *purgeStats
}

// measure runs every cell, level by level: at each level the two
// baselines, the service's first notices, then the duplicate storm. A cell
// during which other work on the machine used maxOtherCores or more is run
// again, on fresh orders, up to -retries times.
func (b *bench) measure(ctx context.Context) (*report, error) {
	svcDB, err := sql.Open("mysql", dsnFor(b.server, b.svcDB, nil))
	if err != nil {
		return nil, err
	}
	defer svcDB.Close()
	naive, err := openBaseline(ctx, dsnFor(b.server, b.baseDB, nil), b.opt.pool)
	if err != nil {
		return nil, err
	}
	defer naive.Close()
	tuned, err := openBaseline(ctx, dsnFor(b.server, b.baseDB, func(c *mysql.Config) { c.InterpolateParams = true }), b.opt.pool)
	if err != nil {
		return nil, err
	}
	defer tuned.Close()

	// -instances serve processes on the one service database, driven
	// round-robin: as behind a load balancer.
	pid := serverPID(ctx, b.admin)
	if pid == 0 {
		b.progress("MariaDB's process is not found from its @@pid_file: its CPU is reported as other work")
	}
	meter := newCPUMeter(pid)
	var (
		addrs, addrsB []string      // addrsB: the -compare processes
		private       []*privateSet // -galera: the cluster's, and one server's
		svcs          []*process
	)
	defer func() {
		for _, svc := range svcs {
			svc.stop()
		}
	}()
	sets := 1
	if len(b.opt.compare) > 0 || b.opt.comparePGO || b.opt.apps > 0 {
		sets = 2
	}
	for k := range sets * b.opt.instances {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env := b.serviceEnv(addr)
		logName := "serve.log"
		if k > 0 {
			logName = fmt.Sprintf("serve-%d.log", k+1)
		}
		bin := b.bin
		if k >= b.opt.instances {
			env = append(env, b.opt.compare...)
			if b.opt.apps > 0 {
				env = b.appsEnv(addr)
			}
			if b.opt.comparePGO {
				bin = b.binNoPGO
			}
			b.progress("starting paynotify serve on %s with %s", addr, b.compareLabel())
		} else {
			b.progress("starting paynotify serve on %s", addr)
		}
		svc, err := startProcess(ctx, bin, []string{"serve"}, env, addr, filepath.Join(b.tmp, logName))
		if err != nil {
			return nil, err
		}
		svcs = append(svcs, svc)
		if k >= b.opt.instances {
			addrsB = append(addrsB, addr)
		} else {
			addrs = append(addrs, addr)
		}
		// An idle process costs next to nothing: the service's CPU is that
		// of every process, whichever set is driven.
		meter.watch("service", svc.cmd.Process.Pid)
	}

	if b.cluster != nil {
		for _, set := range []*privateSet{{tag: galeraTag, servers: b.cluster}, {tag: singleTag, servers: b.single}} {
			if set.db, err = sql.Open("mysql", set.servers.Nodes[0].DSN(b.svcDB)); err != nil {
				return nil, err
			}
			defer set.db.Close()
			for _, nd := range set.servers.Nodes {
				meter.watch("mariadb", nd.PID())
			}
			for k := range galeraNodes {
				nd := set.servers.Nodes[min(k, len(set.servers.Nodes)-1)]
				addr, err := freeAddr()
				if err != nil {
					return nil, err
				}
				b.progress("starting paynotify serve on %s, on %s node %s", addr, set.tag, nd.Name)
				svc, err := startProcess(ctx, b.bin, []string{"serve"}, append(b.serviceEnv(addr), "DB_DSN="+nd.DSN(b.svcDB)),
					addr, filepath.Join(b.tmp, fmt.Sprintf("serve-%s-%d.log", nd.Name, k+1)))
				if err != nil {
					return nil, err
				}
				svcs = append(svcs, svc)
				set.addrs = append(set.addrs, addr)
				meter.watch("service", svc.cmd.Process.Pid)
			}
			private = append(private, set)
		}
	}

	if b.opt.purge > 0 {
		if b.purger, err = newPurger(ctx, dsnFor(b.server, b.svcDB, nil)); err != nil {
			return nil, err
		}
		defer b.purger.close()
	}
	rep := &report{opt: b.opt}
	if rep.env, err = environment(ctx, b.admin, b.bin, b.root); err != nil {
		return nil, err
	}
	if b.commit != "" {
		rep.env.commit = b.commit + " (-rev " + b.opt.rev + ")"
	}
	w, per := b.opt.warmup, b.opt.warmup+b.opt.n
	sent := 0 // distinct notices the service received
	for _, c := range b.opt.levels {
		var bodies [][]byte // the first notices the storm resends
		var wxReqs []weChatRequest
		kinds := []string{kindNaive, kindTuned, kindCeiling, kindFirst, kindDuplicate}
		if b.purger != nil {
			kinds = []string{kindNaive, kindTuned, kindCeiling, kindFirst, kindFirstPurge, kindDuplicate}
		}
		if b.opt.wechatpay {
			kinds = append(kinds, kindWeChatFirst, kindWeChatDuplicate)
		}
		if addrsB != nil {
			kinds = append(kinds, b.compared(kindFirst), b.compared(kindDuplicate))
		}
		for _, set := range private {
			kinds = append(kinds, kindFirst+set.tag, kindDuplicate+set.tag)
		}
		for round := range b.opt.rounds {
			if b.opt.rounds > 1 {
				b.progress("c=%d: round %d of %d", c, round+1, b.opt.rounds)
			}
			for _, kind := range roundOrder(kinds, round) {
				to, letter, db := addrs, "S", svcDB
				var set *privateSet
				for k, p := range private {
					if strings.HasSuffix(kind, p.tag) {
						set, to, letter, db = p, p.addrs, string(rune('G'+k)), p.db
					}
				}
				switch {
				case set != nil:
				case strings.HasSuffix(kind, "]"):
					to, letter = addrsB, "C"
				case kind == kindFirstPurge:
					letter = "P"
				}
				for attempt := 0; ; attempt++ {
					// Fresh orders for every attempt: a first notice, or a
					// baseline transaction, pays an order once.
					prefix := fmt.Sprintf("%02d%c", c, 'a'+attempt)
					if round > 0 {
						prefix += fmt.Sprint(round)
					}
					var warm, meas func() (op, func(), error)
					switch kind {
					case kindNaive, kindTuned:
						db, letter := naive, "N"
						if kind == kindTuned {
							db, letter = tuned, "T"
						}
						orders := makeOrders(letter+prefix, per)
						if err := seedOrders(ctx, db, orders); err != nil {
							return nil, err
						}
						warm, meas = baselineOps(db, orders[:w]), baselineOps(db, orders[w:])
					case kindCeiling:
						// The tuned pool: the service's DSN interpolates too.
						orders := makeOrders("D"+prefix, per)
						if err := seedOrders(ctx, tuned, orders); err != nil {
							return nil, err
						}
						g := &groupClient{db: tuned}
						warm, meas = ceilingOps(g, orders[:w]), ceilingOps(g, orders[w:])
					case kindFirst, kindFirstPurge, b.compared(kindFirst), kindFirst + galeraTag, kindFirst + singleTag:
						orders := makeOrders(letter+prefix, per)
						if err := seedOrders(ctx, db, orders); err != nil {
							return nil, err
						}
						apps := b.mainApps()
						if kind == b.compared(kindFirst) && b.opt.apps > 0 {
							apps = b.apps
						}
						if bodies, err = b.sign(ctx, apps, orders); err != nil {
							return nil, err
						}
						if set != nil {
							set.sent += per
						} else {
							sent += per
						}
						warm, meas = notifyOps(to, bodies, seq(0, w)), notifyOps(to, bodies, seq(w, per))
					case kindWeChatFirst:
						orders := makeOrders("W"+prefix, per)
						if err := seedOrders(ctx, svcDB, orders); err != nil {
							return nil, err
						}
						t0 := time.Now()
						if wxReqs, err = weChatNotices(ctx, b.wxKeys, orders); err != nil {
							return nil, err
						}
						b.progress("sealed and signed %d WeChat Pay notifications in %v", len(wxReqs), time.Since(t0).Round(time.Millisecond))
						sent += per
						warm, meas = weChatOps(to, wxReqs, seq(0, w)), weChatOps(to, wxReqs, seq(w, per))
					case kindWeChatDuplicate:
						seed := 100*c + attempt
						warm = weChatOps(to, wxReqs, shuffled(seq(0, w), seed))
						meas = weChatOps(to, wxReqs, shuffled(seq(w, per), seed+50))
					case kindDuplicate, b.compared(kindDuplicate), kindDuplicate + galeraTag, kindDuplicate + singleTag:
						// The storm resends what the first notices applied, in
						// another order: Alipay resends on its own schedule.
						seed := 100*c + attempt
						warm = notifyOps(to, bodies, shuffled(seq(0, w), seed))
						meas = notifyOps(to, bodies, shuffled(seq(w, per), seed+50))
					}
					cel, err := b.runCell(ctx, meter, rep, c, kind, warm, meas)
					if err != nil {
						return nil, err
					}
					cel.attempts, cel.round = attempt+1, round
					if o := cel.cpu.otherCores(); o >= maxOtherCores && attempt < b.opt.retries {
						b.progress("c=%d %s: other work used %.2f cores during the cell: measuring again", c, kind, o)
						continue
					}
					rep.cells = append(rep.cells, cel)
					break
				}
			}
		}
	}
	rep.cells, rep.roundFails = medianRounds(rep.cells)
	for _, svc := range svcs {
		rss, err := svc.peakRSS()
		if err != nil {
			return nil, err
		}
		rep.peakRSS = max(rep.peakRSS, rss) // per instance: the largest
		if err := svc.stop(); err != nil {
			b.progress("service stop: %v", err)
		}
	}
	if rep.invariant, err = checkApplied(ctx, svcDB, sent); err != nil {
		return nil, err
	}
	for _, set := range private {
		if rep.invariant != "" {
			break
		}
		if rep.invariant, err = checkApplied(ctx, set.db, set.sent); err != nil {
			return nil, err
		}
		if rep.invariant != "" {
			rep.invariant = strings.TrimSpace(set.tag) + ": " + rep.invariant
		}
	}
	if b.purger != nil {
		rep.purgeBatch, rep.purgePause = b.purger.r.Batch, b.purger.r.Pause
		if rep.leftOutbox, rep.leftLines, err = remaining(ctx, svcDB); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// roundOrder is the order round runs kinds in: as given in even rounds,
// and in odd ones with its units reversed, so that over an even number
// of rounds no cell always runs after another (the machine and MariaDB
// are not the same just after a cell as before it: in one run, a
// -compare cell measured second gained about 8 % against its base).
// A unit is a cell and the cells that resend its notices (units).
func roundOrder(kinds []string, round int) []string {
	if round%2 == 0 {
		return kinds
	}
	us := units(kinds)
	slices.Reverse(us)
	return slices.Concat(us...)
}

// units groups kinds into the cells that must run in turn: a first-notice
// cell and those after it that resend what it sent (duplicates, and the
// purge cell's notices, which its duplicates resend).
func units(kinds []string) [][]string {
	var us [][]string
	for _, k := range kinds {
		if len(us) > 0 && (strings.HasPrefix(k, kindDuplicate) || k == kindFirstPurge) {
			us[len(us)-1] = append(us[len(us)-1], k)
			continue
		}
		us = append(us, []string{k})
	}
	return us
}

// medianRounds keeps, of each level's and workload's cells, the one of
// median throughput (the lower middle of an even count), with every
// round's throughput beside it, in the order the first round ran them,
// and says how many failures the cells it left out had.
func medianRounds(cells []cell) ([]cell, int64) {
	type key struct {
		level int
		kind  string
	}
	var order []key
	byKey := map[key][]cell{}
	for _, c := range cells {
		k := key{c.level, c.kind}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	out := make([]cell, 0, len(order))
	var fails int64
	for _, k := range order {
		cs := byKey[k]
		rounds := make([]float64, len(cs))
		for i, c := range cs {
			rounds[i] = c.res.throughput()
		}
		sorted := slices.Clone(cs)
		slices.SortStableFunc(sorted, func(a, b cell) int { return cmp.Compare(a.res.throughput(), b.res.throughput()) })
		m := (len(sorted) - 1) / 2
		for i, c := range sorted {
			if i != m {
				fails += c.res.fails
			}
		}
		median := sorted[m]
		median.rounds = rounds
		out = append(out, median)
	}
	return out, fails
}

// compared names a service workload run on the -compare processes.
func (b *bench) compared(kind string) string { return b.opt.compared(kind) }

// compareLabel says how the -compare processes differ.
func (b *bench) compareLabel() string { return b.opt.compareLabel() }

// compared names a service workload run on the -compare processes.
func (o options) compared(kind string) string { return kind + " [" + o.compareLabel() + "]" }

// compareLabel says how the -compare processes differ.
func (o options) compareLabel() string {
	parts := []string{}
	if o.apps > 0 {
		parts = append(parts, fmt.Sprintf("%d apps", o.apps))
	}
	if o.comparePGO {
		parts = append(parts, "-pgo=off")
	}
	if len(o.compare) > 0 {
		parts = append(parts, o.compare.String())
	}
	return strings.Join(parts, " ")
}

// runCell waits for the machine to be quiet, warms up, then measures.
func (b *bench) runCell(ctx context.Context, meter *cpuMeter, rep *report, c int, kind string, warm, meas func() (op, func(), error)) (cell, error) {
	if b.opt.settle > 0 {
		other, waited := meter.waitQuiet(b.opt.settle, maxOtherCores, func() bool { return ctx.Err() != nil })
		if other >= maxOtherCores {
			b.progress("c=%d %s: other work still uses %.2f cores after %v; measuring anyway", c, kind, other, waited.Round(time.Second))
		}
	}
	if b.opt.warmup > 0 {
		wr, err := drive(ctx, c, b.opt.warmup, warm)
		if err != nil {
			return cell{}, err
		}
		if wr.fails > 0 {
			b.progress("c=%d %s: warm-up: %d failures, first: %s", c, kind, wr.fails, wr.firstErr)
			rep.warmupFails += wr.fails
		}
	}
	q0, p0, err := serverCounters(ctx, b.admin)
	if err != nil {
		return cell{}, err
	}
	var stopPurge func() purgeStats
	if kind == kindFirstPurge {
		stopPurge = b.purger.start(ctx)
	}
	s0 := meter.snap()
	res, err := drive(ctx, c, b.opt.n, meas)
	s1 := meter.snap()
	var purged *purgeStats
	if stopPurge != nil {
		st := stopPurge()
		purged = &st
	}
	if err != nil {
		return cell{}, err
	}
	q1, p1, err := serverCounters(ctx, b.admin)
	if err != nil {
		return cell{}, err
	}
	cel := cell{level: c, kind: kind, res: res, cpu: s0.to(s1), purge: purged}
	// The second SHOW STATUS is itself one question.
	cel.stmts = float64(q1-q0-1) / float64(res.n)
	cel.prepares = float64(p1-p0) / float64(res.n)
	perReq := func(sec float64) float64 { return sec * 1e6 / float64(res.n) }
	b.progress("c=%-3d %-22s %7.0f/s  p50 %6.2f ms  p99 %6.2f ms  fails %d  stmts/req %.1f  CPU µs/req svc %.0f db %.0f tool %.0f  other %.2f cores",
		c, kind, res.throughput(), ms(res.quantile(.50)), ms(res.quantile(.99)), res.fails, cel.stmts,
		perReq(cel.cpu.service), perReq(cel.cpu.mariadb), perReq(cel.cpu.tool), cel.cpu.otherCores())
	if res.fails > 0 {
		b.progress("  first failure: %s", res.firstErr)
	}
	if purged != nil {
		b.progress("  purged %d rows in %d rounds (%d failed), longest round %v", purged.rows, purged.rounds, purged.errs, purged.longest.Round(time.Millisecond))
	}
	return cel, nil
}

// sign signs a first notice for every order, spread over apps.
func (b *bench) sign(ctx context.Context, apps []benchApp, orders []order) ([][]byte, error) {
	t0 := time.Now()
	bodies, err := signBodies(ctx, apps, orders)
	if err != nil {
		return nil, err
	}
	b.progress("signed %d notifications (%d apps) with alipay.SignForm in %v", len(bodies), len(apps), time.Since(t0).Round(time.Millisecond))
	return bodies, nil
}

// seq is [from, to).
func seq(from, to int) []int {
	s := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// shuffled permutes s deterministically.
func shuffled(s []int, seed int) []int {
	r := rand.New(rand.NewPCG(uint64(seed), 42))
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
