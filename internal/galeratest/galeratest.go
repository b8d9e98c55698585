// Package galeratest gives tests a MariaDB Galera cluster of their own:
// three mariadbd processes on loopback ports, each with its own data
// directory and configuration file (never /etc/mysql, never the server on
// 3306), bootstrapped from node 1 and joined one at a time. A node can be
// killed as a crash would and brought back by IST, or cut off from the
// others. The tests run only with TEST_GALERA set; without MariaDB,
// Galera or rsync they skip loudly then (fail under CI).
package galeratest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"paynotify/internal/proctest"
)

// What a cluster needs on the machine.
const (
	Provider  = "/usr/lib/galera/libgalera_smm.so"
	Server    = "/usr/sbin/mariadbd"
	InstallDB = "/usr/bin/mariadb-install-db"
)

// syncTimeout bounds how long a node may take to start, join by SST or
// IST, and reach Synced.
const syncTimeout = 90 * time.Second

// Cluster is a running Galera cluster of private mariadbd processes.
type Cluster struct {
	Nodes []*Node
	dir   string
}

// Env, set to anything, runs the cluster tests: they take minutes, so the
// everyday test command skips them (loudly) and .ci/run runs them in a
// step of their own.
const Env = "TEST_GALERA"

var shared struct {
	sync.Mutex
	c   *Cluster
	err string
}

// Shared returns the package's one cluster of three nodes, starting it on
// first use: starting a cluster takes tens of seconds, so a package's
// tests share it (each in databases of its own, and each leaving every
// node synced as it found it). The package's TestMain calls StopShared.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	if os.Getenv(Env) == "" {
		tb.Skipf("SKIPPING Galera cluster test: set %s=1 to run it (.ci/run does, in a step of its own)", Env)
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.err != "" {
		tb.Fatalf("galeratest: the shared cluster did not start: %s", shared.err)
	}
	if shared.c == nil {
		checkInstalled(tb)
		c, err := start(3)
		if err != nil {
			shared.err = err.Error()
			if c != nil {
				c.Stop()
			}
			tb.Fatalf("galeratest: %v", err)
		}
		shared.c = c
	}
	// Each test leaves every node synced; one that failed may not have:
	// the next starts from a cluster whole again, or is told why not.
	for _, nd := range shared.c.Nodes {
		if nd.PID() == 0 {
			continue
		}
		if err := nd.waitSynced(); err != nil {
			tb.Fatalf("galeratest: the shared cluster's %s is not synced: %v\n%s", nd.Name, err, nd.Log())
		}
	}
	return shared.c
}

// StopShared stops the shared cluster, if one was started, and removes
// its data directories.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil {
		shared.c.Stop()
		shared.c = nil
	}
}

func checkInstalled(tb testing.TB) {
	tb.Helper()
	if err := installed(); err != nil {
		proctest.Unavailable(tb, "Galera", err.Error())
	}
}

// installed says what a cluster needs that the machine lacks.
func installed() error {
	for _, f := range []string{Provider, Server, InstallDB} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("no %s (%v): install mariadb-server and galera-4", f, err)
		}
	}
	for _, f := range []string{"rsync", "wsrep_sst_rsync"} {
		if _, err := exec.LookPath(f); err != nil {
			return fmt.Errorf("no %s in PATH (%v): install rsync (state transfer) and mariadb-server", f, err)
		}
	}
	return nil
}

// Start runs a cluster of n nodes outside a test (the load tool uses it);
// the caller stops it.
func Start(n int) (*Cluster, error) {
	if err := installed(); err != nil {
		return nil, err
	}
	c, err := start(n)
	if err != nil {
		if c != nil {
			c.Stop()
		}
		return nil, err
	}
	return c, nil
}

