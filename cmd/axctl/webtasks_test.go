package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// storeBundle is a console with actions on a real kernel whose store is
// MariaDB (tables axctl_<name>), and runners on both: db on the tables, web on
// the console. The kind "job" fails until healthy is set.
type storeBundle struct {
	db      *dbBundle
	web     *runner
	k       *kernel.Kernel
	healthy atomic.Bool
}

// hostileError is the error of the failing jobs: markup and a terminal escape
// that clears the screen.
const hostileError = "upstream said no \x1b[2J<img src=x onerror=alert(1)>"

func setupStore(t *testing.T, name string) *storeBundle {
	t.Helper()
	sb := &storeBundle{db: setupDB(t, name)}
	k, err := kernel.New(kernel.Config{Store: sb.db.s, MaxConcurrency: 4, Owner: "axctl-test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register("job", func(context.Context, []byte) error {
		if sb.healthy.Load() {
			return nil
		}
		return errors.New(hostileError)
	}); err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Options{Kernel: k, Store: sb.db.s, Actions: true, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/console/", http.StripPrefix("/ops/console", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = k.Shutdown(ctx)
	})
	sb.k = k
	sb.web = &runner{t: t, client: srv.Client(), env: map[string]string{"AXCTL_URL": srv.URL + "/ops/console/"}}
	return sb
}

// failing submits n durable jobs of one attempt and waits for them to fail, in
// the store too.
func (sb *storeBundle) failing(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		h, err := sb.k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "job", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err == nil {
			t.Fatal("a job succeeded, want it to fail")
		}
		ids = append(ids, h.ID())
	}
	// The kernel records the failures in its next group commits.
	for _, id := range ids {
		waitFor(t, func() bool { return sb.db.state(id) == store.Failed }, "the store to record the failure of "+id)
	}
	slices.Sort(ids)
	return ids
}

func idsOf(p taskPage) []string {
	var ids []string
	for _, tk := range p.Tasks {
		ids = append(ids, tk.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestConsoleTasks: failing durable tasks are dead letters, listed and shown the
// same through the console and the database; requeued through the console, they
// run again and succeed; the rest are purged.
func TestConsoleTasks(t *testing.T) {
	sb := setupStore(t, "console")
	ids := sb.failing(t, 3)

	var viaWeb, viaDB taskPage
	sb.web.jsonOf(&viaWeb, "tasks", "list", "--state", "failed")
	sb.db.jsonOf(&viaDB, "tasks", "list", "--state", "failed")
	if !slices.Equal(idsOf(viaWeb), ids) || !slices.Equal(idsOf(viaDB), ids) {
		t.Fatalf("tasks list --state failed: console %q, database %q; want %q", idsOf(viaWeb), idsOf(viaDB), ids)
	}
	var dead taskPage
	sb.web.jsonOf(&dead, "dead", "list")
	if !slices.Equal(idsOf(dead), ids) {
		t.Errorf("dead list on the console = %q, want %q", idsOf(dead), ids)
	}
	var tk taskRow
	sb.web.jsonOf(&tk, "tasks", "show", ids[0])
	// JSON carries the error intact; a table escapes the terminal's control bytes.
	if tk.State != "failed" || tk.Kind != "job" || !strings.Contains(tk.LastError, hostileError) || tk.Attempt != 1 {
		t.Errorf("tasks show on the console = %+v", tk)
	}
	out := sb.web.ok("tasks", "show", ids[0])
	if !strings.Contains(out, `upstream said no \x1b[2J<img src=x onerror=alert(1)>`) || strings.Contains(out, "\x1b") || !strings.Contains(out, "failed") {
		t.Errorf("tasks show table =\n%q", out)
	}
	if res := sb.web.run("tasks", "show", "no-such-task"); res.code != exitNotFound {
		t.Errorf("tasks show no-such-task on the console = %d %q; want %d", res.code, res.stderr, exitNotFound)
	}
	if res := sb.web.run("tasks", "list", "--owner", "axctl-test"); res.code != exitUsage || !strings.Contains(res.stderr, "epoch") {
		t.Errorf("tasks list --owner NAME on the console = %d %q; want %d", res.code, res.stderr, exitUsage)
	}

	// Requeued through the console, a dead letter runs again, now healthy.
	sb.healthy.Store(true)
	if out := sb.web.ok("dead", "requeue", ids[0]); out != "requeued 1 dead letter(s)\n" {
		t.Errorf("dead requeue on the console = %q", out)
	}
	waitFor(t, func() bool { return sb.db.state(ids[0]) == store.Succeeded }, "the requeued task to succeed")
	res := sb.web.run("dead", "requeue", ids[0])
	if res.code != exitRefused || !strings.Contains(res.stderr, "not a dead letter: succeeded") {
		t.Errorf("dead requeue of a succeeded task = %d %q; want %d", res.code, res.stderr, exitRefused)
	}

	// Purged through the console, confirmed at the prompt.
	sb.web.stdin = "y\n"
	if out := sb.web.ok("dead", "purge", "--all"); out != "purged 2 dead letter(s)\n" {
		t.Errorf("dead purge --all on the console = %q", out)
	}
	if sb.db.state(ids[1]) != 0 || sb.db.state(ids[2]) != 0 || sb.db.state(ids[0]) != store.Succeeded {
		t.Error("dead purge --all: the dead letters are still there, or the succeeded task is gone")
	}
}
