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
	envSchedSeconds = "AX_E2E_SCHED_SECONDS" // how long the schedule runs under kills; default 30
	envSchedKills   = "AX_E2E_SCHED_KILLS"   // kills of one process while another lives; default schedKillsDefault
	envSchedDowns   = "AX_E2E_SCHED_DOWNS"   // windows with every process down; default schedDownsDefault
	envSchedMisfire = "AX_E2E_SCHED_MISFIRE" // the misfire policy: once (default), skip or all

	envSchedChild  = "AX_E2E_SCHED_CHILD" // "1": TestSchedKillChild runs
	envSchedPeriod = "AX_E2E_SCHED_PERIOD"
	envSchedGrace  = "AX_E2E_SCHED_GRACE"
	envSchedWork   = "AX_E2E_SCHED_WORK" // the longest work of an occurrence's attempt
	envSchedPolicy = "AX_E2E_SCHED_POLICY"

	schedSecondsDefault = 30
	schedKillsDefault   = 12
	schedDownsDefault   = 2
	schedName           = "e2e-tick"
	schedKind           = "e2e.sched"
	schedPeriod         = 100 * time.Millisecond
	// schedGrace is shorter than the period, so that a kernel's computation finds at
	// most one target within the grace and MisfireOnce's catch-up (no target on time,
	// the latest missed one fires) is told apart from an on-time fire.
	schedGrace = 50 * time.Millisecond
	schedWork  = 30 * time.Millisecond
	// schedDownFor is how long every process stays down in a down window.
	schedDownFor = 1500 * time.Millisecond
	// schedSlack is how long a process may take to fire a due target: a target due
	// at least that long before the kill of the last live process must have fired.
	schedSlack = 300 * time.Millisecond
	// schedEarly is how much earlier than its target a kernel's clock may read when
	// its wheel fires the target (a tick, and the stored times' millisecond rounding).
	schedEarly = 2 * time.Millisecond
	schedStats = "SCHED-STATS"
)

