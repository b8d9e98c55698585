// Command bench is paynotify's load tool. It builds the real binary, runs
// it against a fresh MariaDB database, and drives POST /alipay/notify with
// distinct, pre-signed Alipay notifications (first notices) and then with
// the same notifications again (a duplicate storm). In the same run and at
// the same concurrency levels it runs two baselines in plain database/sql
// that do what the seed design does per notification, with no HTTP, no
// signature and no ORM: a naive port (server-side prepared statements, two
// round trips per statement) and a tuned one (interpolateParams=true).
//
//	go -C bench run . [-dsn 'root@tcp(127.0.0.1:3306)/'] [-n 5000] [-c 8,32,64] [-profile out] [-purge 1000000] [-galera]
//	go -C bench run . -webhooks [-webhooks-rate 1000] [-webhooks-seconds 10]
//	go -C bench run . -apps 6 [-c 32]
//
// It is a module of its own (bench/go.mod, which replaces paynotify with
// ../), so its dependencies, such as github.com/google/pprof, stay out of
// the service's go.mod. Run it from the bench directory (`go -C bench`
// does that; relative paths such as -profile are then relative to bench).
// It prints a markdown report on standard output and progress on standard
// error. See BENCHMARKS.md for what it measured and how to read it.
//
// -galera measures the same workloads, in the same run, on a private
// 3-node Galera cluster (two instances on two nodes) and on one private
// plain server set up alike, and prices a certification conflict.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the tool's flags.
type options struct {
	dsn    string
	n      int
	warmup int
	levels []int
	pool   int
	// instances is how many serve processes share the service database.
	instances int
	profile   string
	profileN  int
	keep      bool
	root      string
	rev       string
	settle    time.Duration
	retries   int
	// rounds is how many times each level's cells run, in turn; the
	// report keeps each cell's median round.
	rounds   int
	args     []string // as given, for the report
	extraEnv envFlags
	// compare, if set, is a second set of serve processes with these
	// settings added, measured in the same run (e.g. a feature off).
	compare envFlags
	// comparePGO builds the -compare processes' binary with -pgo=off
	// (the main set's uses default.pgo, as go build does by default).
	comparePGO bool
	// apps, if set, is a second set of serve processes configured by a
	// PROVIDERS_FILE of this many Alipay apps under one seller, their
	// notices spread over the apps, measured in the same run.
	apps int
	// galera also runs the service workloads on a private 3-node Galera
	// cluster, one serve process on each of two nodes, in the same run.
	galera bool
	// purge, if set, is how many rows of each purged table to fill
	// before the run, measuring first notices again during purge rounds.
	purge int
	// wechatpay also measures WeChat Pay's first notices and duplicates,
	// on the same processes, beside Alipay's.
	wechatpay bool
	// webhooks measures the webhook fan-out instead of the notify table:
	// first notices paced at hookRate a second for hookSeconds.
	webhooks    bool
	hookRate    int
	hookSeconds int
}

// envFlags collects repeated -env K=V.
type envFlags []string

