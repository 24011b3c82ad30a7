package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The database servers' CPU time, for the durable scenario's server CPU per
// task (bench.DurableSetup.ServerCPU), read from the Linux process table.
const (
	// procRoot is the process table.
	procRoot = "/proc"
	// userHZ is the unit of the times in /proc/<pid>/stat: clock ticks of
	// USER_HZ, 100 a second on Linux.
	userHZ = 100
)

// The process names (comm) of each server's processes.
var (
	mariadbProcs  = []string{"mariadbd", "mysqld"}
	postgresProcs = []string{"postgres", "postmaster"}
	redisProcs    = []string{"redis-server", "valkey-server"}
)

// procStat is what readServerCPU takes from one /proc/<pid>/stat line.
type procStat struct {
	pid, ppid int
	comm      string
	// cpu is utime + stime + cutime + cstime: the CPU time of the process's
	// threads, and of its children that ended and were waited for.
	cpu time.Duration
}

// parseStat parses a /proc/<pid>/stat line (proc(5)). The command name is in
// parentheses and may itself hold spaces and parentheses, so the fields after
// it are counted from the last ')'.
func parseStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, errors.New("no (comm)")
	}
	var st procStat
	var err error
	if st.pid, err = strconv.Atoi(strings.TrimSpace(line[:open])); err != nil {
		return procStat{}, fmt.Errorf("pid: %w", err)
	}
	st.comm = line[open+1 : end]
	// After the comm: state (field 3), ppid (4), …, utime (14), stime (15),
	// cutime (16), cstime (17).
	f := strings.Fields(line[end+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%d fields after the comm, want at least 15", len(f))
	}
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("ppid: %w", err)
	}
	var ticks int64
	for i, name := range []string{"utime", "stime", "cutime", "cstime"} {
		v, err := strconv.ParseInt(f[11+i], 10, 64)
		if err != nil || v < 0 {
			return procStat{}, fmt.Errorf("%s %q: not a count of ticks", name, f[11+i])
		}
		ticks += v
	}
	st.cpu = time.Duration(ticks) * (time.Second / userHZ)
	return st, nil
}

// readServerCPU returns the CPU time used so far by the processes under root
// named one of names, summed: a server may run several (PostgreSQL runs one
// per connection), and each counts the CPU of its children that ended (a
// PostgreSQL backend that exited is counted in the postmaster's). It fails
// when it finds none, or finds two servers (two trees of such processes: it
// cannot tell which one serves the run).
func readServerCPU(root string, names []string) (time.Duration, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("cannot list the processes: %w", err)
	}
	var found []procStat
	unreadable := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH):
			continue // it ended since the listing
		case err != nil:
			unreadable++
			continue
		}
		st, err := parseStat(string(b))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(root, e.Name(), "stat"), err)
		}
		if slices.Contains(names, st.comm) {
			found = append(found, st)
		}
	}
	what := strings.Join(names, " or ")
	if len(found) == 0 {
		if unreadable > 0 {
			return 0, fmt.Errorf("no process named %s readable under %s (%d processes not readable: another user's?)", what, root, unreadable)
		}
		return 0, fmt.Errorf("no process named %s under %s (is the server on this machine?)", what, root)
	}
	var roots []string
	var sum time.Duration
	for _, st := range found {
		sum += st.cpu
		if !slices.ContainsFunc(found, func(p procStat) bool { return p.pid == st.ppid }) {
			roots = append(roots, strconv.Itoa(st.pid))
		}
	}
	if len(roots) > 1 {
		return 0, fmt.Errorf("%d servers named %s (pids %s): cannot tell which one serves the run", len(roots), what, strings.Join(roots, ", "))
	}
	return sum, nil
}

// serverCPU returns a bench.DurableSetup.ServerCPU: the CPU time of the
// processes named names, when host (the server's, from the DSN or address in
// the variable env) is this machine; otherwise it fails saying so.
func serverCPU(env, host string, names []string) func() (time.Duration, error) {
	local := isLocalHost(host)
	return func() (time.Duration, error) {
		if !local {
			return 0, fmt.Errorf("$%s names host %s, not this machine: its processes cannot be read", env, host)
		}
		return readServerCPU(procRoot, names)
	}
}

// isLocalHost reports whether host, from a DSN or an address, is this
// machine: empty, localhost, a Unix socket's path, a loopback address or an
// address of one of its interfaces.
func isLocalHost(host string) bool {
	if host == "" || host == "localhost" || strings.HasPrefix(host, "/") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// hostOf returns the host of a host:port address, or addr when it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