// start installs n data directories and brings the cluster up: node 1
// bootstraps a new cluster, the others join it one after the other, each
// by a full state transfer (rsync) from a synced node.
func start(n int) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "galeratest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	if err := chownToServer(dir); err != nil {
		return c, err
	}
	var gcomm []string
	for i := range n {
		nd := &Node{Name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1))}
		for _, p := range []*int{&nd.Port, &nd.gcommPort, &nd.istPort, &nd.sstPort} {
			if *p, err = freePort(); err != nil {
				return c, err
			}
		}
		gcomm = append(gcomm, fmt.Sprintf("127.0.0.1:%d", nd.gcommPort))
		c.Nodes = append(c.Nodes, nd)
	}
	name := "paynotify-test-" + randomID()
	for _, nd := range c.Nodes {
		if err := nd.install(name, strings.Join(gcomm, ",")); err != nil {
			return c, err
		}
	}
	for i, nd := range c.Nodes {
		var extra []string
		if i == 0 {
			extra = []string{"--wsrep-new-cluster"}
		}
		if err := nd.boot(extra...); err != nil {
			return c, err
		}
	}
	return c, nil
}

// StartServer runs one plain MariaDB server, without Galera, configured as
// a node of the cluster is (the same small buffer pool and flush
// setting): the load tool measures one server beside the cluster with it.
// The caller stops it.
func StartServer() (*Cluster, error) {
	dir, err := os.MkdirTemp("", "galeratest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	nd := &Node{Name: "single", dir: filepath.Join(dir, "single")}
	c.Nodes = append(c.Nodes, nd)
	if err = chownToServer(dir); err == nil {
		if nd.Port, err = freePort(); err == nil {
			if err = nd.install("", ""); err == nil {
				err = nd.boot()
			}
		}
	}
	if err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Stop kills every node and removes the cluster's files.
func (c *Cluster) Stop() {
	for _, nd := range c.Nodes {
		nd.kill()
	}
	if os.Getenv("GALERATEST_KEEP") == "" {
		_ = os.RemoveAll(c.dir)
	}
}

// Database creates an empty database on the cluster (it replicates to
// every node), drops it when the test ends, and returns its name: a node's
// DSN for it is Node.DSN(name).
func (c *Cluster) Database(tb testing.TB) string {
	tb.Helper()
	name := "paynotify_g_" + randomID()
	admin := c.admin(tb)
	if _, err := admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4"); err != nil {
		tb.Fatalf("galeratest: create database: %v", err)
	}
	c.seenEverywhere(tb, "database "+name, "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name)
	tb.Cleanup(func() {
		if _, err := c.admin(tb).Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			tb.Errorf("galeratest: drop database %s: %v", name, err)
		}
	})
	return name
}

// User creates a user of the cluster (it replicates to every node) that
// holds only grants (such as "SELECT, INSERT, UPDATE, DELETE") on database
// db, drops it when the test ends, and returns its name: a node's DSN for
// it is Node.DSNAs(name, db). root, the user of Node.DSN, holds every
// privilege, READ ONLY ADMIN included, so read_only does not stop it; a
// user like this one is what production's serve runs as.
func (c *Cluster) User(tb testing.TB, db, grants string) string {
	tb.Helper()
	name := "u_" + randomID()
	admin := c.admin(tb)
	for _, q := range []string{"CREATE USER '" + name + "'@'%'", "GRANT " + grants + " ON " + db + ".* TO '" + name + "'@'%'"} {
		if _, err := admin.Exec(q); err != nil {
			tb.Fatalf("galeratest: %s: %v", q, err)
		}
	}
	c.seenEverywhere(tb, "the grant to "+name, "SELECT 1 FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ? LIMIT 1", "'"+name+"'@'%'")
	tb.Cleanup(func() {
		if _, err := c.admin(tb).Exec("DROP USER IF EXISTS '" + name + "'@'%'"); err != nil {
			tb.Errorf("galeratest: drop user %s: %v", name, err)
		}
	})
	return name
}

// admin is a connection to the first synced node.
func (c *Cluster) admin(tb testing.TB) *sql.DB {
	tb.Helper()
	for _, nd := range c.Nodes {
		if st, err := nd.State(); err == nil && st == "Synced" {
			db := nd.open(tb, "")
			return db
		}
	}
	tb.Fatalf("galeratest: no node of the cluster is synced")
	return nil
}

// seenEverywhere waits until query (a causal read: wsrep_sync_wait) finds
// a row on every running node. A DDL statement or a grant is applied on
// the other nodes after its own commits, so a test that makes one on a
// node and uses it on another at once can otherwise find it missing.
func (c *Cluster) seenEverywhere(tb testing.TB, what, query string, args ...any) {
	tb.Helper()
	deadline := time.Now().Add(syncTimeout)
	for _, nd := range c.Nodes {
		if nd.PID() == 0 {
			continue
		}
		for {
			err := nd.found(query, args...)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("galeratest: %s not on %s after %v: %v\n%s", what, nd.Name, syncTimeout, err, nd.Log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// found runs query as a causal read on the node and says whether it
// found a row (nil) or why not.
func (nd *Node) found(query string, args ...any) error {
	db, err := sql.Open("mysql", nd.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		return err
	}
	var one int
	return conn.QueryRowContext(ctx, query, args...).Scan(&one)
}

// LogOnFailure shows the tail of every node's error log when tb fails.
func (c *Cluster) LogOnFailure(tb testing.TB) {
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, nd := range c.Nodes {
				tb.Logf("galeratest: %s's error log, last lines:\n%s", nd.Name, nd.Log())
			}
		}
	})
}

// Node is one mariadbd of the cluster.
type Node struct {
	// Name is the node's wsrep_node_name (n1, n2, ...).
	Name string
	// Port is its SQL port on 127.0.0.1.
	Port int

	dir                         string // holds data/, my.cnf, error.log
	gcommPort, istPort, sstPort int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// DSN is a go-sql-driver DSN for database db on this node.
func (nd *Node) DSN(db string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", nd.Port), db
	cfg.Timeout = 3 * time.Second
	return cfg.FormatDSN()
}

// DSNAs is a DSN for database db on this node as user (no password).
func (nd *Node) DSNAs(user, db string) string {
	cfg, _ := mysql.ParseDSN(nd.DSN(db)) // DSN's own output parses
	cfg.User = user
	return cfg.FormatDSN()
}

// Exec runs statements on this node as root, such as SET GLOBAL
// wsrep_desync=ON or read_only=ON: this node's globals only, never those
// of another server.
func (nd *Node) Exec(tb testing.TB, statements ...string) {
	tb.Helper()
	if err := nd.exec(statements...); err != nil {
		tb.Fatal(err)
	}
}

func (nd *Node) exec(statements ...string) error {
	db, err := sql.Open("mysql", nd.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range statements {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := db.ExecContext(ctx, q)
		cancel()
		if err != nil {
			return fmt.Errorf("galeratest: %s on %s: %w", q, nd.Name, err)
		}
	}
	return nil
}

// WaitState waits until the node's wsrep_local_state_comment is state
// (Synced, Donor/Desynced, ...), for at most the time a node may take to
// join.
func (nd *Node) WaitState(tb testing.TB, state string) {
	tb.Helper()
	if err := nd.waitState(func(st string, _ bool) bool { return st == state }); err != nil {
		tb.Fatal(err)
	}
}

func (nd *Node) data() string    { return filepath.Join(nd.dir, "data") }
func (nd *Node) cnf() string     { return filepath.Join(nd.dir, "my.cnf") }
func (nd *Node) errLog() string  { return filepath.Join(nd.dir, "error.log") }
func (nd *Node) socket() string  { return filepath.Join(nd.dir, "mysqld.sock") }
func (nd *Node) pidFile() string { return filepath.Join(nd.dir, "mysqld.pid") }

// install writes the node's configuration and its system tables.
func (nd *Node) install(cluster, gcomm string) error {
	if err := os.Mkdir(nd.dir, 0o750); err != nil {
		return err
	}
	// A small server: three of them share a laptop with the tests. The
	// suspect timeout is the one docs/capacity.md recommends, so a killed
	// node stalls commits for about 3 s, not 6 (the keepalive must be
	// under a third of it, or the group connection fails to open).
	cnf := fmt.Sprintf(`[mysqld]
datadir=%s
socket=%s
pid-file=%s
log-error=%s
port=%d
bind-address=127.0.0.1
skip-name-resolve
max_connections=400
innodb_buffer_pool_size=64M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=2
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
`, nd.data(), nd.socket(), nd.pidFile(), nd.errLog(), nd.Port)
	if cluster != "" {
		cnf += fmt.Sprintf(`wsrep_on=ON
wsrep_provider=%s
wsrep_cluster_name=%s
wsrep_cluster_address=gcomm://%s
wsrep_node_name=%s
wsrep_node_address=127.0.0.1:%d
wsrep_node_incoming_address=127.0.0.1:%d
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:%d
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=64M;evs.suspect_timeout=PT2S;evs.keepalive_period=PT0.5S"
`, Provider, cluster, gcomm, nd.Name, nd.gcommPort, nd.Port, nd.sstPort, nd.gcommPort, nd.istPort)
	}
	if err := os.WriteFile(nd.cnf(), []byte(cnf), 0o644); err != nil {
		return err
	}
	if err := chownToServer(nd.dir); err != nil {
		return err
	}
	args := []string{"--defaults-file=" + nd.cnf(), "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=mysql")
	}
	if out, err := exec.Command(InstallDB, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db for %s: %v\n%s", nd.Name, err, out)
	}
	return nil
}

// boot starts the node and waits until it is Synced (a plain server:
// until it answers).
func (nd *Node) boot(extra ...string) error {
	if err := nd.run(extra...); err != nil {
		return err
	}
	if nd.gcommPort == 0 {
		return nd.waitState(func(string, bool) bool { return true })
	}
	return nd.waitSynced()
}

// run starts mariadbd on the node's configuration, as the mysql user when
// the tests run as root (mariadbd refuses root), and killed with the test
// binary if that dies first.
func (nd *Node) run(extra ...string) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil {
		return fmt.Errorf("galeratest: %s is running", nd.Name)
	}
	cmd := serverCommand(append([]string{"--defaults-file=" + nd.cnf()}, extra...)...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("galeratest: start %s: %w", nd.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	nd.cmd, nd.done = cmd, done
	return nil
}

func serverCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(Server, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if uid, gid, ok := serverUser(); ok {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid}
	}
	return cmd
}

// PID is the process id of the node's mariadbd, 0 if it is not running.
func (nd *Node) PID() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return 0
	}
	return nd.cmd.Process.Pid
}

// Kill kills the node's mariadbd with SIGKILL, as a crash would, and waits
// for it to exit.
func (nd *Node) Kill(tb testing.TB) {
	tb.Helper()
	nd.kill()
}

func (nd *Node) kill() {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return
	}
	_ = nd.cmd.Process.Kill()
	<-nd.done
	nd.cmd = nil
}

