package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The multi-process tests' readers and checks: the facts read back from the tables
// after a run, and what they must show.

// multiAttempt is one row of the side table: one attempt of a task in one process.
type multiAttempt struct {
	task, token string
	attempt     int
	pid         int
	owner       string
	gen         int
	start, end  int64 // µs; end 0: no end recorded
}

func (a multiAttempt) String() string {
	end := "no end"
	if a.end > 0 {
		end = fmt.Sprintf("end %d", a.end)
	}
	return fmt.Sprintf("attempt %d in %s/g%d (pid %d) start %d %s", a.attempt, a.owner, a.gen, a.pid, a.start, end)
}

// multiAck is a task a child acknowledged.
type multiAck struct {
	id   string
	proc *multiProc
	at   int64 // µs
}

// multiFacts is what a multi-process test's run left: acknowledgements, failed
// submits, rows and attempts.
type multiFacts struct {
	acks     map[string]multiAck       // by token
	failed   map[*multiProc][]logLine  // failed submits (X lines), by process
	attempts map[string][]multiAttempt // by task ID, in the order they began
	states   map[string]int            // state code by task ID
	tokens   map[string]string         // token by task ID
}

// readMultiFacts reads the ack logs, the task table and the side table.
func readMultiFacts(t *testing.T, db *sql.DB, r *multiRun) *multiFacts {
	t.Helper()
	f := &multiFacts{
		acks: map[string]multiAck{}, failed: map[*multiProc][]logLine{}, attempts: map[string][]multiAttempt{},
		states: map[string]int{}, tokens: map[string]string{},
	}
	for _, p := range r.procs {
		for _, l := range readLog(t, filepath.Join(r.conf.dir, fmt.Sprintf("ack-%s-g%02d.log", p.name, p.gen))) {
			switch l.kind {
			case 'A':
				if len(l.fields) != 2 {
					t.Fatalf("malformed ack line %v", l.fields)
				}
				if _, dup := f.acks[l.fields[0]]; dup {
					t.Errorf("task %s acknowledged twice", l.fields[0])
				}
				f.acks[l.fields[0]] = multiAck{id: l.fields[1], proc: p, at: l.micros}
			case 'X':
				f.failed[p] = append(f.failed[p], l)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := db.QueryContext(ctx, "SELECT id, payload, state FROM `"+r.conf.table+"`")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var id, token string
		var state int
		if err := rs.Scan(&id, &token, &state); err != nil {
			t.Fatal(err)
		}
		f.states[id], f.tokens[id] = state, token
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rs.Close()
	rs, err = db.QueryContext(ctx, "SELECT task, token, attempt, pid, owner, gen, start_us, COALESCE(end_us, 0) FROM `"+r.conf.table+"_runs`")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var a multiAttempt
		if err := rs.Scan(&a.task, &a.token, &a.attempt, &a.pid, &a.owner, &a.gen, &a.start, &a.end); err != nil {
			t.Fatal(err)
		}
		f.attempts[a.task] = append(f.attempts[a.task], a)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rs.Close()
	for _, as := range f.attempts {
		slices.SortFunc(as, func(a, b multiAttempt) int { return cmpInt64(a.start, b.start) })
	}
	return f
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkNoLoss checks that every acknowledged task is stored Succeeded under the ID its
// submit returned, that every row is Succeeded, and that each task's last attempt ran
// to its end.
func checkNoLoss(t *testing.T, f *multiFacts) {
	t.Helper()
	var lost, notDone []string
	ids := map[string]bool{}
	for token, a := range f.acks {
		ids[a.id] = true
		switch st, ok := f.states[a.id]; {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s (%s, acknowledged by %v): no row", token, a.id, a.proc))
		case f.tokens[a.id] != token:
			lost = append(lost, fmt.Sprintf("%s (%s, acknowledged by %v): the row holds %s", token, a.id, a.proc, f.tokens[a.id]))
		case st != codeSucceeded:
			lost = append(lost, fmt.Sprintf("%s (%s, acknowledged by %v): state %d; attempts %v", token, a.id, a.proc, st, f.attempts[a.id]))
		}
	}
	for id, st := range f.states {
		as := f.attempts[id]
		if st != codeSucceeded || len(as) == 0 || as[len(as)-1].end == 0 {
			notDone = append(notDone, fmt.Sprintf("%s (%s): state %d, attempts %v", f.tokens[id], id, st, as))
		}
	}
	slices.Sort(lost)
	slices.Sort(notDone)
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged tasks lost, e.g. %v", len(lost), len(f.acks), lost[:min(len(lost), 10)])
	}
	if len(notDone) > 0 {
		t.Errorf("%d of %d rows not Succeeded after a last attempt that ended, e.g. %v", len(notDone), len(f.states), notDone[:min(len(notDone), 10)])
	}
}

// percentiles returns the 50th, 90th and 99th percentiles and the maximum of ds, which
// it sorts.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(time.Millisecond)
	}
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(ds), at(0.5), at(0.9), at(0.99), ds[len(ds)-1].Round(time.Millisecond))
}

// attemptCheck is what checkAttempts found in one task's attempts.
type attemptCheck struct {
	overlaps    []string // two attempts in two processes at once
	samePid     []string // two attempts in one process at once
	unexplained []string // an attempt followed by another, though no kill of its process cut it
	lapsed      []string // such an attempt in a process whose lease lapsed (its log says it joined again)
	cut         []int    // the indices of the attempts a kill of their process cut
}

