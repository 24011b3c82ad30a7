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
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store"
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
		name, target, isOcc := schedule.OccurrenceOf(ctx)
		known := slices.ContainsFunc(schedSpecs, func(sp schedSpec) bool { return sp.name == name })
		if !ok || !isOcc || !known || info.ID != store.OccurrenceID(name, target) {
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

	sch, err := schedule.New(k, schedule.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	defer sch.Stop()
	scs := make([]*schedule.Entry, len(schedSpecs))
	for i, sp := range schedSpecs {
		o := &schedule.Options{Name: sp.name, Grace: sp.grace, Misfire: policy, Overlap: schedule.OverlapAllow}
		if sp.once {
			o.Misfire = schedule.MisfireOnce
			alignCatchUp(t, s, sp)
		}
		if scs[i], err = sch.AddDurable(schedule.Every(schedPeriod), schedKind, nil, o); err != nil {
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
	if errors.Is(err, store.ErrUnknownSchedule) {
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
func misfirePolicy(t testing.TB, v string) schedule.Misfire {
	t.Helper()
	switch v {
	case "", "once":
		return schedule.MisfireOnce
	case "skip":
		return schedule.MisfireSkip
	case "all":
		return schedule.MisfireAll
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
//   - an occurrence ran again only after a kill cut its attempt (or a lease lapse,
//     on which a kernel cancels its running attempts), at most once per process that
//     ran it, and never in two processes at once (but after a lease lapse: a process
//     stalled past its lease cannot stop an attempt it began, whose task another one
//     may rescue).
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
		attempts: readAttempts(t, db, table), lapses: leaseLapses(t, stats),
	}
	for _, sp := range schedSpecs {
		pol := policy
		if sp.once {
			pol = schedule.MisfireOnce
		}
		sk.checkSchedule(t, sp, pol, occ[sp.name])
	}
	sk.checkAttempts(t, occ)
}