// Shutdown stops the node's mariadbd as its service manager would
// (SIGTERM: it refuses new statements, kills its connections, leaves the
// cluster) and waits for it to exit, killing it after syncTimeout.
func (nd *Node) Shutdown(tb testing.TB) {
	tb.Helper()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return
	}
	_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.done:
	case <-time.After(syncTimeout):
		_ = nd.cmd.Process.Kill()
		<-nd.done
		tb.Errorf("galeratest: %s did not stop on SIGTERM in %v:\n%s", nd.Name, syncTimeout, nd.Log())
	}
	nd.cmd = nil
}

// Restart brings a killed (or shut down) node back the way its service manager would:
// mariadbd --wsrep-recover reads the last committed position from InnoDB,
// and the node starts from it (--wsrep-start-position), so it rejoins by
// IST, receiving only the writes it missed. It waits until the node is
// Synced.
func (nd *Node) Restart(tb testing.TB) {
	tb.Helper()
	pos, err := nd.recover()
	if err != nil {
		tb.Fatalf("galeratest: %v", err)
	}
	if err := nd.boot("--wsrep-start-position=" + pos); err != nil {
		tb.Fatal(err)
	}
}

// recover runs mariadbd --wsrep-recover and returns the position it logs.
func (nd *Node) recover() (string, error) {
	before, _ := os.ReadFile(nd.errLog())
	cmd := serverCommand("--defaults-file="+nd.cnf(), "--wsrep-recover")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s --wsrep-recover: %v\n%s", nd.Name, err, out)
	}
	after, err := os.ReadFile(nd.errLog())
	if err != nil {
		return "", err
	}
	const marker = "WSREP: Recovered position: "
	log := string(after[min(len(before), len(after)):])
	i := strings.LastIndex(log, marker)
	if i < 0 {
		return "", fmt.Errorf("%s --wsrep-recover logged no position:\n%s", nd.Name, log)
	}
	pos, _, _ := strings.Cut(log[i+len(marker):], "\n")
	return strings.TrimSpace(pos), nil
}