// checkAttempts checks the attempts as of one task, in the order they began, named
// label, against the kills of processes (killedAt: pid -> µs, the time a process was
// killed or had its running attempts cut otherwise): an attempt began only
// after every earlier one ended or its process was killed, and every attempt but the
// last was cut by a kill of its process, each in a process of its own (a task runs
// again at most once per kill of a process that ran it), or ran in a process of
// lapsed (pids whose lease lapsed, so that another rescued what they held).
func checkAttempts(label string, as []multiAttempt, killedAt map[int]int64, lapsed map[int]bool) attemptCheck {
	var c attemptCheck
	// Overlaps: b began before a, which began first, ended (or was killed).
	for i, a := range as {
		effEnd := a.end
		if effEnd == 0 {
			if k, ok := killedAt[a.pid]; ok {
				effEnd = k
			} else {
				effEnd = 1 << 62
			}
		}
		for _, b := range as[i+1:] {
			if b.start >= effEnd {
				continue
			}
			what := fmt.Sprintf("%s: %v and %v", label, a, b)
			if a.pid == b.pid {
				c.samePid = append(c.samePid, what)
			} else {
				c.overlaps = append(c.overlaps, what)
			}
		}
	}
	seen := map[int]bool{}
	for i, a := range as[:max(len(as)-1, 0)] {
		k, killed := killedAt[a.pid]
		if !killed || k < a.start || seen[a.pid] {
			if lapsed[a.pid] {
				// Its process lost its lease while it ran (the machine starved its
				// renewals): another rescued the task, which is no kill but explained.
				c.lapsed = append(c.lapsed, fmt.Sprintf("%s: %v ran again after its process's lease lapsed", label, a))
				continue
			}
			c.unexplained = append(c.unexplained, fmt.Sprintf("%s: %v ran again, though no kill of its process cut it; attempts %v",
				label, a, as))
			continue
		}
		seen[a.pid] = true
		c.cut = append(c.cut, i)
	}
	return c
}

// checkMultiKill checks the claims of TestMultiKill on the attempts and reports the
// rescue delays.
func checkMultiKill(t *testing.T, r *multiRun, f *multiFacts, stats map[*multiProc]multiStats) {
	t.Helper()
	killedAt := r.killedAt()
	lapsed := map[int]bool{} // pids whose log says they lost their lease and joined again
	for p, st := range stats {
		if st.rejoins > 0 {
			lapsed[p.pid] = true
		}
	}
	var (
		overlaps, samePid, unexplained []string
		afterLapse                     []string
		extra, reran, maxAttempts      int
		byOther, bySelf                []time.Duration
	)
	for id, as := range f.attempts {
		if len(as) > 1 {
			reran++
			extra += len(as) - 1
		}
		for _, a := range as {
			maxAttempts = max(maxAttempts, a.attempt)
		}
		ac := checkAttempts(fmt.Sprintf("%s (%s)", f.tokens[id], id), as, killedAt, lapsed)
		overlaps = append(overlaps, ac.overlaps...)
		afterLapse = append(afterLapse, ac.lapsed...)
		samePid = append(samePid, ac.samePid...)
		unexplained = append(unexplained, ac.unexplained...)
		// The attempt after one a kill cut measures the rescue delay.
		for _, i := range ac.cut {
			a := as[i]
			d := time.Duration(as[i+1].start-killedAt[a.pid]) * time.Microsecond
			if as[i+1].owner == a.owner {
				bySelf = append(bySelf, d)
			} else {
				byOther = append(byOther, d)
			}
		}
	}
	// Queued orphans: tasks acknowledged by a killed process that had not begun there
	// before the kill; their first attempt measures the rescue delay too.
	for _, a := range f.acks {
		k, killed := killedAt[a.proc.pid]
		as := f.attempts[a.id]
		if !killed || len(as) == 0 || as[0].start < k {
			continue
		}
		d := time.Duration(as[0].start-k) * time.Microsecond
		if as[0].owner == a.proc.name {
			bySelf = append(bySelf, d)
		} else {
			byOther = append(byOther, d)
		}
	}
	bound := 2*r.conf.lease + time.Second
	var late []time.Duration
	for _, d := range slices.Concat(byOther, bySelf) {
		if d > bound {
			late = append(late, d)
		}
	}
	var refused uint64
	var rejoins, failed int
	for p, st := range stats {
		refused += st.refused
		rejoins += st.rejoins
		failed += len(f.failed[p])
	}
	t.Logf("%d tasks ran more than once (%d extra runs); highest attempt %d; %d runs in one process overlapped",
		reran, extra, maxAttempts, len(samePid))
	t.Logf("orphans begun again after the kill, by another owner: %s", percentiles(byOther))
	t.Logf("orphans begun again after the kill, by the restarted owner: %s", percentiles(bySelf))
	t.Logf("changes refused: %d; rejoins after a lost lease: %d; failed submits: %d", refused, rejoins, failed)
	for p, ls := range f.failed {
		if len(ls) > 0 {
			t.Logf("failed submits of %v, e.g. %v", p, ls[0].fields)
		}
	}
	if len(overlaps) > 0 {
		t.Errorf("%d times a task ran in two processes at once, e.g. %v", len(overlaps), overlaps[:min(len(overlaps), 5)])
	}
	if len(afterLapse) > 0 {
		t.Logf("%d attempts ran again after their process's lease lapsed (no kill), e.g. %v", len(afterLapse), afterLapse[:min(len(afterLapse), 3)])
	}
	if len(unexplained) > 0 {
		t.Errorf("%d attempts were followed by another without a kill of their process while they ran, e.g. %v",
			len(unexplained), unexplained[:min(len(unexplained), 5)])
	}
	if len(late) > 0 {
		t.Errorf("%d orphans began again more than %v after the kill: %v", len(late), bound, late[:min(len(late), 10)])
	}
	if len(byOther)+len(bySelf) == 0 {
		t.Errorf("no kill orphaned a task: the test did not exercise a rescue")
	}
}
