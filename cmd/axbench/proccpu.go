package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
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

// readServerCPU returns the CPU time used so far by the server's processes
// under root: the processes named one of names, summed, since a server may run
// several (PostgreSQL runs one per connection), each with the CPU of its
// children that ended (a PostgreSQL backend that exited is counted in the
// postmaster's). Where such processes form several trees (several servers),
// it keeps the one whose top process listens on TCP port; it fails when it
// finds none, or cannot tell which one serves the run.
func readServerCPU(root string, names []string, port int) (time.Duration, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("cannot list the processes: %w", err)
	}
	byPID := map[int]procStat{}
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
			byPID[st.pid] = st
		}
	}
	what := strings.Join(names, " or ")
	if len(byPID) == 0 {
		if unreadable > 0 {
			return 0, fmt.Errorf("no process named %s readable under %s (%d processes not readable: another user's?)", what, root, unreadable)
		}
		return 0, fmt.Errorf("no process named %s under %s (is the server on this machine?)", what, root)
	}
	// Each tree's CPU, by its top process: the one whose parent is not such a process.
	trees := map[int]time.Duration{}
	for _, st := range byPID {
		top := st
		for seen := 0; seen < len(byPID); seen++ { // a bound, in case of a cycle
			up, ok := byPID[top.ppid]
			if !ok {
				break
			}
			top = up
		}
		trees[top.pid] += st.cpu
	}
	tops := slices.Sorted(maps.Keys(trees))
	if len(tops) == 1 {
		return trees[tops[0]], nil
	}
	if port > 0 {
		listening := listeners(root, port, tops)
		if len(listening) == 1 {
			return trees[listening[0]], nil
		}
	}
	pids := make([]string, len(tops))
	for i, p := range tops {
		pids[i] = strconv.Itoa(p)
	}
	return 0, fmt.Errorf("%d servers named %s (pids %s) and none alone found listening on port %d: cannot tell which one serves the run",
		len(tops), what, strings.Join(pids, ", "), port)
}

// listeners returns the processes of pids that hold a socket listening on TCP
// port, found in root/net/tcp and tcp6 and in each process's open files
// (readable by its user or root); none where they cannot be read.
func listeners(root string, port int, pids []int) []int {
	inodes := map[string]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(root, "net", f))
		if err != nil {
			continue
		}
		for _, inode := range listenInodes(string(b), port) {
			inodes["socket:["+inode+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	var out []int
	for _, pid := range pids {
		dir := filepath.Join(root, strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(fds, func(fd fs.DirEntry) bool {
			l, err := os.Readlink(filepath.Join(dir, fd.Name()))
			return err == nil && inodes[l]
		}) {
			out = append(out, pid)
		}
	}
	return out
}

// listenInodes returns the inodes of the sockets listening on port in a
// /proc/net/tcp or tcp6 table (proc(5)): lines of "sl local_address
// rem_address st … inode …", the address's port in hex, LISTEN being state 0A.
func listenInodes(table string, port int) []string {
	var out []string
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if p, err := strconv.ParseUint(f[1][i+1:], 16, 16); err == nil && int(p) == port {
			out = append(out, f[9])
		}
	}
	return out
}

// serverCPU returns a bench.DurableSetup.ServerCPU: the CPU time of the
// server's processes, named names, when host (the server's, from the DSN or
// address in the variable env) is this machine; otherwise it fails saying so.
// port, if not 0, is the server's TCP port, which tells servers of the same
// name apart.
func serverCPU(env, host string, port int, names []string) func() (time.Duration, error) {
	local := isLocalHost(host)
	return func() (time.Duration, error) {
		if !local {
			return 0, fmt.Errorf("$%s names host %s, not this machine: its processes cannot be read", env, host)
		}
		return readServerCPU(procRoot, names, port)
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

// hostPort splits a host:port address; the port is 0 when it has none.
func hostPort(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.Atoi(p)
	return h, port
}