func (e *envFlags) String() string { return strings.Join(*e, " ") }
func (e *envFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q: want K=V", v)
	}
	*e = append(*e, v)
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{args: args}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "root@tcp(127.0.0.1:3306)/", "MariaDB server (go-sql-driver DSN, no database: the tool creates and drops its own)")
	fs.IntVar(&o.n, "n", 5000, "measured requests (or transactions) per cell")
	fs.IntVar(&o.warmup, "warmup", 500, "unmeasured requests before each cell")
	levels := fs.String("c", "8,32,64", "concurrency levels, comma-separated")
	fs.IntVar(&o.instances, "instances", 1, "serve processes on the one service database, driven round-robin (each with -pool connections)")
	fs.IntVar(&o.pool, "pool", 32, "database connections: DB_MAX_OPEN_CONNS of the service and the pool size of both baselines")
	fs.StringVar(&o.profile, "profile", "", "if set, afterwards profile the service (built again with a profiling hook) at concurrency 32 and write cpu-first.pprof, cpu-duplicate.pprof (with -wechatpay, cpu-wechatpay-first.pprof and cpu-wechatpay-duplicate.pprof too) and allocs.pprof to this directory")
	fs.IntVar(&o.profileN, "profile-n", 10000, "measured requests per profiled workload (more requests, more samples)")
	fs.BoolVar(&o.keep, "keep", false, "keep the databases and the temporary directory (binary, service log)")
	fs.DurationVar(&o.settle, "settle", time.Minute, "before each cell, wait up to this long for other work on the machine to stop (0: do not wait)")
	fs.IntVar(&o.rounds, "rounds", 1, "run each level's cells this many times, in turn (naive, tuned, ceiling, service, …, then again, every other round in reverse order), and report each cell's median round with every round's req/s beside it")
	fs.IntVar(&o.retries, "retries", 2, "run a cell again, on fresh orders, at most this many times if other work on the machine disturbed it")
	fs.Var(&o.extraEnv, "env", "`K=V` added to the service's environment (repeatable), e.g. -env NATS_URL=nats://127.0.0.1:4222")
	fs.Var(&o.compare, "compare", "`K=V` (repeatable): also run -instances serve processes with this added to their environment, on the same database, and measure their first notices and duplicates in the same run, e.g. -compare NOTIFY_GROUP_APPLY=off")
	fs.BoolVar(&o.comparePGO, "compare-pgo-off", false, "also run -instances serve processes built with -pgo=off (without default.pgo) on the same database, and measure their first notices and duplicates in the same run: what profile-guided optimisation gains")
	fs.IntVar(&o.apps, "apps", 0, "if set, also run -instances serve processes configured by a PROVIDERS_FILE of this many Alipay apps under one seller (each its own key pair), and measure their first notices and duplicates, spread over the apps, in the same run: throughput with N apps against one app's (-apps 1: the file against the environment form)")
	fs.BoolVar(&o.galera, "galera", false, "also start a private 3-node Galera cluster (loopback ports, own data directories; needs galera-4 and rsync), run the service workloads on two serve processes on two of its nodes in the same run, and measure what a certification conflict costs")
	fs.IntVar(&o.purge, "purge", 0, "if set, fill the service database with this many SENT outbox rows and bill lines past their retention, and at each level measure first notices again while the retention job's rounds delete them")
	fs.BoolVar(&o.wechatpay, "wechatpay", false, "also drive POST /wechatpay/notify (AES-GCM sealed, RSA-signed WeChat Pay notices) at every level, beside Alipay's, on the same processes")
	fs.BoolVar(&o.webhooks, "webhooks", false, "instead of the notify table, measure webhooks: first notices paced at -webhooks-rate for -webhooks-seconds with no endpoint, then with one hanging every request, then with three (two healthy receivers beside the hanging one): notify p99 both ways and the delivery lag to the healthy ones")
	fs.IntVar(&o.hookRate, "webhooks-rate", 1000, "first notices (so order.paid events) a second, with -webhooks")
	fs.IntVar(&o.hookSeconds, "webhooks-seconds", 10, "how long each -webhooks phase sends")
	fs.StringVar(&o.root, "root", "", "paynotify repository root (default: the module root of the working directory)")
	fs.StringVar(&o.rev, "rev", "", "build this git revision (e.g. HEAD) instead of the working tree, which others may be editing")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(*levels, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 || c > 1024 {
			return o, fmt.Errorf("-c: %q is not a concurrency between 1 and 1024", s)
		}
		o.levels = append(o.levels, c)
	}
	if o.instances < 1 || o.instances > 8 {
		return o, errors.New("-instances: 1 to 8")
	}
	if o.apps < 0 || o.apps > 100 {
		return o, errors.New("-apps: 0 to 100")
	}
	if o.apps > 0 && (len(o.compare) > 0 || o.comparePGO || o.wechatpay) {
		// One second set of processes, and its PROVIDERS_FILE lists only
		// the Alipay apps: WECHATPAY_* beside it is refused by the service.
		return o, errors.New("-apps goes with neither -compare, -compare-pgo-off nor -wechatpay")
	}
	if o.purge < 0 || o.purge > 100_000_000 {
		return o, errors.New("-purge: 0 to 100,000,000 rows")
	}
	if o.hookRate < 1 || o.hookRate > 100_000 || o.hookSeconds < 1 || o.hookSeconds > 3600 {
		return o, errors.New("-webhooks-rate: 1 to 100,000; -webhooks-seconds: 1 to 3,600")
	}
	if o.n < 1 || o.profileN < 1 || o.warmup < 0 || o.pool < 1 || o.retries < 0 || o.retries > 20 {
		return o, errors.New("-n, -profile-n and -pool must be positive, -warmup not negative, -retries 0 to 20")
	}
	if o.rounds < 1 || o.rounds > 9 {
		return o, errors.New("-rounds: 1 to 9")
	}
	return o, nil
}

// run is the whole tool: set up, measure every cell, report, tear down.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opt, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	b, err := setup(ctx, opt, stderr)
	if err != nil {
		return err
	}
	defer b.teardown()

	if opt.webhooks {
		return b.runWebhooks(ctx, stdout)
	}
	rep, err := b.measure(ctx)
	if err != nil {
		return err
	}
	if opt.profile != "" {
		if rep.profile, err = b.profile(ctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			rep.profileErr = err.Error()
			b.progress("profile: %v", err)
		}
	}
	if opt.galera {
		b.progress("measuring certification conflicts (node 1 against node 2)")
		c, err := measureConflicts(ctx, b.galeraDSN(0), b.galeraDSN(1), 500)
		if err != nil {
			return err
		}
		rep.conflict = &c
	}
	rep.write(stdout)
	if !rep.valid() {
		b.keepLogs = true
		return errors.New("invalid run: some requests failed (see the table and the service log)")
	}
	if rep.profileErr != "" {
		b.keepLogs = true
		return errors.New("profiling failed")
	}
	return nil
}

// runWebhooks is run for -webhooks.
func (b *bench) runWebhooks(ctx context.Context, stdout io.Writer) error {
	rep, err := b.measureWebhooks(ctx)
	if err != nil {
		return err
	}
	env, err := environment(ctx, b.admin, b.bin, b.root)
	if err != nil {
		return err
	}
	if b.commit != "" {
		env.commit = b.commit + " (-rev " + b.opt.rev + ")"
	}
	rep.write(stdout, env)
	if !rep.valid() {
		b.keepLogs = true
		return errors.New("invalid run: some notices failed, a healthy endpoint missed events, or the ledger differs (see the tables and the service log)")
	}
	return nil
}
