// Command paynotify receives Alipay's and WeChat Pay's payment notifications and applies
// every real payment to its order exactly once.
//
//	paynotify serve          run the service (configured by the environment)
//	paynotify migrate        apply database migrations, then exit
//	paynotify consume        run the accounting consumer (NATS JetStream)
//	paynotify reconcile      reconcile a day against each provider's trade bill (exit 1 on differences)
//	paynotify dev            run on an embedded SQLite with demo data and dev keys
//	paynotify sign           sign a notification (an Alipay form, or a WeChat Pay body as a curl command) with a private key (QA)
//	paynotify healthcheck    ask a running service whether it is ready (containers)
//	paynotify hash-password  make a console operator's bcrypt hash
//	paynotify listen         a local webhook receiver that verifies and prints each delivery (receivers' developers)
//
// Every command answers -h with its usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"paynotify/dao"
)

const usage = `usage: paynotify <command> [flags]

commands:
  serve          run the service; configuration from the environment (docs/configuration.md)
  migrate        apply database migrations and exit
  consume        run the accounting consumer of the event stream (needs NATS_URL)
  reconcile      reconcile a day against each provider's bill: paynotify reconcile [-provider alipay|wechatpay] [-date yyyy-MM-dd]
  dev            run on an embedded SQLite with demo orders and development keys
  sign           sign a notification: paynotify sign [-key KEY.pem] [-set k=v ...] [FILE] (Alipay), paynotify sign -provider wechatpay BODY.json | sh (WeChat Pay)
  healthcheck    exit 0 if the service at HTTP_ADDR answers /readyz, else 1
  hash-password  print a bcrypt hash for CONSOLE_OPERATORS: paynotify hash-password [OPERATOR] < password
  listen         a local webhook receiver: paynotify listen -secret whsec_... [-addr 127.0.0.1:9000] [-forward URL]

paynotify <command> -h shows a command's flags.
`

func main() {
	tuneGC()
	// Before any goroutine: the driver's logger is a plain global.
	if err := dao.RouteDriverLog(); err != nil {
		fmt.Fprintln(os.Stderr, "paynotify:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := environment{args: os.Args[1:], environ: os.Environ(), stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		limitMemory: func(limit int64) int64 {
			if os.Getenv("GOMEMLIMIT") != "" {
				return debug.SetMemoryLimit(-1) // the deployer's
			}
			debug.SetMemoryLimit(limit)
			return limit
		}}
	os.Exit(exitCode(run(ctx, env), os.Stderr))
}

// exitCode reports err and says how the process ends: 0 for success and
// for -h, 2 for a command line it could not use, 1 for anything else.
func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2 // the usage is printed already
	}
	fmt.Fprintln(stderr, "paynotify:", err)
	return 1
}

// tuneGC trades memory the service does not need for CPU it does: the
// live heap is a few MiB beside the duplicate cache, so collecting at 5x
// it (GOGC=400) costs tens of MiB. GOGC in the environment wins. The
// duplicate cache is the one thing that grows (to some 36 MiB at its
// default size), and 5x it would be too much: serve bounds the heap
// with a soft memory limit sized to it (memoryLimit) unless GOMEMLIMIT
// is set.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// memoryLimit is the soft memory limit serve sets when GOMEMLIMIT is not
// set: 64 MiB for everything but the duplicate cache, and 384 bytes for
// each trade the cache may hold (378 measured, TestSeenEntrySize) — 100
// MiB at the default 100,000. Below it the collector keeps GOGC's pace;
// near it, it collects sooner rather than let the heap reach 5x.
func memoryLimit(duplicateCache int) int64 { return 64<<20 + int64(duplicateCache)*384 }

// environment is everything run takes from the process, so tests can run
// the whole program in-process.
type environment struct {
	args           []string
	environ        []string
	stdin          io.Reader
	stdout, stderr io.Writer
	// listening, if set, is told the address the server bound.
	listening func(addr string)
	// limitMemory, if set, sets the process's soft memory limit to limit
	// unless the deployer set one, and says the limit in force. Only
	// main sets it: tests run many servers in one process.
	limitMemory func(limit int64) int64
	// bcryptCost is the cost of the hashes hash-password makes; 0 is
	// passwordCost. Only tests set it (lower: a cost-12 hash takes seconds
	// under -race).
	bcryptCost int
}

// run dispatches a subcommand.
func run(ctx context.Context, env environment) error {
	if len(env.args) == 0 {
		fmt.Fprint(env.stderr, usage)
		return usageError{errors.New("no command")}
	}
	cmd, env2 := env.args[0], env
	env2.args = env.args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, env2)
	case "migrate":
		return migrate(ctx, env2)
	case "dev":
		return dev(ctx, env2)
	case "consume":
		return consumeCmd(ctx, env2)
	case "reconcile":
		return reconcileCmd(ctx, env2)
	case "sign":
		return sign(env2)
	case "healthcheck":
		return healthcheck(ctx, env2)
	case "hash-password":
		return hashPassword(env2)
	case "listen":
		return listenCmd(ctx, env2)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(env.stdout, usage)
		return nil
	}
	fmt.Fprintf(env.stderr, "paynotify: unknown command %q\n\n%s", cmd, usage)
	return usageError{fmt.Errorf("unknown command %q", cmd)}
}
