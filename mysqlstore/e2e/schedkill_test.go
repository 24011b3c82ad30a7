package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
)

// The durable-schedule kill test's knobs, and the environment of its child,
// TestSchedKillChild (which reads the multi-process tests' environment as well).
const (
	envSchedSeconds = "AX_E2E_SCHED_SECONDS" // how long the schedules run under kills; default 30
	envSchedKills   = "AX_E2E_SCHED_KILLS"   // kills of one process while another lives; default schedKillsDefault
	envSchedDowns   = "AX_E2E_SCHED_DOWNS"   // windows with every process down; default schedDownsDefault
	envSchedMisfire = "AX_E2E_SCHED_MISFIRE" // the misfire policy of schedTick: once (default), skip or all

	envSchedChild = "AX_E2E_SCHED_CHILD" // "1": TestSchedKillChild runs

	schedSecondsDefault = 30
	schedKillsDefault   = 12
	schedDownsDefault   = 2
	schedKind           = "e2e.sched"
	schedPeriod         = 100 * time.Millisecond
	schedWork           = 30 * time.Millisecond // the longest work of an occurrence's attempt
	// schedDownFor is how long every process stays down in a down window: longer than
	// schedTick's grace and schedSlack, so that targets misfire.
	schedDownFor = 3500 * time.Millisecond
	// schedSlack is how long a process may take to fire a due target: a target due
	// at least that long before the kill of the last live process must have fired.
	schedSlack = 500 * time.Millisecond
	// schedEarly is how much earlier than its target a kernel's clock may read when
	// its wheel fires the target (a tick, and the stored times' millisecond rounding).
	schedEarly = 2 * time.Millisecond
	schedStats = "SCHED-STATS"
)

// schedSpec is one durable schedule the children follow, every schedPeriod.
type schedSpec struct {
	name  string
	grace time.Duration
	// once: the policy is MisfireOnce whatever AX_E2E_SCHED_MISFIRE says, and a child
	// that finds the schedule's stored next target passed more than the grace ago
	// waits (alignCatchUp) so that its first computation finds no target within the
	// grace: the catch-up is what fires.
	once bool
}

// The schedules of TestSchedKill:
//   - schedTick, with a grace of two seconds, longer than the stalls of a loaded
//     machine: every target due while a process follows it must fire;
//   - schedCatchUp, with a grace shorter than the period, so that a computation finds
//     at most one target within the grace and MisfireOnce's catch-up (no target on
//     time: the latest missed one fires) is told apart from an on-time fire; a stall
//     longer than the period misfires a target there.
var (
	schedTick    = schedSpec{name: "e2e-tick", grace: 2 * time.Second}
	schedCatchUp = schedSpec{name: "e2e-catchup", grace: 10 * time.Millisecond, once: true}
	schedSpecs   = []schedSpec{schedTick, schedCatchUp}
)

