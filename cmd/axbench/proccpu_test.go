package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// statLine is a /proc/<pid>/stat line of a PostgreSQL backend (proc(5)):
// utime 1234, stime 567, cutime 8, cstime 2 ticks.
const statLine = "2242 (postgres) S 2241 2241 2241 0 -1 4194624 2031 0 0 0 1234 567 8 2 20 0 1 0 1017 225988608 7290 18446744073709551615 1 1 0 0 0 0 4194304 19935232 1082133507 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       procStat
		wantErr    string
	}{
		{"postgres", statLine, procStat{pid: 2242, ppid: 2241, comm: "postgres", cpu: 18110 * time.Millisecond}, ""},
		{
			"comm with spaces and parentheses", "77 (a) b (c) R 1 77 77 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 5 0 0",
			procStat{pid: 77, ppid: 1, comm: "a) b (c", cpu: 1500 * time.Millisecond},
			"",
		},
		{"no comm", "77 postgres S 1", procStat{}, "no (comm)"},
		{"short", "77 (postgres) S 1 2 3", procStat{}, "fields after the comm"},
		{"bad utime", strings.Replace(statLine, " 1234 ", " x ", 1), procStat{}, "utime"},
		{"bad pid", "x" + statLine, procStat{}, "pid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.line)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("parseStat() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseStat() = %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
}

// procFixture writes a process table under a temporary directory: one stat
// file per "pid ppid comm ticks" entry (ticks split into utime and cutime).
func procFixture(t *testing.T, procs ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range procs {
		var pid, ppid, ticks int
		var comm string
		if _, err := fmt.Sscan(p, &pid, &ppid, &comm, &ticks); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, fmt.Sprint(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%d (%s) S %d 1 1 0 -1 0 0 0 0 0 %d 0 %d 0 20 0 1 0 5 0 0\n", pid, comm, ppid, ticks-ticks/2, ticks/2)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "self"), 0o755); err != nil { // not a pid: skipped
		t.Fatal(err)
	}
	return root
}

// tcpTable is a /proc/net/tcp with a socket listening on 127.0.0.1:5433
// (inode 4242), one on 3306 and a connection from port 5433.
const tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1539 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   107        0 5151 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1539 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000   106        0 6161 1 0000000000000000 20 4 30 10 -1
`

func TestReadServerCPU(t *testing.T) {
	twoServers := []string{"100 1 postgres 5", "101 100 postgres 5", "400 1 postgres 70", "401 400 postgres 30", "402 401 postgres 1"}
	tests := []struct {
		name    string
		procs   []string
		port    int
		listen  int // the pid holding the socket of tcpTable's port 5433, if not 0
		want    time.Duration
		wantErr string
	}{
		{"postgres: the postmaster and its backends, summed", []string{
			"100 1 postgres 500", "101 100 postgres 20", "102 100 postgres 7", "200 1 mariadbd 900", "300 1 bash 3",
		}, 5432, 0, 5270 * time.Millisecond, ""},
		{"none", []string{"200 1 mariadbd 900"}, 5432, 0, 0, "no process named postgres or postmaster under"},
		{"two servers, one on the port", twoServers, 5433, 400, 1010 * time.Millisecond, ""},
		{
			"two servers, none on the port", twoServers, 5432, 400, 0,
			"2 servers named postgres or postmaster (pids 100, 400) and none alone found listening on port 5432",
		},
		{"two servers, no port", twoServers, 0, 400, 0, "2 servers named"},
		{"two servers, no socket readable", twoServers, 5433, 0, 0, "2 servers named"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := procFixture(t, tt.procs...)
			if err := os.Mkdir(filepath.Join(root, "net"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "net", "tcp"), []byte(tcpTable), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.listen != 0 {
				fd := filepath.Join(root, fmt.Sprint(tt.listen), "fd")
				if err := os.Mkdir(fd, 0o755); err != nil {
					t.Fatal(err)
				}
				for i, l := range []string{"/dev/null", "socket:[6161]", "socket:[4242]"} {
					if err := os.Symlink(l, filepath.Join(fd, fmt.Sprint(i))); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := readServerCPU(root, postgresProcs, tt.port)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("readServerCPU() = %v, %v, want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("readServerCPU() = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
	if _, err := readServerCPU(filepath.Join(t.TempDir(), "none"), redisProcs, 6379); err == nil {
		t.Error("readServerCPU() of a missing process table: no error")
	}
}

func TestListenInodes(t *testing.T) {
	for port, want := range map[int]string{5433: "4242", 3306: "5151", 41394: ""} {
		if got := strings.Join(listenInodes(tcpTable, port), ","); got != want {
			t.Errorf("listenInodes(port %d) = %q, want %q", port, got, want)
		}
	}
}

// TestServerCPUHost checks that a server named by a host that is not this
// machine is not measured, and says why.
func TestServerCPUHost(t *testing.T) {
	for _, h := range []string{"", "localhost", "127.0.0.1", "::1", "[::1]", "/var/run/mysqld/mysqld.sock"} {
		if !isLocalHost(h) {
			t.Errorf("isLocalHost(%q) = false, want true", h)
		}
	}
	for _, h := range []string{"db.example", "192.0.2.7"} {
		if isLocalHost(h) {
			t.Errorf("isLocalHost(%q) = true, want false", h)
		}
	}
	_, err := serverCPU(dsnEnv, "192.0.2.7", 3306, mariadbProcs)()
	if err == nil || !strings.Contains(err.Error(), "$"+dsnEnv+" names host 192.0.2.7, not this machine") {
		t.Errorf("serverCPU() of a remote host: error %v, want one naming $%s and the host", err, dsnEnv)
	}
	type addr struct {
		host string
		port int
	}
	dsns := map[string]addr{
		"root@tcp(127.0.0.1:3307)/test":            {"127.0.0.1", 3307},
		"u:p@tcp(db.example:3306)/test":            {"db.example", 3306},
		"root@unix(/run/mysqld/mysqld.sock)/test":  {"/run/mysqld/mysqld.sock", 0},
		"root@tcp([::1]:3306)/test?parseTime=true": {"::1", 3306},
		"not a dsn ((":                        {"", 0},
		"root@tcp(127.0.0.1)/test?timeout=2s": {"127.0.0.1", 3306},
	}
	for dsn, want := range dsns {
		if h, p := mysqlAddr(dsn); h != want.host || p != want.port {
			t.Errorf("mysqlAddr(%q) = %q, %d, want %q, %d", dsn, h, p, want.host, want.port)
		}
	}
}
