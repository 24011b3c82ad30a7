package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestMultiPausedOwner runs three processes, owners p0, p1 and p2 with a lease of
// multiLease, on one table, each running attempts of 50–250 ms, and stops p1 with
// SIGSTOP until its lease ended and the others rescued its tasks (the store lists its
// epoch with no live task, or not at all), then resumes it with SIGCONT. (When the stop
// caught p1 inside a transaction, which holds its owner row, a rescuer kills that
// connection: the log says how many were.) Then:
//
//   - the others ran some of p1's tasks;
//   - p1's late completions were refused (Stats().Store.Refused > 0);
//   - p1 began no attempt after the resume on a task another owner rescued, beyond
//     the ones whose start it had committed before the stop;
//   - p1 joined again under a new epoch and goes on submitting and running tasks;
//   - no acknowledged task is lost.
func TestMultiPausedOwner(t *testing.T) {
	db := openDB(t)
	table := ownTable(t, db, "pause")
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
		dsn: testDSN(), table: table, dir: t.TempDir(), lease: multiLease,
		workMin: 50 * time.Millisecond, workMax: 250 * time.Millisecond, submitters: 20,
	}}
	r.startAll(t)
	for _, p := range r.cur {
		waitAcks(t, p, 60, 30*time.Second)
	}
	paused := r.cur[1]
	epoch := liveEpoch(t, s, paused.name)

	if err := paused.c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %v: %v", paused, err)
	}
	stopped := time.Now()
	rescuedBy := stopped.Add(rescueWait)
	for {
		os, err := s.Owners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(os, func(o store.OwnerInfo) bool { return o.Epoch == epoch && (o.Live || o.Tasks > 0) }) {
			break
		}
		if time.Now().After(rescuedBy) {
			t.Fatalf("%v after SIGSTOP, the tasks of %v's epoch %d are not rescued: Owners() = %+v\n"+
				"open transactions (InnoDB): %s", rescueWait, paused, epoch, os, openTransactions(t, db))
		}
		wait := time.NewTimer(10 * time.Millisecond)
		<-wait.C
	}
	if err := paused.c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %v: %v", paused, err)
	}
	resumed := time.Now()
	ackedAtResume := paused.acks()
	waitAcks(t, paused, ackedAtResume+60, 60*time.Second)
	newEpoch := liveEpoch(t, s, paused.name)

	stats := r.finish(t, s, time.Minute)
	f := readMultiFacts(t, db, r)
	checkNoLoss(t, f)
	st := stats[paused]
	kills := 0
	for _, st := range stats {
		kills += st.kills
	}
	t.Logf("%v stopped for %v; epoch %d, then %d; %d tasks acknowledged, %d by it after the resume; its changes refused: %d; "+
		"rejoins in its log: %d; stuck connections killed: %d",
		paused, resumed.Sub(stopped).Round(time.Millisecond), epoch, newEpoch, len(f.acks), paused.acks()-ackedAtResume, st.refused, st.rejoins, kills)

	// The attempts: which of p1's tasks others ran after the stop, and what p1 began
	// after the resume.
	stoppedUs := stopped.UnixMicro()
	var rescued, overlapped, committedBefore int
	var wrong []string
	for id, as := range f.attempts {
		var byOthers []multiAttempt // attempts begun elsewhere after the stop
		for _, a := range as {
			if a.pid != paused.pid && a.start >= stoppedUs {
				byOthers = append(byOthers, a)
			}
		}
		if len(byOthers) == 0 {
			continue
		}
		if ack, ok := f.acks[f.tokens[id]]; ok && ack.proc == paused {
			rescued++
		}
		for _, a := range as {
			if a.pid != paused.pid {
				continue
			}
			if a.start < stoppedUs {
				if a.end == 0 || a.end > byOthers[0].start {
					overlapped++ // begun before the stop, still running when another began it
				}
				continue
			}
			// Begun after the resume, on a task another owner runs too. Only an attempt
			// whose start p1 committed before the stop (its function had not begun yet)
			// may: that attempt is older than the rescuer's.
			if a.attempt < byOthers[0].attempt {
				committedBefore++
				continue
			}
			wrong = append(wrong, fmt.Sprintf("%s (%s): %v; attempts %v", f.tokens[id], id, a, as))
		}
	}
	t.Logf("%d of %v's tasks ran elsewhere after the stop; %d of its attempts begun before the stop ran on while another owner ran the task; "+
		"%d begun after the resume had their start committed before the stop", rescued, paused, overlapped, committedBefore)
	if rescued == 0 {
		t.Errorf("no task of %v ran in another process after the stop: nothing was rescued", paused)
	}
	if st.refused == 0 {
		t.Errorf("%v: Stats().Store.Refused = 0 after the resume, want its late completions refused; its log:\n%s", paused, tail(st.out, 4000))
	}
	if len(wrong) > 0 {
		t.Errorf("%v began %d attempts after the resume on tasks another owner had rescued, e.g. %v", paused, len(wrong), wrong[:min(len(wrong), 5)])
	}
	if newEpoch <= epoch {
		t.Errorf("%v's epoch after the resume = %d, want a new one above %d", paused, newEpoch, epoch)
	}
	if st.rejoins == 0 {
		t.Errorf("%v's log does not say it %s; its log:\n%s", paused, multiRejoinMsg, tail(st.out, 4000))
	}
}

// rescueWait bounds the wait for the rescue of a stopped owner's tasks: many leases.
const rescueWait = 10 * multiLease

// openTransactions describes the server's open InnoDB transactions, for a failure
// message: which connection holds locks, since when, and what it runs.
func openTransactions(t *testing.T, db *sql.DB) string {
	t.Helper()
	rs, err := db.Query("SELECT t.trx_mysql_thread_id, t.trx_state, TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)), " +
		"t.trx_rows_locked, COALESCE(p.COMMAND, ''), COALESCE(p.TIME_MS, 0), COALESCE(t.trx_query, '') " +
		"FROM information_schema.innodb_trx t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id")
	if err != nil {
		return err.Error()
	}
	defer func() { _ = rs.Close() }()
	var b strings.Builder
	for rs.Next() {
		var id, us, rows int64
		var ms float64
		var state, cmd, q string
		if err := rs.Scan(&id, &state, &us, &rows, &cmd, &ms, &q); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "\n  thread %d: %s for %v, %d rows locked, command %s for %v ms, query %.200q",
			id, state, time.Duration(us)*time.Microsecond, rows, cmd, ms, q)
	}
	return b.String()
}

// liveEpoch returns the epoch of the live owner named name, and fails the test when
// there is none or more than one.
func liveEpoch(t *testing.T, s *mysqlstore.Store, name string) uint64 {
	t.Helper()
	os, err := s.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var live []store.OwnerInfo
	for _, o := range os {
		if o.Name == name && o.Live {
			live = append(live, o)
		}
	}
	if len(live) != 1 {
		t.Fatalf("Owners() = %+v: want one live owner %s", os, name)
	}
	return live[0].Epoch
}
