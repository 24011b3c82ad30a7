package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// privateServer is a mariadbd of one test's own, on a data directory and a port of its
// own, so that the test may stop it without disturbing the shared server.
type privateServer struct {
	bin  string // mariadbd
	dir  string // holds data/, the socket, the pid file and the error log
	port int

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd was reaped
}

// Sizes that keep a private data directory small and quick to create.
var serverSizes = []string{"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M"}

// findBinary returns the path of the first of names found in PATH or in the usual
// sbin directories, and fails the test when there is none.
func findBinary(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, d := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"} {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	t.Fatalf("none of %v is installed (looked in PATH and /usr/sbin): this test starts a MariaDB server of its own; "+
		"`bash scripts/ensure-mariadb.sh` (or `make db`) installs mariadb-server", names)
	return ""
}

// asRoot returns the --user=root flag MariaDB wants when it runs as root.
func asRoot() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// startPrivateServer creates a data directory, starts mariadbd on it with
// --skip-grant-tables (any user and password get in) on a free port of 127.0.0.1,
// creates the database test, and kills the server in t.Cleanup.
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	s := &privateServer{bin: findBinary(t, "mariadbd", "mysqld")}
	install := findBinary(t, "mariadb-install-db", "mysql_install_db")
	// A short path: the socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "axe2e-db-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s.dir = dir
	if err := os.Mkdir(s.tmpDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--tmpdir=" + s.tmpDir(),
		"--auth-root-authentication-method=normal", "--skip-test-db",
	}, serverSizes...)
	// One bootstrap at a time: two at once in the same process tree have been seen to
	// fail on each other's temporary tables.
	installMu.Lock()
	out, err := exec.Command(install, append(args, asRoot()...)...).CombinedOutput()
	installMu.Unlock()
	if err != nil {
		t.Fatalf("%s: %v\n%s", install, err, tail(string(out), 4000))
	}
	s.port = freePort(t)
	t.Cleanup(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	s.start(t)
	db := s.open(t, "")
	defer func() { _ = db.Close() }()
	if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS test"); err != nil {
		t.Fatal(err)
	}
	return s
}

// freePort returns a TCP port of 127.0.0.1 that nobody listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// start starts mariadbd on the data directory and waits until it answers.
func (s *privateServer) start(t *testing.T) {
	t.Helper()
	if s.cmd != nil {
		t.Fatal("privateServer.start: running already")
	}
	args := append([]string{
		"--no-defaults",
		"--datadir=" + filepath.Join(s.dir, "data"),
		"--socket=" + filepath.Join(s.dir, "sock"),
		"--pid-file=" + filepath.Join(s.dir, "pid"),
		"--tmpdir=" + s.tmpDir(),
		"--log-error=" + s.errLog(),
		"--port=" + strconv.Itoa(s.port),
		"--bind-address=127.0.0.1",
		"--skip-grant-tables",
		"--skip-name-resolve",
	}, serverSizes...)
	cmd := exec.Command(s.bin, append(args, asRoot()...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.bin, err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	exited := s.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	db := s.open(t, "")
	defer func() { _ = db.Close() }()
	pollUntil(t, "the private mariadbd to answer", 20*time.Millisecond, 60*time.Second, func() (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("mariadbd exited: %s", s.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return db.PingContext(ctx) == nil, nil
	})
}

// stop stops the server with SIGTERM and waits until it exited.
func (s *privateServer) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM mariadbd: %v", err)
	}
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case <-s.exited:
	case <-timer.C:
		t.Fatalf("mariadbd still running 60 s after SIGTERM: %s", s.logTail())
	}
	s.cmd = nil
}

// open returns a connection pool to the server as root, without a password, on
// database name ("" for none). The caller closes it.
func (s *privateServer) open(t *testing.T, name string) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
	cfg.DBName = name
	cfg.Timeout = time.Second
	cfg.Logger = discard{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sql.OpenDB(conn)
}

// installMu serialises mariadb-install-db runs of parallel tests.
var installMu sync.Mutex

// tmpDir is the server's own directory for temporary tables and files.
func (s *privateServer) tmpDir() string { return filepath.Join(s.dir, "tmp") }

func (s *privateServer) errLog() string { return filepath.Join(s.dir, "error.log") }

func (s *privateServer) logTail() string {
	b, _ := os.ReadFile(s.errLog())
	return tail(string(bytes.TrimSpace(b)), 2000)
}
