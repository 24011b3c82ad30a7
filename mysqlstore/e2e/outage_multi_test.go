package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
)

// outageDown is how long TestMultiOutage keeps the server down: several leases, so
// that every owner's lease has ended on the server's clock when it comes back.
const outageDown = 3 * multiLease

// TestMultiOutage runs three processes, owners p0, p1 and p2 with a lease of
// multiLease, on a private mariadbd, stops the server for outageDown while they
// submit and run acknowledged durable tasks, and starts it again. Then every owner
// resumes: it acknowledges new tasks and runs attempts to their end after the
// restart; and no acknowledged task is lost.
func TestMultiOutage(t *testing.T) {
	srv := startPrivateServer(t)
	db := srv.open(t, "test")
	t.Cleanup(func() { _ = db.Close() })
	const table = "tasks"
	createRunsTable(t, db, table, false)
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := &multiRun{conf: multiConf{
		dsn: fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?timeout=1s", srv.port), table: table, dir: t.TempDir(),
		lease: multiLease, workMax: 20 * time.Millisecond, submitters: 20, storeTimeout: 2 * time.Second,
	}}
	r.startAll(t)
	for _, p := range r.cur {
		waitAcks(t, p, 200, 30*time.Second)
	}

	down := time.Now()
	srv.stop(t)
	pollUntil(t, fmt.Sprintf("the server to stay down for %v", outageDown), 10*time.Millisecond, 2*outageDown, func() (bool, error) {
		return time.Since(down) >= outageDown, nil
	})
	var ackedDown [multiProcs]int64
	for i, p := range r.cur {
		ackedDown[i] = p.acks()
	}
	srv.start(t)
	up := time.Now()
	for i, p := range r.cur {
		waitAcks(t, p, ackedDown[i]+100, 60*time.Second)
	}
	resumed := time.Since(up)

	stats := r.finish(t, s, time.Minute)
	f := readMultiFacts(t, db, r)
	checkNoLoss(t, f)
	upUs := up.UnixMicro()
	for i, p := range r.cur {
		var ended, acked, failedDown, failedUp int
		for _, as := range f.attempts {
			for _, a := range as {
				if a.pid == p.pid && a.start >= upUs && a.end > 0 {
					ended++
				}
			}
		}
		for _, a := range f.acks {
			if a.proc == p && a.at >= upUs {
				acked++
			}
		}
		var after []string
		for _, l := range f.failed[p] {
			switch {
			case l.micros >= upUs:
				failedUp++
				if len(after) < 3 {
					after = append(after, fmt.Sprint(l.fields))
				}
			case l.micros >= down.UnixMicro():
				failedDown++
			}
		}
		st := stats[p]
		t.Logf("%v: %d tasks acknowledged before the stop, %d after the restart; %d attempts begun and ended after it; "+
			"%d submits failed while it was down, %d after (e.g. %v); changes refused %d, commits failed %d; rejoins %d",
			p, ackedDown[i], acked, ended, failedDown, failedUp, after, st.refused, st.errors, st.rejoins)
		if acked == 0 || ended == 0 {
			t.Errorf("%v did not resume: %d tasks acknowledged and %d attempts ended after the restart", p, acked, ended)
		}
		if n := len(f.failed[p]) - failedDown - failedUp; n > 0 {
			t.Errorf("%v: %d submits failed before the server stopped", p, n)
		}
	}
	same, cross := countOverlaps(f)
	t.Logf("attempts of one task run at once: %d times in one process, %d in two (at least once: the owners' leases ended while they ran)", same, cross)
	t.Logf("every owner acknowledged 100 more tasks within %v of the restart; %d tasks acknowledged in all", resumed.Round(time.Millisecond), len(f.acks))
}

// countOverlaps counts the pairs of attempts of a task that ran at once (the later
// began before the earlier ended; an attempt without an end counts as running on), in
// one process and in two.
func countOverlaps(f *multiFacts) (same, cross int) {
	for _, as := range f.attempts {
		for i, a := range as {
			for _, b := range as[i+1:] {
				if a.end != 0 && b.start >= a.end {
					continue
				}
				if a.pid == b.pid {
					same++
				} else {
					cross++
				}
			}
		}
	}
	return same, cross
}
