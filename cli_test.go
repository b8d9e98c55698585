package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/model"
)

// commands are every subcommand, for the tests that hold for all of them.
var commands = []string{"serve", "migrate", "consume", "reconcile", "dev", "sign", "healthcheck", "hash-password", "listen"}

// runCommand runs the program in-process with a database path of its own
// in the environment, and returns the error, what it printed, and whether
// the database file exists afterwards.
func runCommand(t *testing.T, args ...string) (err error, stdout, stderr string, dbCreated bool) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "touched.db")
	// With an -h or a bad flag nothing may start: were it to, these make it
	// work on the test's own files and addresses, never a real service.
	args = append(args[:1:1], append([]string{}, args[1:]...)...)
	if args[0] == "dev" {
		args = append(args, "-db", db)
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a command that starts serving stops at once
	err = run(ctx, environment{
		args:    args,
		environ: []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "HTTP_ADDR=127.0.0.1:0", "NATS_URL=nats://127.0.0.1:1"},
		stdin:   strings.NewReader(""), stdout: &out, stderr: &errOut,
	})
	_, statErr := os.Stat(db)
	return err, out.String(), errOut.String(), statErr == nil
}

// -h and --help print the command's usage on stdout and exit 0, having
// done nothing: migrate -h migrates nothing, serve -h serves nothing.
func TestCommandHelp(t *testing.T) {
	for _, cmd := range commands {
		for _, h := range []string{"-h", "--help", "-help"} {
			t.Run(cmd+h, func(t *testing.T) {
				err, stdout, stderr, touched := runCommand(t, cmd, h)
				if !errors.Is(err, flag.ErrHelp) || exitCode(err, &bytes.Buffer{}) != 0 {
					t.Fatalf("%s %s: err %v (exit %d), want the usage and exit 0\n%s", cmd, h, err, exitCode(err, &bytes.Buffer{}), stderr)
				}
				if !strings.HasPrefix(stdout, "usage: paynotify "+cmd) {
					t.Errorf("%s %s printed on stdout:\n%s", cmd, h, stdout)
				}
				if stderr != "" {
					t.Errorf("%s %s printed on stderr:\n%s", cmd, h, stderr)
				}
				if touched {
					t.Errorf("%s %s created the database", cmd, h)
				}
			})
		}
	}
}

// An unknown flag or a stray argument is refused: exit 2, the problem
// and the usage on stderr, nothing done.
func TestCommandRefusesUnknownFlags(t *testing.T) {
	for _, cmd := range commands {
		for _, bad := range []struct {
			args []string
			want string // in stderr
		}{
			{args: []string{"-no-such-flag"}, want: "flag provided but not defined: -no-such-flag"},
			{args: []string{"--dry-run"}, want: "flag provided but not defined: -dry-run"},
			{args: []string{"stray", "arguments"}, want: "unexpected argument"},
		} {
			t.Run(cmd+strings.Join(bad.args, "_"), func(t *testing.T) {
				err, stdout, stderr, touched := runCommand(t, append([]string{cmd}, bad.args...)...)
				var errOut bytes.Buffer
				if code := exitCode(err, &errOut); code != 2 {
					t.Fatalf("%s %v: err %v, exit %d; want exit 2\n%s%s", cmd, bad.args, err, code, stderr, errOut.String())
				}
				if !strings.Contains(stderr, bad.want) ||
					!strings.Contains(stderr, "usage: paynotify "+cmd) {
					t.Errorf("%s %v: stderr does not name the problem and show the usage:\n%s", cmd, bad.args, stderr)
				}
				if stdout != "" {
					t.Errorf("%s %v printed on stdout:\n%s", cmd, bad.args, stdout)
				}
				if touched {
					t.Errorf("%s %v created the database", cmd, bad.args)
				}
			})
		}
	}
	t.Run("UnknownCommand", func(t *testing.T) {
		err, _, stderr, _ := runCommand(t, "serv")
		if code := exitCode(err, &bytes.Buffer{}); code != 2 || !strings.Contains(stderr, `"serv"`) {
			t.Errorf("unknown command: exit %d, stderr:\n%s", code, stderr)
		}
	})
}

