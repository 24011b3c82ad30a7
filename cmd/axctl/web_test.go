package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

// webBundle is a console on a real kernel and scheduler, mounted under /console/
// of a test server, and a runner with --url set through the environment.
type webBundle struct {
	k   *kernel.Kernel
	s   *schedule.Scheduler
	srv *httptest.Server
	r   *runner
}

// setupWeb starts a kernel with a group "upstream", a scheduler and a console
// with o's fields; all stop at the end of the test.
func setupWeb(t *testing.T, o console.Options) *webBundle {
	t.Helper()
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: 4, ZombieGrace: time.Millisecond,
		Groups: map[string]kernel.GroupConfig{"upstream": {PerKey: kernel.Limits{Concurrency: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	s, err := schedule.New(k, schedule.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	o.Kernel, o.Scheduler = k, s
	h, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r := &runner{t: t, client: srv.Client(), env: map[string]string{"AXCTL_URL": srv.URL + "/console"}}
	return &webBundle{k: k, s: s, srv: srv, r: r}
}

// waitFor waits until cond holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestConsoleFigures(t *testing.T) {
	b := setupWeb(t, console.Options{})
	golden(t, "groups", b.r.ok("groups"))

	out := b.r.ok("stats")
	for _, want := range []string{"running 0", "PRIORITY", "\nhigh ", "\nnormal ", "\nlow ", "WAIT P99"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats: no %q in\n%s", want, out)
		}
	}
	var ov struct {
		Priorities []struct {
			Priority string `json:"priority"`
		} `json:"priorities"`
		IntervalMS int64 `json:"interval_ms"`
	}
	b.r.jsonOf(&ov, "stats")
	if len(ov.Priorities) != 3 || ov.Priorities[0].Priority != "high" || ov.IntervalMS != 1000 {
		t.Errorf("stats --json = %+v; want the console's overview", ov)
	}

	// A zombie: a task that ignores its context past its timeout.
	release := make(chan struct{})
	defer close(release)
	if _, err := b.k.TrySubmit(kernel.Task{
		ID: "zombie-<1>", Timeout: time.Millisecond, Retry: &kernel.RetryPolicy{MaxAttempts: 1},
		Run: func(context.Context) error { <-release; return nil },
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { zs := b.k.Zombies(); return len(zs) == 1 && len(zs[0].Stack) > 0 }, "a zombie with its stack")
	out = b.r.ok("zombies", "--stacks")
	if !strings.Contains(out, "zombie-<1>") || !strings.Contains(out, "goroutine") || !strings.HasPrefix(out, "TASK") {
		t.Errorf("zombies --stacks =\n%s", out)
	}

	// Read-only: the in-memory actions are refused (4), and so are schedules'.
	res := b.r.run("pause", "--group", "upstream")
	if res.code != exitRefused || !strings.Contains(res.stderr, "actions are disabled") {
		t.Errorf("pause on a read-only console = %d %q; want %d", res.code, res.stderr, exitRefused)
	}
	// What the console does not serve is a usage error (2), naming --dsn.
	for _, args := range [][]string{{"tasks", "list"}, {"dead", "list"}} {
		res := b.r.run(args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, "--dsn") {
			t.Errorf("axctl %q on a console = %d %q; want %d naming --dsn", args, res.code, res.stderr, exitUsage)
		}
	}
}

func TestConsoleActions(t *testing.T) {
	b := setupWeb(t, console.Options{Actions: true})
	fired := make(chan struct{}, 1)
	e, err := b.s.Add(schedule.Every(time.Hour), func(context.Context, schedule.Fire) error {
		fired <- struct{}{}
		return nil
	}, &schedule.Options{Name: "nightly-report"})
	if err != nil {
		t.Fatal(err)
	}

	// Groups and keys: paused and resumed, through the token fetched from the console.
	if out := b.r.ok("pause", "--group", "upstream"); out != "pause: group \"upstream\"\n" {
		t.Errorf("pause --group upstream = %q", out)
	}
	if out := b.r.ok("groups"); !strings.Contains(out, "upstream  paused") {
		t.Errorf("groups after pause =\n%s", out)
	}
	b.r.ok("resume", "--group", "upstream")
	if out := b.r.ok("groups"); !strings.Contains(out, "upstream  running") {
		t.Errorf("groups after resume =\n%s", out)
	}
	var a actionAnswer
	b.r.jsonOf(&a, "pause", "--group", "upstream", "--key", "api.example")
	if !a.OK || a.Action != "pause" || !strings.Contains(a.Target, "api.example") {
		t.Errorf("pause --key --json = %+v", a)
	}
	b.r.ok("resume", "--priority", "low")
	res := b.r.run("pause", "--group", "nope")
	if res.code != exitUsage || !strings.Contains(res.stderr, "nope") {
		t.Errorf("pause --group nope = %d %q; want %d naming the group", res.code, res.stderr, exitUsage)
	}

	// Schedules: listed, paused, resumed, triggered.
	out := b.r.ok("schedules", "list")
	if !strings.Contains(out, "nightly-report") || !strings.Contains(out, "@every 1h0m0s") || !strings.Contains(out, "active") {
		t.Errorf("schedules list =\n%s", out)
	}
	b.r.ok("schedules", "pause", "nightly-report")
	if !e.Stats().Paused {
		t.Error("schedules pause: the entry is not paused")
	}
	var list struct {
		Schedules []scheduleRow `json:"schedules"`
	}
	b.r.jsonOf(&list, "schedules", "list")
	if len(list.Schedules) != 1 || !list.Schedules[0].Paused {
		t.Errorf("schedules list --json = %+v; want nightly-report paused", list.Schedules)
	}
	b.r.ok("schedules", "resume", "nightly-report")
	b.r.ok("schedules", "trigger", "nightly-report")
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("schedules trigger: the schedule did not fire")
	}
	res = b.r.run("schedules", "trigger", "nope")
	if res.code != exitNotFound || !strings.Contains(res.stderr, `no schedule named "nope"`) {
		t.Errorf("schedules trigger nope = %d %q; want %d", res.code, res.stderr, exitNotFound)
	}

	// A wrong token is refused (4); the environment's token is used.
	b.r.env["AXCTL_TOKEN"] = "wrong"
	res = b.r.run("pause", "--priority", "high")
	if res.code != exitRefused || !strings.Contains(res.stderr, "token") {
		t.Errorf("pause with a wrong token = %d %q; want %d", res.code, res.stderr, exitRefused)
	}
}

// TestConsoleAuthorize: --header carries the credentials the application's
// Authorize hook checks, on reads, the token's fetch and actions alike.
func TestConsoleAuthorize(t *testing.T) {
	b := setupWeb(t, console.Options{Actions: true, Authorize: func(r *http.Request, _ string) error {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			return errors.New("who are you?")
		}
		return nil
	}})
	for _, args := range [][]string{{"groups"}, {"pause", "--group", "upstream"}} {
		if res := b.r.run(args...); res.code != exitRefused || !strings.Contains(res.stderr, "who are you?") {
			t.Errorf("axctl %q without credentials = %d %q; want %d", args, res.code, res.stderr, exitRefused)
		}
	}
	b.r.ok("--header", "Authorization: Bearer s3cret", "pause", "--group", "upstream")
	b.r.ok("groups", "--header", "Authorization: Bearer s3cret")
}

// TestConsoleErrors: a URL that is no console's mount point is a usage error, an
// unreachable console an error.
func TestConsoleErrors(t *testing.T) {
	b := setupWeb(t, console.Options{})
	res := b.r.run("--url", b.srv.URL+"/elsewhere/", "groups")
	if res.code != exitUsage || !strings.Contains(res.stderr, "serves no such path") {
		t.Errorf("groups at a wrong URL = %d %q; want %d", res.code, res.stderr, exitUsage)
	}
	b.srv.Close()
	res = b.r.run("groups")
	if res.code != exitError || !strings.Contains(res.stderr, "console:") {
		t.Errorf("groups with the console down = %d %q; want %d", res.code, res.stderr, exitError)
	}
}
