// Command buildcost measures what a cold build of paynotify costs, and
// which module the cost comes from. With an empty build cache of its own
// it runs `go build` with itself as -toolexec, so every compile and link
// reports its user+system CPU time, which on a shared machine is a steadier
// measure than wall time; it prints CPU-seconds per module, the largest
// packages, and the wall time. With -dev it then times `go run . dev`
// from start to its first answer (GET /healthz), once with an empty build
// cache and once warm.
//
//	go -C bench run ./buildcost [-root ..] [-dev] [-top 15]
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// logEnv names the file each tool run appends its line to: when it is set,
// the process is a -toolexec wrapper, not the command.
const logEnv = "BUILDCOST_LOG"

func main() {
	if log := os.Getenv(logEnv); log != "" {
		os.Exit(wrap(log, os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "buildcost:", err)
		os.Exit(1)
	}
}

// wrap runs one tool of the build (compile, asm, link…) and appends
// "tool package cpu-seconds" to log. The package is the -p argument.
func wrap(log string, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "buildcost: no tool to run")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	tool := filepath.Base(args[0])
	pkg := "-"
	if i := slices.Index(args, "-p"); i > 0 && i+1 < len(args) {
		pkg = args[i+1]
	}
	// `tool -V=full` is the go command asking for the tool's version.
	if cmd.ProcessState != nil && !slices.Contains(args[1:], "-V=full") {
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if f, ferr := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); ferr == nil {
			fmt.Fprintf(f, "%s %s %.3f\n", tool, pkg, cpu.Seconds())
			f.Close()
		}
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, "buildcost:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("buildcost", flag.ContinueOnError)
	root := fs.String("root", "..", "paynotify repository to build")
	dev := fs.Bool("dev", false, "also time `go run . dev` to its first answer, cold and warm")
	top := fs.Int("top", 15, "largest packages to list")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "paynotify-buildcost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	load := loadAverage()
	log := filepath.Join(tmp, "tools.log")
	cmd := exec.CommandContext(ctx, "go", "build", "-toolexec", self, "-o", filepath.Join(tmp, "paynotify"), ".")
	cmd.Dir = *root
	cmd.Env = append(os.Environ(), "GOCACHE="+filepath.Join(tmp, "cache-toolexec"), logEnv+"="+log)
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	wall := time.Since(start)
	whole := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	runs, err := readLog(log)
	if err != nil {
		return err
	}
	mods, err := packageModules(ctx, *root)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Cold `go build` of %s: %.0f s wall, %.1f CPU-s (user+sys, the go command and every tool); load average before: %s\n\n",
		*root, wall.Seconds(), whole.Seconds(), load)
	report(out, runs, mods, *top)

	if *dev {
		for _, c := range []struct {
			name, cache string
		}{
			{"cold (empty build cache)", filepath.Join(tmp, "cache-dev")},
			{"warm (the same cache again)", filepath.Join(tmp, "cache-dev")},
		} {
			load := loadAverage()
			d, cpu, err := timeDev(ctx, *root, c.cache, tmp)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "\n`go run . dev` to its first answer, %s: %.1f s wall, %.1f CPU-s (go command and compiles); load average before: %s\n",
				c.name, d.Seconds(), cpu.Seconds(), load)
		}
	}
	return nil
}

// toolRun is one line of the log.
type toolRun struct {
	tool, pkg string
	cpu       float64
}

func readLog(path string) ([]toolRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []toolRun
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) != 3 {
			continue
		}
		cpu, err := strconv.ParseFloat(fl[2], 64)
		if err != nil {
			return nil, err
		}
		runs = append(runs, toolRun{tool: fl[0], pkg: fl[1], cpu: cpu})
	}
	return runs, sc.Err()
}

// packageModules maps every package the build compiles to its module
// ("standard library" for the standard library, "paynotify" for main).
func packageModules(ctx context.Context, root string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{.ImportPath}} {{if .Module}}{{.Module.Path}}{{else}}standard library{{end}}", ".")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	mods := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		pkg, mod, _ := strings.Cut(line, " ")
		mods[pkg] = mod
	}
	mods["main"] = "paynotify"
	return mods, nil
}

// report prints CPU-seconds per module and the largest packages.
func report(out io.Writer, runs []toolRun, mods map[string]string, top int) {
	type agg struct {
		name   string
		cpu    float64
		pkgs   int
		big    string
		bigCPU float64
	}
	by := map[string]*agg{}
	var total float64
	for _, r := range runs {
		name := cmp.Or(mods[r.pkg], "other")
		if r.tool == "link" {
			name = "link"
		}
		a := by[name]
		if a == nil {
			a = &agg{name: name}
			by[name] = a
		}
		a.cpu += r.cpu
		total += r.cpu
		if r.tool == "compile" {
			a.pkgs++
		}
		if r.cpu > a.bigCPU {
			a.big, a.bigCPU = r.pkg, r.cpu
		}
	}
	list := make([]*agg, 0, len(by))
	for _, a := range by {
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b *agg) int { return cmp.Compare(b.cpu, a.cpu) })
	fmt.Fprintf(out, "Tools (compile, asm, cgo, link): %.1f CPU-s in %d runs.\n\n", total, len(runs))
	fmt.Fprintln(out, "| module | packages | CPU-s | share | largest package (CPU-s) |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---|")
	for _, a := range list {
		if a.cpu < 0.5 {
			continue
		}
		fmt.Fprintf(out, "| %s | %d | %.1f | %.0f%% | %s (%.1f) |\n", a.name, a.pkgs, a.cpu, 100*a.cpu/total, a.big, a.bigCPU)
	}
	var rest float64
	var restN int
	for _, a := range list {
		if a.cpu < 0.5 {
			rest += a.cpu
			restN++
		}
	}
	fmt.Fprintf(out, "| %d more modules, under 0.5 each | | %.1f | %.0f%% | |\n", restN, rest, 100*rest/total)

	slices.SortFunc(runs, func(a, b toolRun) int { return cmp.Compare(b.cpu, a.cpu) })
	fmt.Fprintf(out, "\nLargest %d packages: ", top)
	for i, r := range runs[:min(top, len(runs))] {
		if i > 0 {
			fmt.Fprint(out, ", ")
		}
		fmt.Fprintf(out, "%s %.1f", r.pkg, r.cpu)
	}
	fmt.Fprintln(out)
}

// timeDev starts `go run . dev` in root with build cache cache, on a free
// loopback port and a database in tmp, and returns the time until GET
// /healthz answers 200 and the CPU the go command (with its compiles) used
// by then. It stops the whole process group afterwards.
func timeDev(ctx context.Context, root, cache, tmp string) (time.Duration, time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command("go", "run", ".", "dev", "-db", filepath.Join(tmp, "dev.db"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOCACHE="+cache, "HTTP_ADDR="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(tmp, "dev.log"))
	if err != nil {
		return 0, 0, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case err := <-done:
			return 0, 0, fmt.Errorf("go run . dev exited before answering (%v); see its log in %s", err, logf.Name())
		case <-ctx.Done():
			stop()
			return 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			d := time.Since(start)
			cpu := groupCPU(cmd.Process.Pid)
			stop()
			return d, cpu, nil
		}
	}
}

// groupCPU is the user+system CPU so far of process pid and its reaped
// children (the compiles), from /proc/pid/stat.
func groupCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// loadAverage is the 1-, 5- and 15-minute load average, for the record.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
