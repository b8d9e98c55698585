package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// cpuMeter accounts the machine's CPU time to the service, MariaDB, this
// tool and everything else, from /proc. Everything else is other work on
// the machine, which would distort a cell; the report shows it.
type cpuMeter struct {
	pids map[string][]int // "service" (one per instance), "mariadb", "tool"
}

// cpuSnap is a reading of the meter.
type cpuSnap struct {
	at    time.Time
	busy  int64            // machine-wide non-idle ticks
	procs map[string]int64 // ticks per watched process
}

// cpuUse is CPU time over an interval, in seconds.
type cpuUse struct {
	wall                          time.Duration
	service, mariadb, tool, other float64
	busy                          float64
}

// newCPUMeter meters this tool and, if serverPID is not 0, the MariaDB
// server the cells use (see serverPID).
func newCPUMeter(serverPID int) *cpuMeter {
	m := &cpuMeter{pids: map[string][]int{"tool": {os.Getpid()}}}
	if serverPID != 0 {
		m.pids["mariadb"] = []int{serverPID}
	}
	return m
}

// watch accounts pid's CPU time to name, with the other processes of that
// name (the instances of the service).
func (m *cpuMeter) watch(name string, pid int) { m.pids[name] = append(m.pids[name], pid) }

func (m *cpuMeter) snap() cpuSnap {
	s := cpuSnap{at: time.Now(), procs: map[string]int64{}}
	s.busy, _ = machineBusy()
	for name, pids := range m.pids {
		for _, pid := range pids {
			t, _ := processTicks(pid)
			s.procs[name] += t
		}
	}
	return s
}

// to is the CPU use from a to b.
func (a cpuSnap) to(b cpuSnap) cpuUse {
	sec := func(t int64) float64 { return float64(t) / clockTicks }
	u := cpuUse{wall: b.at.Sub(a.at), busy: sec(b.busy - a.busy)}
	u.service = sec(b.procs["service"] - a.procs["service"])
	u.mariadb = sec(b.procs["mariadb"] - a.procs["mariadb"])
	u.tool = sec(b.procs["tool"] - a.procs["tool"])
	u.other = max(0, u.busy-u.service-u.mariadb-u.tool)
	return u
}

// otherCores is the average number of cores used by other work.
func (u cpuUse) otherCores() float64 {
	if u.wall <= 0 {
		return 0
	}
	return u.other / u.wall.Seconds()
}

// machineBusy reads the non-idle ticks of all CPUs from /proc/stat.
func machineBusy() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, errors.New("unexpected /proc/stat")
	}
	var busy int64
	// user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is already counted in user.
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, nil
}

// processTicks is a process's user+system CPU ticks, all threads.
func processTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/pid/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc/pid/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	return utime + stime, errors.Join(err1, err2)
}

// serverPID is the pid of the MariaDB server admin is connected to, read
// from the file it names in @@pid_file: not just any mariadbd on the
// machine (with -galera, or with another engineer's test servers, there
// are several, and the first one /proc lists is seldom 3306's). 0 if the
// server is not on this machine or the file is not readable: then its CPU
// is reported as other work.
func serverPID(ctx context.Context, admin *sql.DB) int {
	var file string
	if err := admin.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&file); err != nil {
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !isServer(pid) {
		return 0
	}
	return pid
}

// isServer says whether pid is a MariaDB (or MySQL) server process.
func isServer(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	comm := strings.TrimSpace(string(b))
	return err == nil && (comm == "mariadbd" || comm == "mysqld")
}

// waitQuiet waits, at most limit, until other work on the machine uses
// less than maxCores over a one-second window, and returns the last
// window's reading.
func (m *cpuMeter) waitQuiet(limit time.Duration, maxCores float64, interrupted func() bool) (float64, time.Duration) {
	start := time.Now()
	for {
		a := m.snap()
		time.Sleep(time.Second)
		other := a.to(m.snap()).otherCores()
		waited := time.Since(start)
		if other < maxCores || waited >= limit || interrupted() {
			return other, waited
		}
	}
}
