package storetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// rec returns the record of attempt n, started at ms start and ended at ms end.
func rec(n, start, end int, outcome store.State, msg string) store.Attempt {
	return store.Attempt{Number: n, Start: at(start), End: at(end), Outcome: outcome, Error: msg, Owner: "owner-ü"}
}

// ended returns c carrying the record a.
func ended(c store.Change, a store.Attempt) store.Change {
	c.Attempt = a
	return c
}

func wantHistory(t *testing.T, got []store.Attempt, want ...store.Attempt) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("History = %+v (%d records), want %d", got, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i].Record()
		if g.Number != w.Number || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) || g.Outcome != w.Outcome || g.Error != w.Error || g.Owner != w.Owner {
			t.Errorf("History[%d] = %+v, want %+v", i, g, w)
		}
	}
}

// testResults: OpSucceed and OpFail store Task.Result, Get returns it byte for
// byte, other ops may not carry one, ResultMax holds and Requeue clears it.
func testResults(t *testing.T, s store.Store) {
	hostile := []byte("\x00\x1d\x1e\x1f\xff'\"\\<b>ü")
	mustCommit(t, s, ins(task("ok")), ins(task("bad")), ins(task("none")))
	mustCommit(t, s, start("ok", 1, 2, 1), start("bad", 1, 2, 1), start("none", 1, 2, 1))
	okc := succeed("ok", 2)
	okc.Task.Result = hostile
	badc := fail("bad", 2, store.Failed, "boom")
	badc.Task.Result = []byte("partial")
	mustCommit(t, s, okc, badc, succeed("none", 2))
	if got := get(t, s, "ok").Result; !bytes.Equal(got, hostile) {
		t.Errorf("Get(ok).Result = %q, want %q", got, hostile)
	}
	if got := get(t, s, "bad").Result; string(got) != "partial" {
		t.Errorf("Get(bad).Result = %q, want partial", got)
	}
	if got := get(t, s, "none").Result; len(got) != 0 {
		t.Errorf("Get(none).Result = %q, want none", got)
	}

	mustCommit(t, s, ins(task("r")))
	mustCommit(t, s, start("r", 1, 2, 1))
	bad := retry("r", 2, at(10), "x")
	bad.Task.Result = []byte("no")
	big := succeed("r", 2)
	big.Task.Result = make([]byte, store.ResultMax+1)
	res := commit(t, s, bad, big)
	wantResults(t, []store.Change{bad, big}, res, store.ErrInvalidChange, store.ErrInvalidChange)
	if got := get(t, s, "r"); got.State != store.Running || len(got.Result) != 0 {
		t.Errorf("after refused results: state %s, Result %q; want running, none", got.State, got.Result)
	}

	if _, err := s.Requeue(context.Background(), at(20), "bad"); err != nil {
		t.Fatalf("Requeue(bad) error = %v", err)
	}
	if got := get(t, s, "bad"); got.State != store.Queued || len(got.Result) != 0 {
		t.Errorf("requeued: state %s, Result %q; want queued, none", got.State, got.Result)
	}
}

// testHistory: records of the changes that end attempts are kept in order, the
// last AttemptsKeptDefault of them, with truncated error text; refused, stale and
// replayed changes append nothing.
func testHistory(t *testing.T, s store.Store) {
	mustCommit(t, s, ins(task("h")))
	var want []store.Attempt
	fence := uint64(1)
	for n := 1; n <= store.AttemptsKeptDefault+2; n++ {
		mustCommit(t, s, start("h", fence, fence+1, n))
		fence++
		a := rec(n, 10*n, 10*n+5, store.Failed, fmt.Sprintf("attempt %d: \x1d\x1e\x1f ✓", n))
		if n%2 == 0 {
			a.Outcome = store.TimedOut
		}
		mustCommit(t, s, ended(retry("h", fence, at(100*n), a.Error), a))
		want = append(want, a)
	}
	got := get(t, s, "h")
	wantHistory(t, got.History, want[len(want)-store.AttemptsKeptDefault:]...)

	// A stale change appends nothing; nor does a change without a record.
	stale := ended(succeed("h", fence-1), rec(99, 1, 2, store.Succeeded, ""))
	wantResults(t, []store.Change{stale}, commit(t, s, stale), store.ErrStaleFence)
	mustCommit(t, s, start("h", fence, fence+1, 8))
	fence++
	last := rec(8, 200, 210, store.Succeeded, "")
	batch := []store.Change{ended(succeed("h", fence), last)}
	mustCommit(t, s, batch...)
	mustCommit(t, s, batch...) // a replay: already applied, nothing appended
	want = append(want, last)
	wantHistory(t, get(t, s, "h").History, want[len(want)-store.AttemptsKeptDefault:]...)

	// Error text is cut at AttemptErrorMax bytes, at a UTF-8 boundary.
	long := strings.Repeat("é", store.AttemptErrorMax) // 2 bytes each
	mustCommit(t, s, ins(task("long")))
	mustCommit(t, s, start("long", 1, 2, 1))
	lr := rec(1, 1, 2, store.Failed, "x"+long)
	mustCommit(t, s, ended(fail("long", 2, store.Failed, "x"), lr))
	h := get(t, s, "long").History
	if len(h) != 1 || len(h[0].Error) > store.AttemptErrorMax || !utf8.ValidString(h[0].Error) || !strings.HasPrefix("x"+long, h[0].Error) || len(h[0].Error) < store.AttemptErrorMax-1 {
		t.Errorf("History = %+v, want one record with its error cut at %d bytes on a rune boundary", h, store.AttemptErrorMax)
	}

	// A record on an insert is invalid.
	bad := ended(ins(task("bad")), rec(1, 1, 2, store.Failed, ""))
	wantResults(t, []store.Change{bad}, commit(t, s, bad), store.ErrInvalidChange)
}

// testHistoryBatches: records ride with every kind of write: an interrupted
// attempt's record on the next start, an insert started and ended in one batch, and
// many ends in one batch, each with its own record.
func testHistoryBatches(t *testing.T, s store.Store) {
	mustCommit(t, s, ins(task("i")))
	mustCommit(t, s, start("i", 1, 2, 1))
	lost := store.Attempt{Number: 1, Start: at(1), End: at(50), Outcome: store.Abandoned, Error: "interrupted"}
	again := ended(start("i", 2, 3, 2), lost)
	done := ended(succeed("i", 3), rec(2, 50, 60, store.Succeeded, ""))
	mustCommit(t, s, again, done)
	wantHistory(t, get(t, s, "i").History, lost, done.Attempt)

	one := task("one")
	mustCommit(t, s, ins(one), start("one", 1, 2, 1), ended(succeed("one", 2), rec(1, 1, 3, store.Succeeded, "")))
	wantHistory(t, get(t, s, "one").History, rec(1, 1, 3, store.Succeeded, ""))

	const n = 300 // more than one UPDATE of a set (mysqlstore: 128 rows with records)
	var inserts, starts, ends []store.Change
	for i := range n {
		id := fmt.Sprintf("m%03d", i)
		inserts = append(inserts, ins(task(id)))
		starts = append(starts, start(id, 1, 2, 1))
		ends = append(ends, ended(succeed(id, 2), rec(1, i, 100, store.Succeeded, "")))
	}
	mustCommit(t, s, inserts...)
	mustCommit(t, s, starts...)
	mustCommit(t, s, ends...)
	for i := range n {
		id := fmt.Sprintf("m%03d", i)
		wantHistory(t, get(t, s, id).History, rec(1, i, 100, store.Succeeded, ""))
	}
}