// TestSchedKillChild is the child process of TestSchedKill; without
// AX_E2E_SCHED_CHILD it returns at once. It runs a kernel as owner
// AX_E2E_MULTI_OWNER on the table AX_E2E_MULTI_TABLE and follows the durable schedule
// schedName, Every(AX_E2E_SCHED_PERIOD) with Grace AX_E2E_SCHED_GRACE, the misfire
// policy AX_E2E_SCHED_POLICY and OverlapAllow. Each attempt of an occurrence inserts a
// row into <table>_runs as it begins (task: the occurrence ID, token: its target in
// unix ms) and sets the row's end once its work (up to AX_E2E_SCHED_WORK) is done. It
// writes a byte to fd 3 once it follows the schedule. Its stdin commands: 's' does
// nothing (the parent pauses the schedule in the store), 'q' shuts the kernel down and
// prints a MULTI-STATS and a SCHED-STATS line; at EOF it returns at once.
//
// When the stored next target passed more than the grace ago (every process was down),
// it waits before it follows the schedule until the time is a little more than the
// grace after the latest passed target, so that its kernel's first computation finds
// no target within the grace and the misfire policy's catch-up is what fires.
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
	period := envDuration(t, envSchedPeriod)
	grace := envDuration(t, envSchedGrace)
	work := envDuration(t, envSchedWork)
	policy := misfirePolicy(t, os.Getenv(envSchedPolicy))
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
		if !ok || !isOcc || name != schedName || info.ID != kernel.OccurrenceID(name, target) {
			return kernel.Permanent(fmt.Errorf("task %q: OccurrenceOf = %q, %v, %v", info.ID, name, target, isOcc))
		}
		key := fmt.Sprintf("%d-%d", pid, seq.Add(1))
		rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		sideExec(rec, side, "INSERT IGNORE INTO `"+runs+"` (k, task, token, attempt, pid, owner, gen, start_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			key, info.ID, strconv.FormatInt(target.UnixMilli(), 10), info.Attempt, pid, owner, gen, start)
		defer func() {
			sideExec(rec, side, "UPDATE `"+runs+"` SET end_us = ? WHERE k = ?", time.Now().UnixMicro(), key)
		}()
		w := time.NewTimer(rand.N(work + 1))
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

	alignCatchUp(t, s, period, grace)
	sc, err := k.ScheduleDurable(kernel.Every(period), schedKind, nil, &kernel.ScheduleOptions{
		Name: schedName, Grace: grace, Misfire: policy, Overlap: kernel.OverlapAllow,
	})
	if err != nil {
		t.Fatal(err)
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
	ss := sc.Stats()
	fmt.Printf("%s refused=%d errors=%d commits=%d\n", multiStatsTag, st.Refused, st.Errors, st.Commits)
	fmt.Printf("%s fires=%d misfires=%d\n", schedStats, ss.Fires, ss.Misfires)
}

// alignCatchUp waits, when the stored schedule's next target passed more than grace
// ago, until the time is grace + (period-grace)/5 after the latest passed target. It
// is a wait on the wall clock, not a synchronization: the schedule's targets are on
// the wall clock.
func alignCatchUp(t *testing.T, s *mysqlstore.Store, period, grace time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.GetSchedule(ctx, schedName)
	if errors.Is(err, kernel.ErrUnknownSchedule) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if st.Paused || st.Next.IsZero() || now.Sub(st.Next) <= grace {
		return
	}
	latest := st.Next.Add(now.Sub(st.Next) / period * period)
	at := latest.Add(grace + (period-grace)/5)
	if !at.After(now) {
		at = at.Add(period)
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
// one to when the first restarted one followed the schedule again.
type downWindow struct{ from, to time.Time }

// TestSchedKill runs three processes, owners p0, p1 and p2 with a lease of
// multiLease, on one table, each following the durable schedule schedName, every
// 100 ms with a grace of 50 ms, the misfire policy AX_E2E_SCHED_MISFIRE (once by
// default) and OverlapAllow, for AX_E2E_SCHED_SECONDS (30 by default). It kills
// AX_E2E_SCHED_KILLS times a random process while another one lives, restarting it
// under its owner's name within two leases, and AX_E2E_SCHED_DOWNS times kills every
// process and restarts them schedDownFor later. Then it pauses the schedule in the
// store, waits until no occurrence is live, stops the processes and checks:
//
//   - every occurrence row is an occurrence of the schedule on its grid of targets
//     (the first target plus a multiple of the period), Succeeded, with a last
//     attempt that ended: an occurrence is stored once, and none fired on another grid;
//   - every target due while some process followed the schedule (from the grace
//     before it did until schedSlack before its kill) has its occurrence;
//   - the occurrences follow the policy at the time the firing kernel computed them
//     (their created_at): once, each is the latest target due then; skip, each was
//     within the grace; all, no target is missing; every down window left missed
//     targets (except under all), and under once at least one window ended with a
//     catch-up occurrence, later than the grace;
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
		env: []string{
			envSchedChild + "=1", envSchedPeriod + "=" + schedPeriod.String(), envSchedGrace + "=" + schedGrace.String(),
			envSchedWork + "=" + schedWork.String(), envSchedPolicy + "=" + policyName,
		},
	}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	began := time.Now()
	r.startAll(t)
	ready := map[*multiProc]time.Time{} // when the parent saw each process follow the schedule
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
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if _, err := s.PauseSchedule(pctx, schedName, true); err != nil {
		t.Fatal(err)
	}
	cancel()
	paused := time.Now()
	stats := r.finish(t, s, time.Minute)
	elapsed := time.Since(began)

	occ := readOccurrences(t, db, table)
	attempts := readAttempts(t, db, table)
	var fires, misfires uint64
	for p, st := range stats {
		if p.killed.IsZero() {
			var f, m uint64
			i := strings.Index(st.out, schedStats)
			if i < 0 {
				t.Fatalf("%v exited without its %s line", p, schedStats)
			}
			if _, err := fmt.Sscanf(st.out[i:], schedStats+" fires=%d misfires=%d", &f, &m); err != nil {
				t.Fatalf("%v: malformed %s line: %v", p, schedStats, err)
			}
			fires, misfires = fires+f, misfires+m
		}
	}
	t.Logf("%d processes, %d kills (%d of one process, %d in %d down windows %v); schedule run %v, all done after %v",
		len(r.procs), sent, nKill, sent-nKill, len(windows), windowsString(windows, start), pauseAt.Sub(start).Round(time.Millisecond),
		elapsed.Round(time.Millisecond))
	t.Logf("the last processes fired %d occurrences and counted %d misfires", fires, misfires)
	sk := schedKillRun{
		r: r, ready: ready, windows: windows, policy: policy, pauseAt: pauseAt, paused: paused,
		occ: occ, attempts: attempts,
	}
	sk.checkGrid(t)
	sk.checkAttempts(t)
}

// schedOcc is an occurrence row: its target and when the firing kernel computed it
// (created_at), in unix ms, and its state code.
type schedOcc struct {
	id              string
	target, created int64
	state           int
}

// readOccurrences reads the rows of the task table, by target; a row that is no
// occurrence of schedName fails the test.
func readOccurrences(t *testing.T, db *sql.DB, table string) []schedOcc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := db.QueryContext(ctx, "SELECT id, created_at, state FROM `"+table+"`")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close() }()
	var out []schedOcc
	for rs.Next() {
		var o schedOcc
		if err := rs.Scan(&o.id, &o.created, &o.state); err != nil {
			t.Fatal(err)
		}
		name, target, ok := kernel.ParseOccurrenceID(o.id)
		if !ok || name != schedName {
			t.Fatalf("row %q is no occurrence of %q", o.id, schedName)
		}
		o.target = target.UnixMilli()
		out = append(out, o)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b schedOcc) int { return cmpInt64(a.target, b.target) })
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
	policy          kernel.Misfire
	pauseAt, paused time.Time // the parent's PauseSchedule began and returned
	occ             []schedOcc
	attempts        map[string][]multiAttempt
}

