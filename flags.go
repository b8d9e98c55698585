package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// usageError is a command line paynotify could not use; its usage has
// been printed already.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// newFlags returns a subcommand's flag set. about is its usage text, shown
// above the flags: a "usage:" line, then what the command does.
func newFlags(name, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), about)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses a subcommand's arguments, nothing else done yet: -h
// prints the usage on stdout and returns flag.ErrHelp (the program exits
// 0 without doing anything); an unknown flag or more than maxArgs
// arguments prints the problem and the usage on stderr and returns a
// usageError.
func parseFlags(fs *flag.FlagSet, env environment, maxArgs int) error {
	fs.SetOutput(io.Discard) // flag's own messages: we print ours below
	err := fs.Parse(env.args)
	if err == flag.ErrHelp {
		fs.SetOutput(env.stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	if err == nil && fs.NArg() > maxArgs {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(maxArgs))
	}
	if err != nil {
		err = sayWhatFlagWants(fs, err)
	}
	if err != nil {
		return refuseUsage(fs, env, err)
	}
	fs.SetOutput(env.stderr)
	return nil
}

// refuseUsage prints what is wrong with a command line, then the command's
// usage, on stderr, and returns the usageError that makes the exit 2: no
// command line is refused in silence.
func refuseUsage(fs *flag.FlagSet, env environment, err error) error {
	fs.SetOutput(env.stderr)
	fmt.Fprintf(env.stderr, "paynotify %s: %v\n\n", fs.Name(), err)
	fs.Usage()
	return usageError{fmt.Errorf("%s: %w", fs.Name(), err)}
}

// The usage of the commands configured by the environment alone.
const (
	serveUsage = `usage: paynotify serve

Runs the service: Alipay's notify endpoint (and WeChat Pay's, when
WECHATPAY_* is set), the order and pay API, /admin,
/healthz, /readyz, /metrics and the background jobs, until SIGTERM.
Configuration comes from the environment only (HTTP_ADDR, DB_DRIVER, DB_DSN,
ALIPAY_APP_ID, ...: see docs/configuration.md). It refuses to
start while migrations are pending: run paynotify migrate first.
`
	migrateUsage = `usage: paynotify migrate

Applies the embedded database migrations to the database DB_DRIVER and
DB_DSN name, then exits.
`
	consumeUsage = `usage: paynotify consume

Runs the accounting consumer of the event stream (NATS JetStream at
NATS_URL), booking each event once into the database DB_DRIVER and DB_DSN
name, until SIGTERM.
`
)

// sayWhatFlagWants adds to flag's "invalid value "abc" for flag -timeout:
// parse error" what the flag takes.
func sayWhatFlagWants(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	_, rest, ok := strings.Cut(msg, " for flag -")
	if !ok {
		return err
	}
	name, _, _ := strings.Cut(rest, ":")
	f := fs.Lookup(name)
	if f == nil {
		return err
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err
	}
	switch g.Get().(type) {
	case time.Duration:
		return fmt.Errorf("%w: want a duration with its unit, such as 5s, 500ms or 2m", err)
	case int, int64, uint, uint64:
		return fmt.Errorf("%w: want a whole number", err)
	case bool:
		return fmt.Errorf("%w: want true or false", err)
	}
	return err
}
