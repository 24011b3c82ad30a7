package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the output")

// dsnDefault is the database the tests use unless AX_MYSQL_DSN names another.
const dsnDefault = "root@tcp(127.0.0.1:3306)/test"

func testDSN() string {
	if dsn := os.Getenv("AX_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return dsnDefault
}

// result is what one run of axctl did.
type result struct {
	code           int
	stdout, stderr string
}

// runner runs axctl in the test's process.
type runner struct {
	t      *testing.T
	client *http.Client
	env    map[string]string
	stdin  string
}

// run runs axctl with args and returns its exit status and output.
func (r *runner) run(args ...string) result {
	r.t.Helper()
	var out, errs bytes.Buffer
	c := &cli{
		stdin: strings.NewReader(r.stdin), stdout: &out, stderr: &errs, client: r.client,
		getenv: func(k string) string { return r.env[k] },
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := c.main(ctx, args)
	return result{code: code, stdout: out.String(), stderr: errs.String()}
}

// ok runs axctl, fails the test unless it exits 0, and returns its stdout.
func (r *runner) ok(args ...string) string {
	r.t.Helper()
	res := r.run(args...)
	if res.code != exitOK {
		r.t.Fatalf("axctl %s = exit %d, stderr %q; want 0", strings.Join(args, " "), res.code, res.stderr)
	}
	return res.stdout
}

// jsonOf runs axctl with --json and decodes its stdout into v.
func (r *runner) jsonOf(v any, args ...string) {
	r.t.Helper()
	out := r.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		r.t.Fatalf("axctl %s --json: %v in %s", strings.Join(args, " "), err, out)
	}
}

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
	for i, line := range strings.Split(got, "\n") {
		if n := len([]rune(line)); n > widthDefault {
			t.Errorf("%s line %d has %d characters, more than %d: %q", name, i+1, n, widthDefault, line)
		}
	}
}

// dbBundle is a store on tables of the test's own (axctl_<name>), and a runner with
// --dsn and --table set through the environment and flags.
type dbBundle struct {
	s     *mysqlstore.Store
	table string
	r     *runner
}

// setupDB makes the tables axctl_<name> (dropped at the end of the test).
func setupDB(t *testing.T, name string) *dbBundle {
	t.Helper()
	table := "axctl_" + name
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Drop(ctx); err != nil {
		t.Fatalf("no MariaDB at AX_MYSQL_DSN (default %s)? %v: run scripts/ensure-mariadb.sh", dsnDefault, err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Drop(context.Background()); err != nil {
			t.Error(err)
		}
		_ = s.Close()
	})
	return &dbBundle{s: s, table: table, r: &runner{t: t, env: map[string]string{"AXCTL_DSN": testDSN()}}}
}

// run runs axctl on b's table.
func (b *dbBundle) run(args ...string) result {
	b.r.t.Helper()
	return b.r.run(append([]string{"--table", b.table}, args...)...)
}

func (b *dbBundle) ok(args ...string) string {
	b.r.t.Helper()
	return b.r.ok(append([]string{"--table", b.table}, args...)...)
}

func (b *dbBundle) jsonOf(v any, args ...string) {
	b.r.t.Helper()
	b.r.jsonOf(v, append([]string{"--table", b.table}, args...)...)
}

// t0 is the tasks' times: fixed, so that the tables are.
var t0 = time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)

// insert stores tasks as they are (their State included).
func (b *dbBundle) insert(ts ...store.StoredTask) {
	t := b.r.t
	t.Helper()
	changes := make([]store.Change, len(ts))
	for i := range ts {
		tk := ts[i]
		if tk.Kind == "" {
			tk.Kind = "email.send"
		}
		if tk.CreatedAt.IsZero() {
			tk.CreatedAt = t0
		}
		if tk.UpdatedAt.IsZero() {
			tk.UpdatedAt = t0.Add(time.Duration(i) * time.Second)
		}
		if tk.RunAt.IsZero() {
			tk.RunAt = t0
		}
		if tk.Fence == 0 {
			tk.Fence = 1
		}
		changes[i] = store.Change{Op: store.OpInsert, Task: tk}
	}
	res, err := b.s.Commit(context.Background(), changes)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range res {
		if err != nil {
			t.Fatalf("insert %s: %v", ts[i].ID, err)
		}
	}
}

// state returns the stored state of id, or 0 when it is gone.
func (b *dbBundle) state(id string) store.State {
	b.r.t.Helper()
	tk, err := b.s.Get(context.Background(), id)
	if err != nil {
		return 0
	}
	return tk.State
}