// A second dev fails before it touches the first one's database — on the
// busy port, or on another port on the database's lock: the first one's
// data is still there, on disk.
func TestDevSecondInstanceKeepsTheFirstsDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	base, _ := start(t, []string{"dev", "-db", db}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	body, err := os.ReadFile(filepath.Join("testdata", "notify", "01_pay_demo_1001.form"))
	if err != nil {
		t.Fatal(err)
	}
	if got := post(t, base+"/alipay/notify", strings.TrimSpace(string(body))); got != "success" {
		t.Fatalf("notify answered %q", got)
	}

	for _, second := range []struct{ addr, want string }{
		{addr: strings.TrimPrefix(base, "http://"), want: "address already in use"},
		{addr: "127.0.0.1:0", want: "in use by another paynotify dev"},
	} {
		var out bytes.Buffer
		err = run(context.Background(), environment{args: []string{"dev", "-db", db, "-addr", second.addr},
			stdin: strings.NewReader(""), stdout: &out, stderr: &out})
		if err == nil || !strings.Contains(err.Error(), second.want) {
			t.Fatalf("second dev on %s: %v, want %q\n%s", second.addr, err, second.want, &out)
		}
	}

	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	o, err := store.Order(context.Background(), "DEMO-1001")
	if err != nil || o.Status != model.OrderPaid {
		t.Fatalf("DEMO-1001 on disk after the second dev: %+v, %v; want paid", o, err)
	}
}

// dev with a database in a missing directory says so, and creates
// nothing: not its lock file either (before, "open ….lock: no such file or
// directory").
func TestDevDatabaseInMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no", "such")
	var out bytes.Buffer
	err := run(context.Background(), environment{args: []string{"dev", "-db", filepath.Join(dir, "dev.db"), "-addr", "127.0.0.1:0"},
		stdin: strings.NewReader(""), stdout: &out, stderr: &out})
	if want := "directory " + dir + " does not exist"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("dev: %v, want %q\n%s", err, want, &out)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dev created %s: %v", filepath.Dir(dir), err)
	}
}

// dev listens on loopback unless -addr or HTTP_ADDR says otherwise: its
// keys and admin token are public.
func TestDevListenAddr(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		environ []string
		want    string
	}{
		{name: "Default", want: "127.0.0.1:8080"},
		{name: "HTTPAddr", environ: []string{"HTTP_ADDR=:9090"}, want: ":9090"},
		{name: "Flag", args: []string{"-addr", ":7070"}, environ: []string{"HTTP_ADDR=:9090"}, want: ":7070"},
		{name: "FlagSaysDefault", args: []string{"-addr", "127.0.0.1:8080"}, environ: []string{"HTTP_ADDR=:9090"}, want: "127.0.0.1:8080"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			flags := newFlags("dev", devUsage)
			addr := flags.String("addr", devDefaultAddr, "")
			if err := flags.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if got := devListenAddr(flags, *addr, c.environ); got != c.want {
				t.Errorf("dev listens on %q, want %q", got, c.want)
			}
		})
	}
}

// The sign example of docs/development.md ends well in dev whether or not a replay paid
// DEMO-1004 first: paid, or refunded — never REFUND_FAILED with an ERROR
// in the log, as when the fake Alipay knew only the replay files' trades.
func TestDevSignExample(t *testing.T) {
	readmeArgs := []string{"sign", "-set", "trade_no=2026113022001400000000000009", "testdata/notify/11_pay_demo_1004.form"}
	for _, c := range []struct {
		name       string
		replayAll  bool
		wantStatus model.OrderStatus
		refunded   int
	}{
		{name: "Fresh", wantStatus: model.OrderPaid},
		// pay_demo_1004 paid it: the example's trade is a second payment,
		// refunded like the three the replays leave.
		{name: "AfterTheReplays", replayAll: true, wantStatus: model.OrderPaid, refunded: 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "dev.db")
			base, logs := start(t, []string{"dev", "-db", db}, []string{"ALIPAY_JOBS_INTERVAL=20ms"})
			if c.replayAll {
				for _, nc := range notifyCases {
					body, err := os.ReadFile(filepath.Join("testdata", "notify", nc.name+".form"))
					if err != nil {
						t.Fatal(err)
					}
					post(t, base+"/alipay/notify", strings.TrimSpace(string(body)))
				}
			}
			var signed, errOut bytes.Buffer
			if err := run(context.Background(), environment{args: readmeArgs, stdout: &signed, stderr: &errOut}); err != nil {
				t.Fatalf("sign: %v\n%s", err, &errOut)
			}
			if got := post(t, base+"/alipay/notify", strings.TrimSpace(signed.String())); got != "success" {
				t.Fatalf("the signed variant answered %q", got)
			}
			waitForMetrics(t, base, []string{
				fmt.Sprintf(`paynotify_refunds_total{account="2088000000000001",provider="alipay",result="refunded"} %d`, c.refunded),
				`paynotify_refunds_total{account="2088000000000001",provider="alipay",result="failed"} 0`,
			}, nil)
			store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			o, err := store.Order(context.Background(), "DEMO-1004")
			if err != nil || o.Status != c.wantStatus {
				t.Fatalf("DEMO-1004: %+v, %v; want status %d", o, err, c.wantStatus)
			}
			// One replay file is a trade bound to another order: that anomaly
			// is an ERROR on purpose. Nothing else may be.
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=ERROR") && !strings.Contains(line, "outcome=trade_conflict") {
					t.Errorf("dev logged an error: %s", line)
				}
			}
		})
	}
}