// TestSchedKillChild is the child process of TestSchedKill; without
// AX_E2E_SCHED_CHILD it returns at once. It runs a kernel as owner
// AX_E2E_MULTI_OWNER on the table AX_E2E_MULTI_TABLE and follows the durable
// schedules schedSpecs, each Every(schedPeriod) with its grace, OverlapAllow and the
// misfire policy AX_E2E_SCHED_MISFIRE (MisfireOnce for a spec with once). Each attempt
// of an occurrence inserts a row into <table>_runs as it begins (task: the occurrence
// ID, token: its target in unix ms) and sets the row's end once its work (up to
// schedWork) is done. It writes a byte to fd 3 once it follows the schedules. Its
// stdin commands: 'q' shuts the kernel down and prints a MULTI-STATS line and a
// SCHED-STATS line per schedule; any other byte does nothing (the parent pauses the
// schedules in the store); at EOF it returns at once.
func TestSchedKillChild(t *testing.T) {
	if os.Getenv(envSchedChild) != "1" {
		return
	}
	dsn := os.Getenv(envMultiDSN)
	table := os.Getenv(envMultiTable)
	runs := table + "_runs"
	owner := os.Getenv(envMultiOwner)
	gen := envInt(t, envMultiGen, 0)
	lease := envDuration(t, envMultiLease)
	policy := misfirePolicy(t, os.Getenv(envSchedMisfire))
	pid := os.Getpid()

	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()
	side, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	side.SetMaxOpenConns(4)
	side.SetMaxIdleConns(4)
	defer func() { _ = side.Close() }()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{Table: table, Retention: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	k, err := kernel.New(kernel.Config{Store: s, Owner: owner, Lease: lease, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	var seq atomic.Int64
	err = k.Register(schedKind, func(ctx context.Context, _ []byte) error {
		start := time.Now().UnixMicro()
		info, ok := kernel.TaskInfo(ctx)
		name, target, isOcc := kernel.OccurrenceOf(ctx)
		known := slices.ContainsFunc(schedSpecs, func(sp schedSpec) bool { return sp.name == name })
		if !ok || !isOcc || !known || info.ID != kernel.OccurrenceID(name, target) {
			return kernel.Permanent(fmt.Errorf("task %q: OccurrenceOf = %q, %v, %v", info.ID, name, target, isOcc))
		}
		key := fmt.Sprintf("%d-%d", pid, seq.Add(1))
		// The records outlive the attempt's context, as TestMultiChild's do.
		rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		sideExec(rec, side, "INSERT IGNORE INTO `"+runs+"` (k, task, token, attempt, pid, owner, gen, start_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			key, info.ID, strconv.FormatInt(target.UnixMilli(), 10), info.Attempt, pid, owner, gen, start)
		defer func() {
			sideExec(rec, side, "UPDATE `"+runs+"` SET end_us = ? WHERE k = ?", time.Now().UnixMicro(), key)
		}()
		w := time.NewTimer(rand.N(schedWork + 1))
		defer w.Stop()
		select {
		case <-w.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	scs := make([]*kernel.Scheduled, len(schedSpecs))
	for i, sp := range schedSpecs {
		o := &kernel.ScheduleOptions{Name: sp.name, Grace: sp.grace, Misfire: policy, Overlap: kernel.OverlapAllow}
		if sp.once {
			o.Misfire = kernel.MisfireOnce
			alignCatchUp(t, s, sp)
		}
		if scs[i], err = k.ScheduleDurable(kernel.Every(schedPeriod), schedKind, nil, o); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = progress.Write([]byte{'u'})

	quit, gone := make(chan struct{}), make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, err := os.Stdin.Read(b[:]); err != nil {
				close(gone)
				return
			}
			if b[0] == 'q' {
				close(quit)
				return
			}
		}
	}()
	select {
	case <-quit:
	case <-gone:
		return // the parent went away
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	st := k.Stats().Store
	fmt.Printf("%s refused=%d errors=%d commits=%d\n", multiStatsTag, st.Refused, st.Errors, st.Commits)
	for _, sc := range scs {
		ss := sc.Stats()
		fmt.Printf("%s name=%s fires=%d misfires=%d\n", schedStats, sc.Name(), ss.Fires, ss.Misfires)
	}
}

// alignCatchUp waits, when the stored next target of the schedule sp passed more than
// its grace ago, until the time is the grace and 5 ms after the latest passed target
// (or the next one's). It is a wait on the wall clock, where the targets are, not a
// synchronization.
func alignCatchUp(t *testing.T, s *mysqlstore.Store, sp schedSpec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.GetSchedule(ctx, sp.name)
	if errors.Is(err, kernel.ErrUnknownSchedule) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if st.Paused || st.Next.IsZero() || now.Sub(st.Next) <= sp.grace {
		return
	}
	latest := st.Next.Add(now.Sub(st.Next) / schedPeriod * schedPeriod)
	at := latest.Add(sp.grace + 5*time.Millisecond)
	if !at.After(now) {
		at = at.Add(schedPeriod)
	}
	w := time.NewTimer(time.Until(at))
	defer w.Stop()
	<-w.C
}

// misfirePolicy parses a misfire policy's name; "" is MisfireOnce.
func misfirePolicy(t testing.TB, v string) kernel.Misfire {
	t.Helper()
	switch v {
	case "", "once":
		return kernel.MisfireOnce
	case "skip":
		return kernel.MisfireSkip
	case "all":
		return kernel.MisfireAll
	}
	t.Fatalf("%s = %q: want once, skip or all", envSchedMisfire, v)
	return 0
}

// downWindow is a time when every process was down: from the kill of the last live
// one to when the parent saw the first restarted one follow the schedules again.
type downWindow struct{ from, to time.Time }

// TestSchedKill runs three processes, owners p0, p1 and p2 with a lease of
// multiLease, on one table, each following the durable schedules schedSpecs (every
// 100 ms, OverlapAllow; schedTick's misfire policy is AX_E2E_SCHED_MISFIRE, once by
// default) for AX_E2E_SCHED_SECONDS (30 by default). It kills AX_E2E_SCHED_KILLS
// times a random process while another one lives, restarting it under its owner's
// name within two leases, and AX_E2E_SCHED_DOWNS times kills every process and
// restarts them schedDownFor later. Then it pauses the schedules in the store, waits
// until no occurrence is live, stops the processes and checks:
//
//   - every row is an occurrence of one of the schedules on its grid of targets (the
//     first target plus a multiple of the period), fired no earlier than its target
//     and before the pause, Succeeded, with a last attempt that ended: each
//     occurrence is stored once, and none fired on another grid;
//   - schedTick: every target due while some process followed the schedule (from the
//     grace before the parent saw it follow it until schedSlack before its kill) has
//     its occurrence;
//   - the occurrences follow the policy at the time the firing kernel computed them
//     (their created_at): under once with a grace shorter than the period, each is
//     the latest target due then; with a longer grace, and under skip, each was
//     within the grace; under all, no target is missing; each down window left
//     missed targets (but under all), and schedCatchUp ended at least one down window
//     with a catch-up: an occurrence later than the grace after missed targets;
//   - an occurrence ran again only after a kill cut its attempt, at most once per
//     kill of a process that ran it, and never in two processes at once.
func TestSchedKill(t *testing.T) {
	seconds := envInt(t, envSchedSeconds, schedSecondsDefault)
	kills := envInt(t, envSchedKills, schedKillsDefault)
	downs := envInt(t, envSchedDowns, schedDownsDefault)
	policyName := os.Getenv(envSchedMisfire)
	policy := misfirePolicy(t, policyName)
	if seconds < 5 {
		t.Fatalf("%s = %d: want at least 5", envSchedSeconds, seconds)
	}
	db := openDB(t)
	table := ownTable(t, db, "sched")
	createRunsTable(t, db, table, true)
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := &multiRun{conf: multiConf{
		dsn: testDSN(), table: table, dir: t.TempDir(), lease: multiLease, test: "TestSchedKillChild",
		env: []string{envSchedChild + "=1", envSchedMisfire + "=" + policyName},
	}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	began := time.Now()
	r.startAll(t)
	ready := map[*multiProc]time.Time{} // when the parent saw each process follow the schedules
	for _, p := range r.cur {
		ready[p] = time.Now()
	}

	run := time.Duration(seconds) * time.Second
	start := time.Now()
	end := start.Add(run)
	downAt := make([]time.Time, downs)
	for j := range downAt {
		downAt[j] = start.Add(run * time.Duration(j+1) / time.Duration(downs+1))
	}
	killAt := make([]time.Time, kills)
	for j := range killAt {
		killAt[j] = start.Add(time.Second + time.Duration(rng.Int64N(int64(run-2*time.Second))))
	}
	slices.SortFunc(killAt, func(a, b time.Time) int { return a.Compare(b) })

	// The loop kills at the planned times (a kill of one process waits while fewer
	// than two follow the schedules, or every process is down) and restarts each
	// killed owner at its time.
	var (
		restartAt          [multiProcs]time.Time
		windows            []downWindow
		nKill, nDown, sent int
	)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		for _, p := range r.cur {
			if p.killed.IsZero() && ready[p].IsZero() && p.up() {
				ready[p] = now
				if n := len(windows); n > 0 && windows[n-1].to.IsZero() {
					windows[n-1].to = now
				}
			}
		}
		for i, p := range r.cur {
			if !p.killed.IsZero() && !now.Before(restartAt[i]) {
				r.start(t, i)
			}
		}
		down := len(windows) > 0 && windows[len(windows)-1].to.IsZero()
		switch {
		case nDown < len(downAt) && !now.Before(downAt[nDown]) && !down:
			for i, p := range r.cur {
				if p.killed.IsZero() {
					r.kill(t, i)
					sent++
				}
			}
			from := time.Now()
			windows = append(windows, downWindow{from: from})
			for i := range restartAt {
				restartAt[i] = from.Add(schedDownFor + time.Duration(rng.Int64N(int64(300*time.Millisecond))))
			}
			nDown++
		case nKill < len(killAt) && !now.Before(killAt[nKill]) && !down:
			var live []int
			for i, p := range r.cur {
				if p.killed.IsZero() && !ready[p].IsZero() {
					live = append(live, i)
				}
			}
			if len(live) >= 2 { // one at least lives on
				i := live[rng.IntN(len(live))]
				r.kill(t, i)
				sent++
				restartAt[i] = time.Now().Add(time.Duration(rng.Int64N(int64(2 * r.conf.lease))))
				nKill++
			}
		}
		if !now.Before(end) && nKill == len(killAt) && nDown == len(downAt) &&
			!slices.ContainsFunc(r.cur[:], func(p *multiProc) bool { return !p.killed.IsZero() || ready[p].IsZero() }) {
			break
		}
		if now.After(end.Add(time.Minute)) {
			t.Fatalf("after %v: %d of %d kills, %d of %d down windows", time.Since(began), nKill, len(killAt), nDown, len(downAt))
		}
		<-tick.C
	}
	pauseAt := time.Now()
	for _, sp := range schedSpecs {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := s.PauseSchedule(pctx, sp.name, true)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	paused := time.Now()
	stats := r.finish(t, s, time.Minute)
	elapsed := time.Since(began)

	t.Logf("%d processes, %d kills (%d of one process, %d in %d down windows %v); schedules run %v, all done after %v",
		len(r.procs), sent, nKill, sent-nKill, len(windows), windowsString(windows, start),
		pauseAt.Sub(start).Round(time.Millisecond), elapsed.Round(time.Millisecond))
	logSchedStats(t, stats)
	occ := readOccurrences(t, db, table)
	sk := schedKillRun{
		r: r, ready: ready, windows: windows, pauseAt: pauseAt, paused: paused,
		attempts: readAttempts(t, db, table),
	}
	for _, sp := range schedSpecs {
		pol := policy
		if sp.once {
			pol = kernel.MisfireOnce
		}
		sk.checkSchedule(t, sp, pol, occ[sp.name])
	}
	sk.checkAttempts(t, occ)
}

// logSchedStats logs the ScheduleStats that the processes which quit reported, by
// schedule: the kernels that fired a catch-up and were killed later took theirs with
// them.
func logSchedStats(t *testing.T, stats map[*multiProc]multiStats) {
	t.Helper()
	fires, misfires := map[string]uint64{}, map[string]uint64{}
	warns := map[string]int{}
	for p, st := range stats {
		for line := range strings.Lines(st.out) {
			if i := strings.Index(line, " msg="); i >= 0 && strings.Contains(line, "level=WARN") {
				msg, _, _ := strings.Cut(line[i+len(" msg="):], " schedule=")
				warns[strings.TrimSpace(msg)]++
			}
		}
		if !p.killed.IsZero() {
			continue
		}
		for line := range strings.Lines(st.out) {
			if !strings.HasPrefix(line, schedStats+" ") {
				continue
			}
			var name string
			var f, m uint64
			if _, err := fmt.Sscanf(line, schedStats+" name=%s fires=%d misfires=%d", &name, &f, &m); err != nil {
				t.Fatalf("%v: malformed %s line %q: %v", p, schedStats, line, err)
			}
			fires[name] += f
			misfires[name] += m
		}
	}
	if len(warns) > 0 {
		t.Logf("warnings the processes logged, by message: %v", warns)
	}
	for _, sp := range schedSpecs {
		t.Logf("%s: the processes that quit fired %d occurrences and counted %d misfires", sp.name, fires[sp.name], misfires[sp.name])
	}
}

// schedOcc is an occurrence row: its target and when the firing kernel computed it
// (created_at), in unix ms, and its state code.
type schedOcc struct {
	id              string
	target, created int64
	state           int
}

// readOccurrences reads the rows of the task table, by schedule and target; a row
// that is no occurrence of schedSpecs fails the test.
func readOccurrences(t *testing.T, db *sql.DB, table string) map[string][]schedOcc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := db.QueryContext(ctx, "SELECT id, created_at, state FROM `"+table+"`")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close() }()
	out := map[string][]schedOcc{}
	for rs.Next() {
		var o schedOcc
		if err := rs.Scan(&o.id, &o.created, &o.state); err != nil {
			t.Fatal(err)
		}
		name, target, ok := kernel.ParseOccurrenceID(o.id)
		if !ok || !slices.ContainsFunc(schedSpecs, func(sp schedSpec) bool { return sp.name == name }) {
			t.Fatalf("row %q is no occurrence of the test's schedules", o.id)
		}
		o.target = target.UnixMilli()
		out[name] = append(out[name], o)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	for _, os := range out {
		slices.SortFunc(os, func(a, b schedOcc) int { return cmpInt64(a.target, b.target) })
	}
	return out
}

// readAttempts reads the side table's attempts, by occurrence ID, in the order they
// began.
func readAttempts(t *testing.T, db *sql.DB, table string) map[string][]multiAttempt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := db.QueryContext(ctx, "SELECT task, token, attempt, pid, owner, gen, start_us, COALESCE(end_us, 0) FROM `"+table+"_runs`")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close() }()
	out := map[string][]multiAttempt{}
	for rs.Next() {
		var a multiAttempt
		if err := rs.Scan(&a.task, &a.token, &a.attempt, &a.pid, &a.owner, &a.gen, &a.start, &a.end); err != nil {
			t.Fatal(err)
		}
		out[a.task] = append(out[a.task], a)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	for _, as := range out {
		slices.SortFunc(as, func(a, b multiAttempt) int { return cmpInt64(a.start, b.start) })
	}
	return out
}

// windowsString describes the down windows: their start after start, and length.
func windowsString(ws []downWindow, start time.Time) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "[%v+%v]", w.from.Sub(start).Round(time.Millisecond), w.to.Sub(w.from).Round(time.Millisecond))
	}
	return b.String()
}

// schedKillRun is what TestSchedKill saw and read back.
type schedKillRun struct {
	r               *multiRun
	ready           map[*multiProc]time.Time
	windows         []downWindow
	pauseAt, paused time.Time // the parent's PauseSchedule calls began and returned
	attempts        map[string][]multiAttempt
}

// covered reports whether a process followed the schedules from grace before the
// target at until schedSlack after it, so that it must have fired it.
func (sk *schedKillRun) covered(at time.Time, grace time.Duration) bool {
	for p, up := range sk.ready {
		if up.IsZero() || up.Add(-grace).After(at) {
			continue
		}
		if p.killed.IsZero() || !at.Add(schedSlack).After(p.killed) {
			return true
		}
	}
	return false
}

// checkSchedule checks the occurrence rows occ of the schedule sp, whose misfire
// policy is policy, against its grid of targets, the processes' lives and the policy.
func (sk *schedKillRun) checkSchedule(t *testing.T, sp schedSpec, policy kernel.Misfire, occ []schedOcc) {
	t.Helper()
	if len(occ) == 0 {
		t.Errorf("%s: no occurrence stored", sp.name)
		return
	}
	step := schedPeriod.Milliseconds()
	first := occ[0].target
	var firstReady time.Time
	for _, up := range sk.ready {
		if firstReady.IsZero() || up.Before(firstReady) {
			firstReady = up
		}
	}
	if time.UnixMilli(first).After(firstReady.Add(schedPeriod + schedSlack)) {
		t.Errorf("%s: the first occurrence is due at %v, %v after the first process followed the schedule",
			sp.name, time.UnixMilli(first), time.UnixMilli(first).Sub(firstReady))
	}
	// The lateness bound of the policy: MisfireOnce fires the latest target due, or
	// the ones within the grace when it is longer than the period; MisfireSkip only
	// those within the grace.
	bound := time.Duration(1<<63 - 1)
	switch {
	case policy == kernel.MisfireOnce && sp.grace < schedPeriod:
		bound = schedPeriod - time.Millisecond
	case policy == kernel.MisfireOnce, policy == kernel.MisfireSkip:
		bound = sp.grace
	}
	stored := map[int64]schedOcc{}
	var bad, offGrid, notDone, late []string
	var lateness []time.Duration
	for _, o := range occ {
		stored[o.target] = o
		lateBy := time.Duration(o.created-o.target) * time.Millisecond
		lateness = append(lateness, lateBy)
		switch {
		case (o.target-first)%step != 0:
			offGrid = append(offGrid, o.id)
		case o.state != codeSucceeded:
			notDone = append(notDone, fmt.Sprintf("%s: state %d", o.id, o.state))
		case time.UnixMilli(o.target).After(sk.paused):
			bad = append(bad, fmt.Sprintf("%s: due %v after the schedule was paused", o.id, time.UnixMilli(o.target).Sub(sk.paused)))
		case lateBy < -schedEarly:
			bad = append(bad, fmt.Sprintf("%s: fired %v before its target", o.id, -lateBy))
		case lateBy > bound:
			late = append(late, fmt.Sprintf("%s: fired %v late", o.id, lateBy))
		}
	}
	// The targets from the first to schedSlack before the pause: a missing one must be in a down window
	// (schedTick), or misfired by a computation later than its grace (schedCatchUp,
	// whose grace a stall may pass).
	var lost, stalled []string
	var missed int
	inWindow := make([]int, len(sk.windows))
	catchUps := make([]time.Duration, len(sk.windows)) // the lateness of the occurrence ending the window's misses
	for at := first; !time.UnixMilli(at).After(sk.pauseAt.Add(-schedSlack)); at += step {
		tt := time.UnixMilli(at)
		if _, ok := stored[at]; ok {
			continue
		}
		what := fmt.Sprintf("%v (%s)", tt.Format("15:04:05.000"), kernel.OccurrenceID(sp.name, tt))
		if policy == kernel.MisfireAll || (sk.covered(tt, sp.grace) && !sp.once) {
			lost = append(lost, what)
			continue
		}
		missed++
		w := slices.IndexFunc(sk.windows, func(w downWindow) bool {
			return !tt.Before(w.from.Add(-schedSlack)) && !tt.After(w.to)
		})
		if w < 0 {
			stalled = append(stalled, what)
			continue
		}
		inWindow[w]++
		if o, ok := stored[at+step]; ok {
			catchUps[w] = time.Duration(o.created-o.target) * time.Millisecond
		}
	}
	t.Logf("%s (grace %v, misfire %v): %d occurrences stored, targets %v to %v, lateness %s; %d targets missed, %v in the down windows, ended by occurrences late by %v",
		sp.name, sp.grace, policy, len(occ), time.UnixMilli(first).Format("15:04:05.000"),
		time.UnixMilli(occ[len(occ)-1].target).Format("15:04:05.000"), percentiles(lateness), missed, inWindow, catchUps)
	if len(stalled) > 0 {
		t.Logf("%s: %d targets misfired outside the down windows (a computation later than the period), e.g. %v",
			sp.name, len(stalled), stalled[:min(len(stalled), 5)])
	}
	for _, c := range []struct {
		what string
		l    []string
	}{
		{"occurrences off the grid of targets", offGrid},
		{"occurrences not Succeeded", notDone},
		{"occurrences fired out of time", bad},
		{fmt.Sprintf("occurrences later than %v, against the misfire policy", bound), late},
		{"targets missing while a process followed the schedule", lost},
	} {
		if len(c.l) > 0 {
			t.Errorf("%s: %d %s, e.g. %v", sp.name, len(c.l), c.what, c.l[:min(len(c.l), 10)])
		}
	}
	if policy == kernel.MisfireAll {
		return
	}
	for i, n := range inWindow {
		if n == 0 {
			w := sk.windows[i]
			t.Errorf("%s: down window %d (%v for %v) missed no target", sp.name, i, w.from.Format("15:04:05.000"), w.to.Sub(w.from))
		}
	}
	if sp.once && len(sk.windows) > 0 && !slices.ContainsFunc(catchUps, func(d time.Duration) bool { return d > sp.grace }) {
		t.Errorf("%s: no down window ended with MisfireOnce's catch-up, an occurrence later than the grace: %v", sp.name, catchUps)
	}
}

// checkAttempts checks each occurrence's attempts: at least one, the last ended, the
// others cut by kills.
func (sk *schedKillRun) checkAttempts(t *testing.T, occ map[string][]schedOcc) {
	t.Helper()
	killedAt := sk.r.killedAt()
	var none, unended, overlaps, samePid, unexplained []string
	var extra, reran int
	var endedCut []time.Duration // attempts that ended and ran again: from their end to the kill
	ids := map[string]bool{}
	for _, os := range occ {
		for _, o := range os {
			ids[o.id] = true
			as := sk.attempts[o.id]
			if len(as) == 0 {
				none = append(none, o.id)
				continue
			}
			if as[len(as)-1].end == 0 {
				unended = append(unended, fmt.Sprintf("%s: %v", o.id, as))
			}
			if len(as) > 1 {
				reran++
				extra += len(as) - 1
			}
			ac := checkAttempts(o.id, as, killedAt)
			for _, i := range ac.cut {
				if a := as[i]; a.end != 0 {
					endedCut = append(endedCut, time.Duration(killedAt[a.pid]-a.end)*time.Microsecond)
				}
			}
			overlaps = append(overlaps, ac.overlaps...)
			samePid = append(samePid, ac.samePid...)
			unexplained = append(unexplained, ac.unexplained...)
		}
	}
	for id := range sk.attempts {
		if !ids[id] {
			none = append(none, "an attempt of "+id+", which is not stored")
		}
	}
	t.Logf("%d occurrences ran more than once (%d extra runs, after %d kills); %d runs in one process overlapped",
		reran, extra, len(killedAt), len(samePid))
	t.Logf("attempts that ended and ran again, as the kill of their process came before their end was stored: from the end to the kill %s",
		percentiles(endedCut))
	for _, c := range []struct {
		what string
		l    []string
	}{
		{"occurrences without an attempt", none},
		{"occurrences whose last attempt did not end", unended},
		{"times an occurrence ran in two processes at once", overlaps},
		{"attempts followed by another without a kill of their process", unexplained},
	} {
		if len(c.l) > 0 {
			slices.Sort(c.l)
			t.Errorf("%d %s, e.g. %v", len(c.l), c.what, c.l[:min(len(c.l), 5)])
		}
	}
}
