package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// deadLetters stores three dead letters (one with hostile strings and a long,
// multi-line error), a live task and a succeeded one.
func deadLetters(b *dbBundle) {
	b.insert(
		store.StoredTask{
			ID: "a-failed", State: store.Failed, Attempt: 3, MaxAttempts: 3, LastError: "smtp: 550 mailbox unavailable",
			Payload: []byte("secret-token"), Group: "upstream", Key: "mx.example",
		},
		store.StoredTask{
			ID: "b-timed-out-" + strings.Repeat("x", 60), Kind: "<script>alert(1)</script>", State: store.TimedOut, Attempt: 1,
			LastError: "context deadline exceeded\n\x1b[31mred\x1b[0m and more: " + strings.Repeat("long ", 40),
		},
		store.StoredTask{ID: "c-evicted", Kind: "report.build", State: store.Evicted, Priority: store.Low},
		store.StoredTask{ID: "d-queued", State: store.Queued, Priority: store.High},
		store.StoredTask{ID: "e-done", State: store.Succeeded, Attempt: 1},
	)
}

func TestDeadList(t *testing.T) {
	b := setupDB(t, "deadlist")
	deadLetters(b)
	golden(t, "dead_list", b.ok("dead", "list"))

	// Keyset paging: the first page says where the next starts, on stderr.
	first := b.run("dead", "list", "--limit", "2")
	if first.code != exitOK || !strings.Contains(first.stderr, `next page: --after "b-timed-out-`) {
		t.Fatalf("dead list --limit 2 = %d, stderr %q; want 0 and a --after hint", first.code, first.stderr)
	}
	var p taskPage
	b.jsonOf(&p, "dead", "list", "--limit", "2")
	if len(p.Tasks) != 2 || p.Next != p.Tasks[1].ID {
		t.Fatalf("dead list --limit 2 --json = %+v, want 2 tasks and next = the last ID", p)
	}
	var rest taskPage
	b.jsonOf(&rest, "dead", "list", "--after", p.Next)
	ids := []string{p.Tasks[0].ID, p.Tasks[1].ID}
	for _, tk := range rest.Tasks {
		ids = append(ids, tk.ID)
	}
	if want := []string{"a-failed", "b-timed-out-" + strings.Repeat("x", 60), "c-evicted"}; !slices.Equal(ids, want) || rest.Next != "" {
		t.Errorf("dead letters paged = %q (next %q), want %q", ids, rest.Next, want)
	}
	// JSON keeps the strings intact, and never the payload.
	if rest.Tasks[0].Kind != "report.build" || p.Tasks[1].Kind != "<script>alert(1)</script>" || p.Tasks[0].PayloadBytes != len("secret-token") {
		t.Errorf("dead list --json tasks = %+v", p.Tasks)
	}
	if out := b.ok("dead", "list", "--json"); strings.Contains(out, "secret-token") {
		t.Errorf("dead list --json shows the payload: %s", out)
	}
}