// The tests above cover every command the usage lists: a new command is
// not forgotten.
func TestCommandsListed(t *testing.T) {
	_, list, _ := strings.Cut(usage, "commands:\n")
	var listed []string
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, "  ") {
			listed = append(listed, strings.Fields(line)[0])
		}
	}
	if strings.Join(listed, " ") != strings.Join(commands, " ") {
		t.Errorf("usage lists %v, the tests cover %v", listed, commands)
	}
}

// A value a command cannot use is refused as loudly as an unknown flag:
// exit 2 with the problem and the usage on stderr, never a silent exit.
func TestCommandRefusesBadValues(t *testing.T) {
	for _, bad := range []struct {
		args []string
		want string // in stderr
	}{
		{args: []string{"reconcile", "-date", "30/11/2026"}, want: `-date "30/11/2026": want a day as yyyy-MM-dd`},
		{args: []string{"reconcile", "-date", "2026-02-30"}, want: `-date "2026-02-30"`},
		{args: []string{"reconcile", "-url", "http://127.0.0.1:8080"}, want: "-url is the running dev's address: it goes with -dev"},
		{args: []string{"reconcile", "-dev", "-url", "127.0.0.1:8080"}, want: `-url "127.0.0.1:8080": want the base URL dev printed`},
	} {
		t.Run(strings.Join(bad.args, "_"), func(t *testing.T) {
			err, _, stderr, touched := runCommand(t, bad.args...)
			var errOut bytes.Buffer
			if code := exitCode(err, &errOut); code != 2 {
				t.Fatalf("%v: err %v, exit %d; want exit 2\n%s%s", bad.args, err, code, stderr, errOut.String())
			}
			if !strings.Contains(stderr+errOut.String(), bad.want) || !strings.Contains(stderr, "usage: paynotify "+bad.args[0]) {
				t.Errorf("%v: stderr does not name the problem and show the usage:\n%s%s", bad.args, stderr, errOut.String())
			}
			if touched {
				t.Errorf("%v created the database", bad.args)
			}
		})
	}
}

// dev's start-up says what is true of dev: the order count of the database
// it runs on (with -keep, the kept orders too), and no advice to run
// paynotify reconcile from cron, which refuses the development keys.
func TestDevStartupWords(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	t.Run("Fresh", func(t *testing.T) { // stopped when it ends
		_, logs := start(t, []string{"dev", "-db", db}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
		if !strings.Contains(logs.String(), "orders=6 ") {
			t.Errorf("a fresh dev does not log its 6 demo orders:\n%s", logs)
		}
	})
	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateOrder(context.Background(), "KEPT-1", 1, decimal.RequireFromString("1.00")); err != nil {
		t.Fatal(err)
	}
	store.Close()

	_, logs := start(t, []string{"dev", "-db", db, "-keep"}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	if !strings.Contains(logs.String(), "orders=7 ") || !strings.Contains(logs.String(), "kept=true") {
		t.Errorf("dev -keep does not log the 7 orders it kept:\n%s", logs)
	}
	if strings.Contains(logs.String(), "cron") {
		t.Errorf("dev advises cron, whose paynotify reconcile refuses the development keys:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "/admin/reconciliations/{provider}/{date}/run") {
		t.Errorf("dev does not say how to reconcile a day:\n%s", logs)
	}
}