// covered reports whether a process followed the schedule from the grace before the
// target at (unix ms) until schedSlack after it, so that it must have fired it.
func (sk *schedKillRun) covered(at int64) bool {
	t := time.UnixMilli(at)
	for p, up := range sk.ready {
		if up.IsZero() || up.Add(-schedGrace).After(t) {
			continue
		}
		if p.killed.IsZero() || !t.Add(schedSlack).After(p.killed) {
			return true
		}
	}
	return false
}

// checkGrid checks the occurrence rows against the grid of targets, the processes'
// lives and the misfire policy.
func (sk *schedKillRun) checkGrid(t *testing.T) {
	t.Helper()
	if len(sk.occ) == 0 {
		t.Fatal("no occurrence stored")
	}
	step := schedPeriod.Milliseconds()
	first := sk.occ[0].target
	var firstReady time.Time
	for _, up := range sk.ready {
		if firstReady.IsZero() || up.Before(firstReady) {
			firstReady = up
		}
	}
	if time.UnixMilli(first).After(firstReady.Add(schedPeriod + schedSlack)) {
		t.Errorf("the first occurrence is due at %v, %v after the first process followed the schedule",
			time.UnixMilli(first), time.UnixMilli(first).Sub(firstReady))
	}
	stored := map[int64]schedOcc{}
	var bad, offGrid, notDone, late []string
	var catchUps []time.Duration
	for _, o := range sk.occ {
		stored[o.target] = o
		lateBy := time.Duration(o.created-o.target) * time.Millisecond
		switch {
		case (o.target-first)%step != 0:
			offGrid = append(offGrid, o.id)
		case o.state != codeSucceeded:
			notDone = append(notDone, fmt.Sprintf("%s: state %d", o.id, o.state))
		case time.UnixMilli(o.target).After(sk.paused):
			bad = append(bad, fmt.Sprintf("%s: due %v after the schedule was paused", o.id, time.UnixMilli(o.target).Sub(sk.paused)))
		case lateBy < -schedEarly:
			bad = append(bad, fmt.Sprintf("%s: fired %v before its target", o.id, -lateBy))
		}
		switch sk.policy {
		case kernel.MisfireOnce:
			if lateBy >= schedPeriod {
				late = append(late, fmt.Sprintf("%s fired %v late: a later target was due", o.id, lateBy))
			}
		case kernel.MisfireSkip:
			if lateBy > schedGrace+schedEarly {
				late = append(late, fmt.Sprintf("%s fired %v late, beyond the grace", o.id, lateBy))
			}
		}
		if lateBy > schedGrace+schedEarly {
			catchUps = append(catchUps, lateBy)
		}
	}
	// The targets from the first to the last before the pause: a missing one must be in
	// a down window.
	var lost []string
	var missed int
	inWindow := make([]int, len(sk.windows))
	for at := first; !time.UnixMilli(at).After(sk.pauseAt); at += step {
		if _, ok := stored[at]; ok {
			continue
		}
		if sk.policy == kernel.MisfireAll || sk.covered(at) {
			lost = append(lost, fmt.Sprintf("%v (%s)", time.UnixMilli(at).Format("15:04:05.000"), kernel.OccurrenceID(schedName, time.UnixMilli(at))))
			continue
		}
		missed++
		for i, w := range sk.windows {
			if tt := time.UnixMilli(at); !tt.Before(w.from.Add(-schedSlack)) && !tt.After(w.to) {
				inWindow[i]++
			}
		}
	}
	t.Logf("%d occurrences stored, targets %v to %v; %d targets missed (misfired), %v by window; %d fired later than the grace: %v",
		len(sk.occ), time.UnixMilli(first).Format("15:04:05.000"), time.UnixMilli(sk.occ[len(sk.occ)-1].target).Format("15:04:05.000"),
		missed, inWindow, len(catchUps), catchUps)
	for what, l := range map[string][]string{
		"occurrences off the grid of targets":                   offGrid,
		"occurrences not Succeeded":                             notDone,
		"occurrences fired out of time":                         bad,
		"occurrences against the misfire policy":                late,
		"targets missing while a process followed the schedule": lost,
	} {
		if len(l) > 0 {
			t.Errorf("%d %s, e.g. %v", len(l), what, l[:min(len(l), 10)])
		}
	}
	if sk.policy == kernel.MisfireAll {
		return
	}
	for i, n := range inWindow {
		if n == 0 {
			w := sk.windows[i]
			t.Errorf("down window %d (%v for %v) missed no target", i, w.from.Format("15:04:05.000"), w.to.Sub(w.from))
		}
	}
	if sk.policy == kernel.MisfireOnce && len(sk.windows) > 0 && len(catchUps) == 0 {
		t.Errorf("no occurrence fired later than the grace: no down window ended with MisfireOnce's catch-up")
	}
}