// Isolate cuts the node off from the others (gmcast.isolate=1), or lets it
// rejoin them (false). Cut off, it leaves the Primary component: it still
// answers a ping but refuses queries with 1047 (WSREP has not yet prepared
// node for application use). Rejoining, Isolate waits until it is Synced.
func (nd *Node) Isolate(tb testing.TB, isolated bool) {
	tb.Helper()
	db := nd.open(tb, "")
	v := 0
	if isolated {
		v = 1
	}
	if _, err := db.Exec(fmt.Sprintf("SET GLOBAL wsrep_provider_options='gmcast.isolate=%d'", v)); err != nil {
		tb.Fatalf("galeratest: isolate %s: %v", nd.Name, err)
	}
	if isolated {
		if err := nd.waitState(func(st string, ready bool) bool { return !ready }); err != nil {
			tb.Fatal(err)
		}
		return
	}
	if err := nd.waitSynced(); err != nil {
		tb.Fatal(err)
	}
}

// State is the node's wsrep_local_state_comment (Synced, Joining, Donor/Desynced, ...).
func (nd *Node) State() (string, error) {
	st, _, err := nd.status()
	return st, err
}

func (nd *Node) status() (state string, ready bool, err error) {
	db, err := sql.Open("mysql", nd.DSN(""))
	if err != nil {
		return "", false, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state_comment', 'wsrep_ready')")
	if err != nil {
		return "", false, err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return "", false, err
		}
		switch k {
		case "wsrep_local_state_comment":
			state = v
		case "wsrep_ready":
			ready = v == "ON"
		}
	}
	return state, ready, rows.Err()
}

