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
		{"comm with spaces and parentheses", "77 (a) b (c) R 1 77 77 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 5 0 0",
			procStat{pid: 77, ppid: 1, comm: "a) b (c", cpu: 1500 * time.Millisecond}, ""},
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

func TestReadServerCPU(t *testing.T) {
	tests := []struct {
		name    string
		procs   []string
		want    time.Duration
		wantErr string
	}{
		{"postgres: the postmaster and its backends, summed", []string{
			"100 1 postgres 500", "101 100 postgres 20", "102 100 postgres 7", "200 1 mariadbd 900", "300 1 bash 3",
		}, 5270 * time.Millisecond, ""},
		{"none", []string{"200 1 mariadbd 900"}, 0, "no process named postgres or postmaster under"},
		{"two servers", []string{"100 1 postgres 5", "101 100 postgres 5", "400 1 postgres 5"}, 0,
			"2 servers named postgres or postmaster (pids 100, 400)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readServerCPU(procFixture(t, tt.procs...), postgresProcs)
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
	if _, err := readServerCPU(filepath.Join(t.TempDir(), "none"), redisProcs); err == nil {
		t.Error("readServerCPU() of a missing process table: no error")
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
	_, err := serverCPU(dsnEnv, "192.0.2.7", mariadbProcs)()
	if err == nil || !strings.Contains(err.Error(), "$"+dsnEnv+" names host 192.0.2.7, not this machine") {
		t.Errorf("serverCPU() of a remote host: error %v, want one naming $%s and the host", err, dsnEnv)
	}
	dsns := map[string]string{
		"root@tcp(127.0.0.1:3306)/test":            "127.0.0.1",
		"u:p@tcp(db.example:3306)/test":            "db.example",
		"root@unix(/run/mysqld/mysqld.sock)/test":  "/run/mysqld/mysqld.sock",
		"root@tcp([::1]:3306)/test?parseTime=true": "::1",
		"not a dsn ((":                        "",
		"root@tcp(127.0.0.1)/test?timeout=2s": "127.0.0.1",
	}
	for dsn, want := range dsns {
		if got := mysqlHost(dsn); got != want {
			t.Errorf("mysqlHost(%q) = %q, want %q", dsn, got, want)
		}
	}
}
