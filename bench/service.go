package main

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serviceEnv is the whole environment the service runs with: nothing is
// inherited, so a stray DB_DSN in the caller's shell cannot leak in.
func serviceEnv(addr, dsn string, pool int, k keys) []string {
	return []string{
		"HTTP_ADDR=" + addr,
		"DB_DRIVER=mysql",
		"DB_DSN=" + dsn,
		"DB_MAX_OPEN_CONNS=" + strconv.Itoa(pool),
		"LOG_LEVEL=INFO",
		"ALIPAY_APP_ID=" + benchAppID,
		"ALIPAY_SELLER_ID=" + benchSellerID,
		"ALIPAY_APP_PRIVATE_KEY=" + k.appPrivate,
		"ALIPAY_PUBLIC_KEY=" + k.alipayPublic,
	}
}

// buildBinary builds paynotify from root into dir, as an operator would
// (with flags added to go build).
func buildBinary(ctx context.Context, root, dir string, flags ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "paynotify")
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, flags...), "-o", bin, ".")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// repoRoot is the paynotify repository that holds the working directory:
// the nearest directory, upwards, whose go.mod declares module paynotify.
// The tool is a module of its own (bench/go.mod), so this is not the
// module `go env GOMOD` names when it runs.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == "paynotify" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the paynotify repository: run from it or pass -root")
		}
		dir = parent
	}
}

// modulePath is the module a go.mod declares, "" if none.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// migrateDB runs `paynotify migrate` with env.
func migrateDB(ctx context.Context, bin string, env []string) error {
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("paynotify migrate: %v\n%s", err, out)
	}
	return nil
}

// process is a running service.
type process struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
	done    chan error
}

// startProcess runs name args with env, logging to logPath, and waits
// until GET /readyz answers 200 (the database is reachable).
func startProcess(ctx context.Context, name string, args, env []string, addr, logPath string) (*process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, addr: addr, logPath: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-p.done:
			p.done <- err
			return nil, fmt.Errorf("%s exited during start (%v):\n%s", filepath.Base(name), err, p.logTail(20))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready after 30s:\n%s", filepath.Base(name), p.logTail(20))
		}
	}
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func (p *process) peakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}

// stop sends SIGTERM, as an orchestrator would, and waits for the service
// to finish; it kills it after 25 seconds.
func (p *process) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(25 * time.Second):
		_ = p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		return fmt.Errorf("did not stop on SIGTERM: %v", err)
	}
}

// logTail returns the last n lines of the service's log.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// exportRevision writes the tree of git revision rev of the repository at
// repo into dir (git archive), so the tool can build a committed tree
// while the working tree is being edited. It returns the short commit.
func exportRevision(ctx context.Context, repo, rev, dir string) (string, error) {
	commit, err := gitOutput(ctx, repo, "rev-parse", "--short", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("git rev-parse %s: %w", rev, err)
	}
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	cmd.Dir = repo
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			cmd.Wait()
			return "", fmt.Errorf("git archive: %w", err)
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			continue // stay inside dir
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = writeFile(name, tr, os.FileMode(h.Mode)&0o777)
		}
		if err != nil {
			cmd.Wait()
			return "", err
		}
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("git archive: %w", err)
	}
	return commit, nil
}

func writeFile(name string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