func TestTasksList(t *testing.T) {
	b := setupDB(t, "list")
	deadLetters(b)
	ctx := context.Background()
	o, err := b.s.Join(ctx, "api-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	run := store.StoredTask{ID: "g-running", Kind: "report.build", State: store.Running, Attempt: 1, Fence: store.FenceOfEpoch(o.Epoch) + 1}
	run.CreatedAt, run.UpdatedAt, run.RunAt = t0, t0, t0
	if res, err := b.s.CommitAs(ctx, o, []store.Change{{Op: store.OpInsert, Task: run}}); err != nil || res[0] != nil {
		t.Fatalf("CommitAs() = %v, %v", res, err)
	}
	golden(t, "tasks_list", b.ok("tasks", "list"))

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--state", "failed"}, []string{"a-failed"}},
		{[]string{"--kind", "report.build"}, []string{"c-evicted", "g-running"}},
		{[]string{"--group", "upstream", "--key", "mx.example"}, []string{"a-failed"}},
		{[]string{"--owner", "api-1"}, []string{"g-running"}},
		{[]string{"--owner", itoa(o.Epoch)}, []string{"g-running"}},
		{[]string{"--owner", "pool", "--state", "queued"}, []string{"d-queued"}},
	} {
		var p taskPage
		b.jsonOf(&p, append([]string{"tasks", "list"}, tt.args...)...)
		var ids []string
		for _, tk := range p.Tasks {
			ids = append(ids, tk.ID)
			if tk.ID == "g-running" && (tk.Owner != "api-1" || tk.OwnerEpoch != o.Epoch) {
				t.Errorf("g-running's owner = %q (%d), want api-1 (%d)", tk.Owner, tk.OwnerEpoch, o.Epoch)
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, tt.want) {
			t.Errorf("tasks list %q = %q, want %q", tt.args, ids, tt.want)
		}
	}
	res := b.run("tasks", "list", "--owner", "nobody")
	if res.code != exitNotFound || !strings.Contains(res.stderr, `--owner = "nobody"`) {
		t.Errorf("tasks list --owner nobody = %d %q; want %d", res.code, res.stderr, exitNotFound)
	}
	res = b.run("tasks", "list", "--after", "garbage")
	if res.code != exitUsage || !strings.Contains(res.stderr, "After") {
		t.Errorf("tasks list --after garbage = %d %q; want %d naming the cursor", res.code, res.stderr, exitUsage)
	}

	// Pages: following next visits every task once; prev goes back.
	var seen []string
	f := []string{"tasks", "list", "--limit", "2"}
	var pages []taskPage
	for {
		var p taskPage
		b.jsonOf(&p, f...)
		pages = append(pages, p)
		for _, tk := range p.Tasks {
			seen = append(seen, tk.ID)
		}
		if p.Next == "" {
			break
		}
		f = []string{"tasks", "list", "--limit", "2", "--after", p.Next}
	}
	slices.Sort(seen)
	if len(seen) != 6 || slices.Compact(slices.Clone(seen)) == nil || len(slices.Compact(seen)) != 6 {
		t.Errorf("tasks list pages visited %q, want the 6 tasks once each", seen)
	}
	if len(pages) > 1 && pages[1].Prev != "" {
		var back taskPage
		b.jsonOf(&back, "tasks", "list", "--limit", "2", "--before", pages[1].Prev)
		if len(back.Tasks) != len(pages[0].Tasks) || back.Tasks[0].ID != pages[0].Tasks[0].ID {
			t.Errorf("tasks list --before = %+v, want the first page %+v", back.Tasks, pages[0].Tasks)
		}
	}
}

func TestTasksShow(t *testing.T) {
	b := setupDB(t, "show")
	deadLetters(b)
	golden(t, "tasks_show", b.ok("tasks", "show", "b-timed-out-"+strings.Repeat("x", 60)))
	golden(t, "tasks_show_group", b.ok("tasks", "show", "a-failed"))

	var tk taskRow
	b.jsonOf(&tk, "tasks", "show", "a-failed")
	if tk.State != "failed" || tk.Group != "upstream" || tk.Key != "mx.example" || tk.Attempt != 3 || !tk.UpdatedAt.Equal(t0) {
		t.Errorf("tasks show --json = %+v", tk)
	}
	if out := b.ok("tasks", "show", "a-failed", "--json"); strings.Contains(out, "secret-token") {
		t.Errorf("tasks show shows the payload: %s", out)
	}
	res := b.run("tasks", "show", "nope")
	if res.code != exitNotFound || !strings.Contains(res.stderr, `no task "nope"`) {
		t.Errorf("tasks show nope = %d, %q; want %d naming the ID", res.code, res.stderr, exitNotFound)
	}
}

func TestDeadRequeue(t *testing.T) {
	b := setupDB(t, "requeue")
	deadLetters(b)

	var got struct {
		Requeued int       `json:"requeued"`
		Skipped  []skipped `json:"skipped"`
	}
	b.jsonOf(&got, "dead", "requeue", "a-failed")
	if got.Requeued != 1 || len(got.Skipped) != 0 || b.state("a-failed") != store.Queued {
		t.Fatalf("dead requeue a-failed = %+v, state %v; want it requeued", got, b.state("a-failed"))
	}

	// A live task is refused (4), an unknown one not found (3); the others are requeued.
	res := b.run("dead", "requeue", "c-evicted", "d-queued", "c-evicted")
	if res.code != exitRefused || res.stdout != "requeued 1 dead letter(s)\n" || !strings.Contains(res.stderr, `"d-queued": not a dead letter: queued`) || b.state("c-evicted") != store.Queued {
		t.Errorf("dead requeue c-evicted d-queued = %d, %q, c-evicted %v; want %d naming d-queued", res.code, res.stderr, b.state("c-evicted"), exitRefused)
	}
	res = b.run("dead", "requeue", "zz-unknown")
	if res.code != exitNotFound || !strings.Contains(res.stderr, `"zz-unknown": no such task`) {
		t.Errorf("dead requeue zz-unknown = %d, %q; want %d", res.code, res.stderr, exitNotFound)
	}

	// --all takes every dead letter left, page after page.
	var more []store.StoredTask
	for i := range 1200 {
		more = append(more, store.StoredTask{ID: "f-" + itoa(1000+i), State: store.Failed})
	}
	b.insert(more...)
	if out := b.ok("dead", "requeue", "--all"); out != "requeued 1201 dead letter(s)\n" {
		t.Errorf("dead requeue --all = %q", out)
	}
	if n, err := b.s.CountDeadLetters(context.Background()); err != nil || n != 0 {
		t.Errorf("dead letters after requeue --all = %d, %v; want 0", n, err)
	}
}

func TestDeadPurge(t *testing.T) {
	b := setupDB(t, "purge")
	deadLetters(b)

	// Not confirmed: refused, nothing deleted.
	b.r.stdin = "n\n"
	res := b.run("dead", "purge", "a-failed")
	if res.code != exitRefused || !strings.Contains(res.stderr, "purge 1 dead letter(s)?") || b.state("a-failed") != store.Failed {
		t.Fatalf("dead purge a-failed, answered n = %d, %q; want %d and the task kept", res.code, res.stderr, exitRefused)
	}
	b.r.stdin = "" // no answer at all: refused too
	if res := b.run("dead", "purge", "a-failed"); res.code != exitRefused || b.state("a-failed") != store.Failed {
		t.Fatalf("dead purge with no answer = %d; want %d", res.code, exitRefused)
	}
	b.r.stdin = "y\n"
	if out := b.ok("dead", "purge", "a-failed"); out != "purged 1 dead letter(s)\n" || b.state("a-failed") != 0 {
		t.Fatalf("dead purge a-failed, answered y = %q, state %v", out, b.state("a-failed"))
	}

	// A live task is refused and kept; the dead letter beside it is purged.
	b.r.stdin = ""
	res = b.run("dead", "purge", "--yes", "c-evicted", "d-queued")
	if res.code != exitRefused || b.state("d-queued") != store.Queued || b.state("c-evicted") != 0 {
		t.Errorf("dead purge --yes c-evicted d-queued = %d %q; want %d, c-evicted gone and d-queued kept", res.code, res.stderr, exitRefused)
	}

	b.insert(store.StoredTask{ID: "g-abandoned", State: store.Abandoned}, store.StoredTask{ID: "h-failed", State: store.Failed})
	b.r.stdin = "no\n"
	res = b.run("dead", "purge", "--all")
	if res.code != exitRefused || !strings.Contains(res.stderr, "purge all 3 dead letters?") || b.state("h-failed") != store.Failed {
		t.Fatalf("dead purge --all, answered no = %d %q; want %d, asking about 3", res.code, res.stderr, exitRefused)
	}
	var got struct {
		Purged int `json:"purged"`
	}
	b.jsonOf(&got, "dead", "purge", "--all", "--yes")
	if got.Purged != 3 || b.state("d-queued") != store.Queued || b.state("e-done") != store.Succeeded {
		t.Errorf("dead purge --all --yes = %+v; want 3 purged, the live and succeeded tasks kept", got)
	}
}

func TestSchedulesDB(t *testing.T) {
	b := setupDB(t, "sched")
	ctx := context.Background()
	next := time.Date(2026, 12, 6, 2, 30, 0, 0, time.UTC)
	for _, sc := range []store.StoredSchedule{
		{Name: "nightly-report", Spec: "30 2 * * *", Next: next},
		{Name: "every-minute", Spec: "@every 1m", Next: t0.Add(time.Minute), Paused: true},
		{Name: "ended", Spec: "once"},
	} {
		if _, _, err := b.s.UpsertSchedule(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	// nightly-report fired once, as a kernel fires it.
	occ := store.StoredTask{
		ID: store.OccurrenceID("nightly-report", next), Kind: "report.build", Payload: []byte("p"), Priority: store.Low,
		RunAt: next, Timeout: time.Minute, MaxAttempts: 2, Fence: 1, State: store.Queued, CreatedAt: t0, UpdatedAt: t0,
	}
	next2 := next.Add(24 * time.Hour)
	if _, fired, err := b.s.FireSchedule(ctx, store.ScheduleFire{
		Name: "nightly-report", Expect: next, Next: next2,
		Occurrences: []store.Change{{Op: store.OpInsert, Task: occ, Pool: true}},
	}); err != nil || !fired {
		t.Fatalf("FireSchedule() = %v, %v", fired, err)
	}
	golden(t, "schedules_list_db", b.ok("schedules", "list"))

	b.ok("schedules", "resume", "every-minute")
	b.ok("schedules", "pause", "nightly-report")
	var list struct {
		Schedules []scheduleRow `json:"schedules"`
	}
	b.jsonOf(&list, "schedules", "list")
	paused, ended := map[string]bool{}, map[string]bool{}
	for _, s := range list.Schedules {
		paused[s.Name], ended[s.Name] = s.Paused, s.Ended
	}
	if len(list.Schedules) != 3 || paused["every-minute"] || !paused["nightly-report"] || !ended["ended"] || ended["every-minute"] {
		t.Fatalf("schedules list --json after resume and pause = %+v", list.Schedules)
	}

	// Trigger: refused while paused, and for a schedule that never fired.
	for _, tt := range []struct {
		name string
		code int
		err  string
	}{
		{"nightly-report", exitRefused, "is paused"},
		{"every-minute", exitRefused, "never fired"},
		{"nope", exitNotFound, `no schedule "nope"`},
		{"bad name!", exitUsage, "schedule name"},
	} {
		res := b.run("schedules", "trigger", tt.name)
		if res.code != tt.code || !strings.Contains(res.stderr, tt.err) {
			t.Errorf("schedules trigger %q = %d %q; want %d with %q", tt.name, res.code, res.stderr, tt.code, tt.err)
		}
	}
	if res := b.run("schedules", "pause", "nope"); res.code != exitNotFound {
		t.Errorf("schedules pause nope = %d, want %d", res.code, exitNotFound)
	}

	// Resumed, it fires a copy of its last occurrence now, into the pool, and keeps
	// its next time.
	b.ok("schedules", "resume", "nightly-report")
	before, err := b.s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.ok("schedules", "trigger", "nightly-report")
	sc, err := b.s.GetSchedule(ctx, "nightly-report")
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Next.Equal(next2) || sc.Last.Before(before.Truncate(time.Millisecond)) {
		t.Fatalf("after trigger: next %v last %v; want next %v and last now", sc.Next, sc.Last, next2)
	}
	got, err := b.s.Get(ctx, store.OccurrenceID("nightly-report", sc.Last))
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != occ.Kind || string(got.Payload) != "p" || got.Priority != store.Low || got.Timeout != time.Minute ||
		got.MaxAttempts != 2 || got.State != store.Queued || !got.RunAt.Equal(sc.Last) {
		t.Errorf("the triggered occurrence = %+v; want a copy of %+v due at %v", got, occ, sc.Last)
	}
}

func TestOwnersDB(t *testing.T) {
	b := setupDB(t, "owners")
	ctx := context.Background()
	a, err := b.s.Join(ctx, "api-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.s.Join(ctx, "worker-<b>", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.s.Leave(ctx, w); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Owners []ownerRow `json:"owners"`
	}
	b.jsonOf(&got, "owners")
	live := map[string]bool{}
	for _, o := range got.Owners {
		live[o.Name] = o.Live
	}
	if len(got.Owners) != 2 || !live["api-1"] || live["worker-<b>"] {
		t.Fatalf("owners --json = %+v; want api-1 live and worker-<b> ended", got.Owners)
	}
	out := b.ok("owners")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(out, "api-1") || !strings.Contains(out, itoa(a.Epoch)) {
		t.Errorf("owners =\n%s", out)
	}
}

func TestMigrate(t *testing.T) {
	b := setupDB(t, "migrate")
	if err := b.s.Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := b.run("dead", "list")
	if res.code != exitError || !strings.Contains(res.stderr, "table axctl_migrate does not exist") || !strings.Contains(res.stderr, "axctl migrate") {
		t.Fatalf("dead list on no table = %d %q; want %d naming the table and migrate", res.code, res.stderr, exitError)
	}
	if out := b.ok("migrate"); out != "migrate: axctl_migrate\n" {
		t.Errorf("migrate = %q", out)
	}
	kindIndexes := func() int {
		var n int
		err := b.s.DB().QueryRow("SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() "+
			"AND table_name = ? AND column_name = 'kind'", b.table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := kindIndexes(); n != 0 {
		t.Fatalf("migrate made %d indexes on kind, want none without --list-indexes", n)
	}
	if out := b.ok("migrate", "--list-indexes"); out != "migrate: axctl_migrate\n" { // idempotent, adding the indexes
		t.Errorf("migrate --list-indexes = %q", out)
	}
	if n := kindIndexes(); n != 1 {
		t.Errorf("migrate --list-indexes made %d indexes on kind, want 1", n)
	}
	b.ok("dead", "list")
}

// TestUsage checks the exit status and the message of bad command lines: each
// names the flag or argument at fault.
func TestUsage(t *testing.T) {
	r := &runner{t: t, env: map[string]string{}}
	dsn := "--dsn=" + testDSN()
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		code int
		err  string
	}{
		{"no command", nil, nil, exitUsage, "no command"},
		{"unknown command", []string{dsn, "tasks", "frob"}, nil, exitUsage, `unknown command "tasks frob"`},
		{"unknown flag", []string{dsn, "dead", "list", "--frob"}, nil, exitUsage, "-frob"},
		{"no target", []string{"dead", "list"}, nil, exitUsage, "--dsn or --url"},
		{"both targets", []string{dsn, "--url", "http://x/", "dead", "list"}, nil, exitUsage, "--dsn and --url"},
		{"both in env", []string{"dead", "list"}, map[string]string{"AXCTL_DSN": "x", "AXCTL_URL": "y"}, exitUsage, "$AXCTL_DSN and $AXCTL_URL"},
		{"limit", []string{dsn, "dead", "list", "--limit", "0"}, nil, exitUsage, "--limit = 0"},
		{"limit max", []string{dsn, "tasks", "list", "--limit=1001"}, nil, exitUsage, "--limit = 1001"},
		{"state", []string{dsn, "tasks", "list", "--state", "bogus"}, nil, exitUsage, `--state = "bogus"`},
		{"key without group", []string{dsn, "tasks", "list", "--key", "k"}, nil, exitUsage, `--key = "k": needs --group`},
		{"show without ID", []string{dsn, "tasks", "show"}, nil, exitUsage, "tasks show: want ID"},
		{"show two IDs", []string{dsn, "tasks", "show", "a", "b"}, nil, exitUsage, "got 2"},
		{"requeue nothing", []string{dsn, "dead", "requeue"}, nil, exitUsage, "or --all"},
		{"requeue both", []string{dsn, "dead", "requeue", "a", "--all"}, nil, exitUsage, "not both"},
		{"width", []string{dsn, "--width", "10", "owners"}, nil, exitUsage, "--width = 10"},
		{"table", []string{dsn, "--table", "a-b", "owners"}, nil, exitUsage, `--table = "a-b"`},
		{"dsn", []string{"--dsn", "::nope", "owners"}, nil, exitUsage, "--dsn"},
		{"url", []string{"--url", "ftp://x", "stats"}, nil, exitUsage, `--url = "ftp://x"`},
		{"header", []string{"--url", "http://x/", "--header", "nocolon", "stats"}, nil, exitUsage, "-header"},
		{"stats on the database", []string{dsn, "stats"}, nil, exitUsage, "stats: needs --url"},
		{"migrate on a console", []string{"--url", "http://x/", "migrate"}, nil, exitUsage, "migrate: needs --dsn"},
		{"pause without selector", []string{"--url", "http://x/", "pause"}, nil, exitUsage, "exactly one of --group"},
		{"pause priority", []string{"--url", "http://x/", "pause", "--priority", "urgent"}, nil, exitUsage, `--priority = "urgent"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r.env = tt.env
			res := r.run(tt.args...)
			if res.code != tt.code || !strings.Contains(res.stderr, tt.err) {
				t.Errorf("axctl %q = %d, stderr %q; want %d with %q", tt.args, res.code, res.stderr, tt.code, tt.err)
			}
			if res.stdout != "" && len(tt.args) > 0 {
				t.Errorf("axctl %q wrote to stdout: %q", tt.args, res.stdout)
			}
		})
	}
	// help: the commands, exit 0.
	if out := r.ok("help"); !strings.Contains(out, "dead requeue") || !strings.Contains(out, "Exit status") {
		t.Errorf("axctl help = %q", out)
	}
	if res := r.run("dead", "list", "-h"); res.code != exitOK || !strings.Contains(res.stdout, "-limit") {
		t.Errorf("axctl dead list -h = %d %q", res.code, res.stdout)
	}
}
