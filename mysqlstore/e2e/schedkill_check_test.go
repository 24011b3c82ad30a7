package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store"
)

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
		name, target, ok := store.ParseOccurrenceID(o.id)
		if !ok || !slices.ContainsFunc(schedSpecs, func(sp schedSpec) bool { return sp.name == name }) {
			t.Fatalf("row %q is no occurrence of the test's schedules", o.id)
		}
		o.target = target.UnixMilli()
		out[name] = append(out[name], o)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b schedOcc) int { return cmpInt64(a.target, b.target) })
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
	lapses          map[int]int64 // pid -> µs: the last lease lapse the process logged
}

// leaseLapses returns, by pid, when each process last logged that its lease was not
// renewed in time (multiLapseMsg), in µs.
func leaseLapses(t *testing.T, stats map[*multiProc]multiStats) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	for p, st := range stats {
		for line := range strings.Lines(st.out) {
			if !strings.Contains(line, multiLapseMsg) {
				continue
			}
			v, ok := strings.CutPrefix(line, "time=")
			if ok {
				v, _, _ = strings.Cut(v, " ")
			}
			at, err := time.Parse(time.RFC3339, v)
			if !ok || err != nil {
				t.Fatalf("%v: a log line without its time: %q", p, line)
			}
			out[p.pid] = max(out[p.pid], at.UnixMicro())
		}
	}
	return out
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
func (sk *schedKillRun) checkSchedule(t *testing.T, sp schedSpec, policy schedule.Misfire, occ []schedOcc) {
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
	case policy == schedule.MisfireOnce && sp.grace < schedPeriod:
		bound = schedPeriod - time.Millisecond
	case policy == schedule.MisfireOnce, policy == schedule.MisfireSkip:
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
	// The targets from the first to schedSlack before the pause: a missing one must be
	// in a down window, while no process followed the schedule (schedTick); under
	// MisfireOnce with a grace shorter than the period, a missing target is one that a
	// computation later than the period misfired, which a stall may cause outside the
	// down windows too (schedCatchUp).
	var lost, stalled []string
	var missed int
	inWindow := make([]int, len(sk.windows))
	catchUps := make([]time.Duration, len(sk.windows)) // the lateness of the occurrence ending the window's misses
	for at := first; !time.UnixMilli(at).After(sk.pauseAt.Add(-schedSlack)); at += step {
		tt := time.UnixMilli(at)
		if _, ok := stored[at]; ok {
			continue
		}
		what := fmt.Sprintf("%v (%s)", tt.Format("15:04:05.000"), store.OccurrenceID(sp.name, tt))
		w := slices.IndexFunc(sk.windows, func(w downWindow) bool {
			return !tt.Before(w.from.Add(-schedSlack)) && !tt.After(w.to)
		})
		switch {
		case policy == schedule.MisfireAll, !sp.once && (w < 0 || sk.covered(tt, sp.grace)):
			lost = append(lost, what)
			continue
		case w < 0:
			missed++
			stalled = append(stalled, what)
			continue
		}
		missed++
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
		{"targets missing while a process followed the schedule, or outside the down windows", lost},
	} {
		if len(c.l) > 0 {
			t.Errorf("%s: %d %s, e.g. %v", sp.name, len(c.l), c.what, c.l[:min(len(c.l), 10)])
		}
	}
	if policy == schedule.MisfireAll {
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
	// A kernel whose lease was not renewed in time cancels its running attempts, whose
	// tasks run again: a lapse explains a run again as a kill does.
	cutAt := maps.Clone(killedAt)
	for pid, at := range sk.lapses {
		cutAt[pid] = max(cutAt[pid], at)
	}
	var none, unended, overlaps, samePid, unexplained []string
	var extra, reran, byLapse, lapsedOverlaps int
	var endedCut []time.Duration // attempts that ended and ran again: from their end to the kill
	ids := map[string]bool{}
	for _, l := range occ {
		for _, o := range l {
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
			ac := checkAttempts(o.id, as, cutAt, nil)
			for _, i := range ac.cut {
				a := as[i]
				switch k, killed := killedAt[a.pid]; {
				case !killed || k < a.start:
					byLapse++
				case a.end != 0:
					endedCut = append(endedCut, time.Duration(k-a.end)*time.Microsecond)
				}
			}
			// A process stalled past its lease cannot stop an attempt it began: another
			// one may rescue the task while it runs (the fence refuses the stalled
			// attempt's end).
			if slices.ContainsFunc(as[:len(as)-1], func(a multiAttempt) bool { return sk.lapses[a.pid] >= a.start }) {
				lapsedOverlaps += len(ac.overlaps)
			} else {
				overlaps = append(overlaps, ac.overlaps...)
			}
			samePid = append(samePid, ac.samePid...)
			unexplained = append(unexplained, ac.unexplained...)
		}
	}
	for id := range sk.attempts {
		if !ids[id] {
			none = append(none, "an attempt of "+id+", which is not stored")
		}
	}
	t.Logf("%d occurrences ran more than once (%d extra runs, after %d kills and lease lapses in %d processes, %d of them after a lapse); "+
		"%d runs in one process overlapped; %d runs overlapped one in a process whose lease lapsed",
		reran, extra, len(killedAt), len(sk.lapses), byLapse, len(samePid), lapsedOverlaps)
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