// checkAttempts checks each occurrence's attempts: at least one, the last ended, the
// others cut by kills.
func (sk *schedKillRun) checkAttempts(t *testing.T) {
	t.Helper()
	killedAt := sk.r.killedAt()
	var none, unended, overlaps, samePid, unexplained []string
	var extra, reran int
	ids := map[string]bool{}
	for _, o := range sk.occ {
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
		overlaps = append(overlaps, ac.overlaps...)
		samePid = append(samePid, ac.samePid...)
		unexplained = append(unexplained, ac.unexplained...)
	}
	for id := range sk.attempts {
		if !ids[id] {
			none = append(none, "an attempt of "+id+", which is not stored")
		}
	}
	t.Logf("%d occurrences ran more than once (%d extra runs, after %d kills); %d runs in one process overlapped",
		reran, extra, len(killedAt), len(samePid))
	for what, l := range map[string][]string{
		"occurrences without an attempt":                               none,
		"occurrences whose last attempt did not end":                   unended,
		"times an occurrence ran in two processes at once":             overlaps,
		"attempts followed by another without a kill of their process": unexplained,
	} {
		if len(l) > 0 {
			slices.Sort(l)
			t.Errorf("%d %s, e.g. %v", len(l), what, l[:min(len(l), 5)])
		}
	}
}