func (nd *Node) waitSynced() error {
	return nd.waitState(func(st string, ready bool) bool { return st == "Synced" && ready })
}

// waitState polls the node until ok holds, it exits, or syncTimeout.
func (nd *Node) waitState(ok func(state string, ready bool) bool) error {
	nd.mu.Lock()
	done := nd.done
	nd.mu.Unlock()
	deadline := time.Now().Add(syncTimeout)
	for {
		st, ready, err := nd.status()
		if err == nil && ok(st, ready) {
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(nd.errLog())
			return fmt.Errorf("galeratest: %s exited (state %q, %v):\n%s", nd.Name, st, err, tail(log))
		case <-time.After(100 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(nd.errLog())
			return fmt.Errorf("galeratest: %s not there after %v (state %q, ready %v, %v):\n%s", nd.Name, syncTimeout, st, ready, err, tail(log))
		}
	}
}

// open is a pool on database db of this node, closed when the test ends.
func (nd *Node) open(tb testing.TB, db string) *sql.DB {
	tb.Helper()
	pool, err := sql.Open("mysql", nd.DSN(db))
	if err != nil {
		tb.Fatalf("galeratest: %v", err)
	}
	tb.Cleanup(func() { pool.Close() })
	return pool
}

// Log is the tail of the node's error log, for a failing test's message.
func (nd *Node) Log() string {
	b, _ := os.ReadFile(nd.errLog())
	return tail(b)
}

func tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// serverUser is the mysql account's ids when the tests run as root.
func serverUser() (uid, gid uint32, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return 0, 0, false
	}
	id, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uint32(id), uint32(g), true
}

func chownToServer(path string) error {
	uid, gid, ok := serverUser()
	if !ok {
		return nil
	}
	return os.Chown(path, int(uid), int(gid))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
