// Package storetest is the conformance suite of [kernel.Store]: every implementation
// runs [Exercise] in its tests, as storekit.MemoryStore and mysqlstore do. It also holds
// [FaultStore], which makes any store's commits fail on demand in tests.
//
//	func TestConformance(t *testing.T) {
//		storetest.Exercise(t, func(t *testing.T) kernel.Store {
//			s := newEmptyStore(t) // a store of its own; closed in t.Cleanup
//			return s
//		})
//	}
//
// Each subtest gets a new, empty store from newStore, which also arranges its cleanup.
// The suite checks the contract documented on [kernel.Store]: idempotent inserts and
// retried batches, unique keys, fences, recovery, dead letters, retention, large batches,
// payload and time round trips, concurrent commits and closing.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/kernel"
)

// Exercise runs the conformance suite against the stores newStore makes. newStore is
// called once per subtest and must return an empty store of its own, and register its
// cleanup (closing it, dropping its table) with t.Cleanup. A store may be closed by the
// suite before its cleanup runs: Close must be idempotent.
func Exercise(t *testing.T, newStore func(t *testing.T) kernel.Store) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s kernel.Store)
	}{
		{"EmptyCommit", testEmptyCommit},
		{"InsertRoundTrip", testInsertRoundTrip},
		{"Payloads", testPayloads},
		{"TimePrecision", testTimePrecision},
		{"LastErrorTruncated", testLastErrorTruncated},
		{"GetUnknown", testGetUnknown},
		{"IdempotentInsert", testIdempotentInsert},
		{"UniqueKey", testUniqueKey},
		{"UniqueKeyBytes", testUniqueKeyBytes},
		{"UniqueKeyFreedInBatch", testUniqueKeyFreedInBatch},
		{"Fences", testFences},
		{"StaleWriter", testStaleWriter},
		{"UnknownTask", testUnknownTask},
		{"Validation", testValidation},
		{"ChainInOneBatch", testChainInOneBatch},
		{"Recover", testRecover},
		{"RecoverRunning", testRecoverRunning},
		{"DeadLetters", testDeadLetters},
		{"Requeue", testRequeue},
		{"Purge", testPurge},
		{"PurgeCompleted", testPurgeCompleted},
		{"ReplayBatches", testReplayBatches},
		{"RetryAsPrefix", testRetryAsPrefix},
		{"BigBatch", testBigBatch},
		{"ConcurrentCommits", testConcurrentCommits},
		{"ConcurrentUniqueKeys", testConcurrentUniqueKeys},
		{"ContextDone", testContextDone},
		{"Close", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newStore(t))
		})
	}
	t.Run("ReplayMatchesSingleCommit", func(t *testing.T) {
		testReplayMatchesSingle(t, newStore(t), newStore(t))
	})
}

// t0 is the suite's base time, a whole millisecond.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// task returns a valid queued task with fence 1.
func task(id string) kernel.StoredTask {
	return kernel.StoredTask{
		ID:          id,
		Kind:        "storetest.kind",
		Payload:     []byte("payload of " + id),
		Priority:    kernel.Normal,
		RunAt:       t0,
		Timeout:     time.Second,
		MaxAttempts: 3,
		Fence:       1,
		State:       kernel.Queued,
		CreatedAt:   t0,
		UpdatedAt:   t0,
	}
}

func keyed(id, key string) kernel.StoredTask {
	tk := task(id)
	tk.UniqueKey = key
	return tk
}

func ins(tk kernel.StoredTask) kernel.Change { return kernel.Change{Op: kernel.OpInsert, Task: tk} }

func start(id string, from, to uint64, attempt int) kernel.Change {
	return kernel.Change{Op: kernel.OpStart, Fence: from, Task: kernel.StoredTask{
		ID: id, Fence: to, Attempt: attempt, UpdatedAt: at(1),
	}}
}

func retry(id string, fence uint64, runAt time.Time, msg string) kernel.Change {
	return kernel.Change{Op: kernel.OpRetry, Fence: fence, Task: kernel.StoredTask{
		ID: id, RunAt: runAt, LastError: msg, UpdatedAt: at(2),
	}}
}

func succeed(id string, fence uint64) kernel.Change {
	return kernel.Change{Op: kernel.OpSucceed, Fence: fence, Task: kernel.StoredTask{ID: id, UpdatedAt: at(3)}}
}

func fail(id string, fence uint64, st kernel.State, msg string) kernel.Change {
	return kernel.Change{Op: kernel.OpFail, Fence: fence, Task: kernel.StoredTask{
		ID: id, State: st, LastError: msg, UpdatedAt: at(4),
	}}
}

func cancel(id string, fence uint64) kernel.Change {
	return kernel.Change{Op: kernel.OpCancel, Fence: fence, Task: kernel.StoredTask{ID: id, UpdatedAt: at(5)}}
}

// withTime returns c recorded at tm.
func withTime(c kernel.Change, tm time.Time) kernel.Change {
	c.Task.UpdatedAt = tm
	return c
}

// commit commits changes and fails the test when the call itself fails.
func commit(t *testing.T, s kernel.Store, changes ...kernel.Change) []error {
	t.Helper()
	res, err := s.Commit(context.Background(), changes)
	if err != nil {
		t.Fatalf("Commit(%d changes) error = %v", len(changes), err)
	}
	if len(res) != len(changes) {
		t.Fatalf("Commit(%d changes) returned %d results", len(changes), len(res))
	}
	return res
}

// mustCommit commits changes and fails the test unless every change applied.
func mustCommit(t *testing.T, s kernel.Store, changes ...kernel.Change) {
	t.Helper()
	for i, err := range commit(t, s, changes...) {
		if err != nil {
			t.Fatalf("Commit: results[%d] (%s %q) = %v, want nil", i, changes[i].Op, changes[i].Task.ID, err)
		}
	}
}

// wantResults checks each result against want: nil, or a sentinel it must wrap.
func wantResults(t *testing.T, changes []kernel.Change, got []error, want ...error) {
	t.Helper()
	for i := range want {
		ok := got[i] == nil && want[i] == nil || want[i] != nil && errors.Is(got[i], want[i])
		if !ok {
			t.Errorf("results[%d] (%s %q) = %v, want %v", i, changes[i].Op, changes[i].Task.ID, got[i], want[i])
		}
	}
}

func get(t *testing.T, s kernel.Store, id string) kernel.StoredTask {
	t.Helper()
	tk, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q) error = %v", id, err)
	}
	return tk
}

func wantUnknown(t *testing.T, s kernel.Store, id string) {
	t.Helper()
	if tk, err := s.Get(context.Background(), id); !errors.Is(err, kernel.ErrUnknownTask) {
		t.Fatalf("Get(%q) = %+v, %v; want ErrUnknownTask", id, tk, err)
	}
}

func recoverAll(t *testing.T, s kernel.Store) []kernel.StoredTask {
	t.Helper()
	live, err := s.Recover(context.Background())
	if err != nil {
		t.Fatalf("Recover() error = %v", err)
	}
	return live
}

func ids(ts []kernel.StoredTask) []string {
	out := make([]string, len(ts))
	for i := range ts {
		out[i] = ts[i].ID
	}
	return out
}

// ms truncates tm as stores do.
func ms(tm time.Time) time.Time {
	if tm.IsZero() {
		return tm
	}
	return time.UnixMilli(tm.UnixMilli())
}

// diffTask describes how got differs from want as stored ("" when equal).
func diffTask(got, want kernel.StoredTask) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if want.Priority == kernel.PriorityDefault {
		want.Priority = kernel.Normal
	}
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Kind != want.Kind {
		add("Kind", got.Kind, want.Kind)
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		add("Payload", fmt.Sprintf("%d bytes %.16x", len(got.Payload), got.Payload),
			fmt.Sprintf("%d bytes %.16x", len(want.Payload), want.Payload))
	}
	if got.Priority != want.Priority {
		add("Priority", got.Priority, want.Priority)
	}
	times := []struct {
		name      string
		got, want time.Time
	}{{"RunAt", got.RunAt, want.RunAt}, {"CreatedAt", got.CreatedAt, want.CreatedAt}, {"UpdatedAt", got.UpdatedAt, want.UpdatedAt}}
	for _, tm := range times {
		if !tm.got.Equal(ms(tm.want)) {
			add(tm.name, tm.got, ms(tm.want))
		}
	}
	if got.Timeout != want.Timeout {
		add("Timeout", got.Timeout, want.Timeout)
	}
	if got.MaxAttempts != want.MaxAttempts {
		add("MaxAttempts", got.MaxAttempts, want.MaxAttempts)
	}
	if got.Attempt != want.Attempt {
		add("Attempt", got.Attempt, want.Attempt)
	}
	if got.Fence != want.Fence {
		add("Fence", got.Fence, want.Fence)
	}
	if got.UniqueKey != want.UniqueKey {
		add("UniqueKey", got.UniqueKey, want.UniqueKey)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.LastError != want.LastError {
		add("LastError", got.LastError, want.LastError)
	}
	return strings.Join(d, "; ")
}

func wantTask(t *testing.T, s kernel.Store, want kernel.StoredTask) {
	t.Helper()
	if d := diffTask(get(t, s, want.ID), want); d != "" {
		t.Errorf("Get(%q): %s", want.ID, d)
	}
}

func testEmptyCommit(t *testing.T, s kernel.Store) {
	for _, changes := range [][]kernel.Change{nil, {}} {
		res, err := s.Commit(context.Background(), changes)
		if res != nil || err != nil {
			t.Errorf("Commit(%v) = %v, %v; want nil, nil", changes, res, err)
		}
	}
}

func testInsertRoundTrip(t *testing.T, s kernel.Store) {
	a := task("a")
	b := task("b")
	b.Kind = "emails.send/ünïcode"
	b.Priority = kernel.High
	b.RunAt = at(123_456)
	b.Timeout = 1500*time.Millisecond + 7 // durations are kept exactly
	b.MaxAttempts = 25
	b.Attempt = 2
	b.Fence = math.MaxUint64 - 1
	b.UniqueKey = "order-42"
	b.State = kernel.Delayed
	b.LastError = "previous: ünïcode ✓"
	b.CreatedAt = at(-5000)
	b.UpdatedAt = at(-4000)
	c := task("c")
	c.Priority = kernel.Low
	d := task("d")
	d.Priority = kernel.PriorityDefault // stored as Normal
	e := task(strings.Repeat("e", kernel.StoredIDMax))
	e.Kind = strings.Repeat("k", kernel.KindMax)
	e.UniqueKey = strings.Repeat("u", kernel.UniqueKeyMax)
	e.State = kernel.Running
	e.Attempt = 1
	f := task("f")
	f.State = kernel.Succeeded
	f.UniqueKey = "done-key"
	all := []kernel.StoredTask{a, b, c, d, e, f}
	var changes []kernel.Change
	for _, tk := range all {
		changes = append(changes, ins(tk))
	}
	mustCommit(t, s, changes...)
	for _, tk := range all {
		wantTask(t, s, tk)
	}
}

func testPayloads(t *testing.T, s kernel.Store) {
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	big := make([]byte, 512<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	payloads := map[string][]byte{
		"nil":        nil,
		"empty":      {},
		"zero":       {0},
		"all-bytes":  allBytes,
		"bad-utf8":   {0xff, 0xfe, 0xc3, 0x28, '\\', '\'', '"', 0},
		"sql-ish":    []byte("'); DROP TABLE x; --"),
		"big-random": big,
	}
	var changes []kernel.Change
	for name, p := range payloads {
		tk := task(name)
		tk.Payload = p
		changes = append(changes, ins(tk))
	}
	mustCommit(t, s, changes...)
	for name, p := range payloads {
		got := get(t, s, name)
		if !bytes.Equal(got.Payload, p) {
			t.Errorf("Get(%q).Payload = %d bytes, want %d bytes (%.16x…)", name, len(got.Payload), len(p), p)
		}
	}
	// Recover returns payloads too.
	for _, tk := range recoverAll(t, s) {
		if !bytes.Equal(tk.Payload, payloads[tk.ID]) {
			t.Errorf("Recover(): %q payload = %d bytes, want %d", tk.ID, len(tk.Payload), len(payloads[tk.ID]))
		}
	}
}

func testTimePrecision(t *testing.T, s kernel.Store) {
	cases := map[string]time.Time{
		"ns":        t0.Add(123_456_789 * time.Nanosecond),
		"ms":        t0.Add(999 * time.Millisecond),
		"pre-1970":  time.Date(1960, 7, 1, 12, 0, 0, 1_500_000, time.UTC),
		"far":       time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		"local":     time.Date(2031, 3, 4, 5, 6, 7, 8_000_000, time.FixedZone("X", 5*3600+1800)),
		"zero":      {},
		"monotonic": time.Now(), // carries a monotonic reading
	}
	var changes []kernel.Change
	for name, tm := range cases {
		tk := task(name)
		tk.RunAt, tk.CreatedAt = tm, tm
		if !tm.IsZero() {
			tk.UpdatedAt = tm
		}
		changes = append(changes, ins(tk))
	}
	mustCommit(t, s, changes...)
	for name, tm := range cases {
		got := get(t, s, name)
		want := ms(tm)
		if !got.RunAt.Equal(want) || !got.CreatedAt.Equal(want) {
			t.Errorf("%s: RunAt, CreatedAt = %v, %v; want %v (from %v)", name, got.RunAt, got.CreatedAt, want, tm)
		}
		if tm.IsZero() && (!got.RunAt.IsZero() || !got.CreatedAt.IsZero()) {
			t.Errorf("%s: RunAt, CreatedAt = %v, %v; want zero times", name, got.RunAt, got.CreatedAt)
		}
	}
	// A retry's RunAt is truncated the same way.
	mustCommit(t, s, start("ns", 1, 2, 1), retry("ns", 2, cases["ns"].Add(time.Hour), "x"))
	if got, want := get(t, s, "ns").RunAt, ms(cases["ns"].Add(time.Hour)); !got.Equal(want) {
		t.Errorf("RunAt after retry = %v, want %v", got, want)
	}
}

func testLastErrorTruncated(t *testing.T, s kernel.Store) {
	long := strings.Repeat("é", kernel.LastErrorMax) // 2 bytes a rune: cut inside one
	mustCommit(t, s, ins(task("a")), start("a", 1, 2, 1), retry("a", 2, t0, long))
	got := get(t, s, "a").LastError
	if len(got) > kernel.LastErrorMax || len(got) < kernel.LastErrorMax-3 || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
		t.Errorf("LastError = %d bytes (valid UTF-8: %v), want a prefix of at most %d bytes cut at a rune",
			len(got), utf8.ValidString(got), kernel.LastErrorMax)
	}
}

func testGetUnknown(t *testing.T, s kernel.Store) {
	wantUnknown(t, s, "nope")
	wantUnknown(t, s, "")
}

func testIdempotentInsert(t *testing.T, s kernel.Store) {
	a := task("a")
	mustCommit(t, s, ins(a))
	other := a
	other.Payload = []byte("other payload")
	other.Priority = kernel.High
	other.UniqueKey = "k"
	mustCommit(t, s, ins(other)) // same ID: a no-op reporting nil
	wantTask(t, s, a)

	// The same ID twice in one batch: the first wins.
	b1, b2 := task("b"), task("b")
	b2.Payload = []byte("second")
	mustCommit(t, s, ins(b1), ins(b2))
	wantTask(t, s, b1)

	// A batch retried as a whole never duplicates.
	var batch []kernel.Change
	for i := range 100 {
		batch = append(batch, ins(keyed(fmt.Sprintf("t%03d", i), fmt.Sprintf("key%03d", i))))
	}
	for range 3 {
		mustCommit(t, s, batch...)
	}
	if n := len(recoverAll(t, s)); n != 102 {
		t.Errorf("len(Recover()) = %d, want 102", n)
	}
	// An insert of an existing task after it moved on still reports nil and changes nothing.
	mustCommit(t, s, start("t000", 1, 2, 1), succeed("t000", 2))
	mustCommit(t, s, batch[0])
	if got := get(t, s, "t000"); got.State != kernel.Succeeded {
		t.Errorf("State after re-insert = %v, want succeeded", got.State)
	}
}

func testUniqueKey(t *testing.T, s kernel.Store) {
	mustCommit(t, s, ins(keyed("a", "K")))
	ch := []kernel.Change{ins(keyed("b", "K")), ins(keyed("c", "K2"))}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrDuplicateKey, nil)
	wantUnknown(t, s, "b")

	// Two live inserts with one key in a batch: the first wins.
	ch = []kernel.Change{ins(keyed("d", "K3")), ins(keyed("e", "K3"))}
	wantResults(t, ch, commit(t, s, ch...), nil, kernel.ErrDuplicateKey)

	// A terminal insert does not hold the key, whatever else does.
	done := keyed("f", "K")
	done.State = kernel.Canceled
	mustCommit(t, s, ins(done))

	// The retry of the holder's own insert is not a conflict.
	mustCommit(t, s, ins(keyed("a", "K")))

	// Every terminal state frees the key.
	ends := []struct {
		name string
		end  func(id string) []kernel.Change
	}{
		{"succeed", func(id string) []kernel.Change { return []kernel.Change{start(id, 1, 2, 1), succeed(id, 2)} }},
		{"fail", func(id string) []kernel.Change {
			return []kernel.Change{start(id, 1, 2, 1), fail(id, 2, kernel.Failed, "x")}
		}},
		{"timed-out", func(id string) []kernel.Change {
			return []kernel.Change{start(id, 1, 2, 1), fail(id, 2, kernel.TimedOut, "x")}
		}},
		{"cancel", func(id string) []kernel.Change { return []kernel.Change{cancel(id, 1)} }},
		{"evicted", func(id string) []kernel.Change { return []kernel.Change{fail(id, 1, kernel.Evicted, "")} }},
		{"abandoned", func(id string) []kernel.Change { return []kernel.Change{fail(id, 1, kernel.Abandoned, "")} }},
	}
	holder := "a"
	for i, e := range ends {
		mustCommit(t, s, e.end(holder)...)
		next := fmt.Sprintf("a%d", i)
		ch := []kernel.Change{ins(keyed(next, "K"))}
		wantResults(t, ch, commit(t, s, ch...), nil)
		ch = []kernel.Change{ins(keyed(next+"-dup", "K"))}
		wantResults(t, ch, commit(t, s, ch...), kernel.ErrDuplicateKey)
		if t.Failed() {
			t.Fatalf("after %s", e.name)
		}
		holder = next
	}
	// Requeue of a dead letter whose key is held again is skipped.
	requeued, err := s.Requeue(context.Background(), at(10), "a1") // a1 failed; a5 holds K
	if err != nil || len(requeued) != 0 {
		t.Errorf("Requeue(a1) = %v, %v; want none while K is held", ids(requeued), err)
	}
	mustCommit(t, s, cancel(holder, 1))
	requeued, err = s.Requeue(context.Background(), at(10), "a1")
	if err != nil || len(requeued) != 1 {
		t.Fatalf("Requeue(a1) = %v, %v; want [a1] once K is free", ids(requeued), err)
	}
	ch = []kernel.Change{ins(keyed("z", "K"))}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrDuplicateKey)
}

func testUniqueKeyBytes(t *testing.T, s kernel.Store) {
	// Keys compare byte for byte: no case folding, no trailing-space padding, no accent folding.
	keys := []string{"key", "Key", "KEY", "key ", " key", "kéy", "key\x00", "\xff"}
	var ch []kernel.Change
	for i, k := range keys {
		ch = append(ch, ins(keyed(fmt.Sprintf("t%d", i), k)))
	}
	mustCommit(t, s, ch...)
	for i, k := range keys {
		got := get(t, s, fmt.Sprintf("t%d", i)).UniqueKey
		if got != k {
			t.Errorf("UniqueKey = %q, want %q", got, k)
		}
	}
	ch = []kernel.Change{ins(keyed("dup", "Key"))}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrDuplicateKey)
	// IDs are byte-exact too.
	mustCommit(t, s, ins(task("id")), ins(task("ID")), ins(task("id ")))
	for _, id := range []string{"id", "ID", "id "} {
		if got := get(t, s, id).ID; got != id {
			t.Errorf("Get(%q).ID = %q", id, got)
		}
	}
}

func testUniqueKeyFreedInBatch(t *testing.T, s kernel.Store) {
	mustCommit(t, s, ins(keyed("a", "K")))
	ch := []kernel.Change{
		cancel("a", 1), ins(keyed("b", "K")), // freed, then taken
		ins(keyed("c", "K2")), start("c", 1, 2, 1), succeed("c", 2), ins(keyed("d", "K2")),
		ins(keyed("e", "K2")), // held by d
	}
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, kernel.ErrDuplicateKey)
	for id, st := range map[string]kernel.State{"a": kernel.Canceled, "b": kernel.Queued, "c": kernel.Succeeded, "d": kernel.Queued} {
		if got := get(t, s, id).State; got != st {
			t.Errorf("Get(%q).State = %v, want %v", id, got, st)
		}
	}
	wantUnknown(t, s, "e")
	// The retry of the whole batch reports the same.
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, kernel.ErrDuplicateKey)
	wantUnknown(t, s, "e")
}

func testFences(t *testing.T, s kernel.Store) {
	a := task("a")
	mustCommit(t, s, ins(a))

	ch := []kernel.Change{start("a", 1, 2, 1)}
	wantResults(t, ch, commit(t, s, ch...), nil)
	a.State, a.Fence, a.Attempt, a.UpdatedAt = kernel.Running, 2, 1, at(1)
	wantTask(t, s, a)

	// A second start from the old fence is stale and changes nothing.
	ch = []kernel.Change{start("a", 1, 3, 1), succeed("a", 1), retry("a", 1, at(99), "old"), cancel("a", 1), fail("a", 1, 0, "old")}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrStaleFence, kernel.ErrStaleFence, kernel.ErrStaleFence,
		kernel.ErrStaleFence, kernel.ErrStaleFence)
	wantTask(t, s, a)

	// The current fence writes.
	ch = []kernel.Change{retry("a", 2, at(500), "boom")}
	wantResults(t, ch, commit(t, s, ch...), nil)
	a.State, a.RunAt, a.LastError, a.UpdatedAt = kernel.Retrying, at(500), "boom", at(2)
	wantTask(t, s, a)

	ch = []kernel.Change{start("a", 2, 7, 2), fail("a", 2, 0, "stale"), succeed("a", 7)}
	wantResults(t, ch, commit(t, s, ch...), nil, kernel.ErrStaleFence, nil)
	a.State, a.Fence, a.Attempt, a.UpdatedAt = kernel.Succeeded, 7, 2, at(3)
	wantTask(t, s, a)

	// A terminal task takes no more writes, whatever the fence.
	ch = []kernel.Change{cancel("a", 7), start("a", 7, 8, 3), retry("a", 7, t0, "x"), fail("a", 7, 0, "x")}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrStaleFence, kernel.ErrStaleFence, kernel.ErrStaleFence,
		kernel.ErrStaleFence)
	wantTask(t, s, a)

	// Fences are full uint64s.
	b := task("b")
	b.Fence = math.MaxUint64 - 2
	mustCommit(t, s, ins(b), start("b", math.MaxUint64-2, math.MaxUint64, 1))
	if got := get(t, s, "b").Fence; got != math.MaxUint64 {
		t.Errorf("Fence = %d, want %d", got, uint64(math.MaxUint64))
	}
}

func testStaleWriter(t *testing.T, s kernel.Store) {
	// Attempt 1 (fence 2) hangs past its timeout and becomes a zombie; attempt 2 (fence 3)
	// runs. Whatever the zombie writes later, attempt 2's writes stand.
	mustCommit(t, s, ins(task("a")), start("a", 1, 2, 1))
	mustCommit(t, s, retry("a", 2, at(10), "timed out"), start("a", 2, 3, 2))
	for _, c := range []kernel.Change{succeed("a", 2), fail("a", 2, 0, "zombie"), retry("a", 2, at(50), "zombie"), cancel("a", 2), start("a", 2, 9, 9)} {
		ch := []kernel.Change{c}
		wantResults(t, ch, commit(t, s, ch...), kernel.ErrStaleFence)
	}
	got := get(t, s, "a")
	if got.State != kernel.Running || got.Fence != 3 || got.Attempt != 2 || got.LastError != "timed out" {
		t.Fatalf("Get(a) = %v fence %d attempt %d %q; want running fence 3 attempt 2", got.State, got.Fence, got.Attempt, got.LastError)
	}
	mustCommit(t, s, succeed("a", 3))
	// The zombie's success after attempt 2's is still refused: same state, other fence.
	ch := []kernel.Change{succeed("a", 2)}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrStaleFence)
}

func testUnknownTask(t *testing.T, s kernel.Store) {
	ch := []kernel.Change{start("x", 1, 2, 1), retry("x", 1, t0, ""), succeed("x", 1), fail("x", 1, 0, ""), cancel("x", 1), ins(task("y"))}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrUnknownTask, kernel.ErrUnknownTask, kernel.ErrUnknownTask,
		kernel.ErrUnknownTask, kernel.ErrUnknownTask, nil)
	wantUnknown(t, s, "x")
}

func testValidation(t *testing.T, s kernel.Store) {
	mod := func(f func(*kernel.StoredTask)) kernel.Change {
		tk := task("bad")
		f(&tk)
		return ins(tk)
	}
	bad := []struct {
		name string
		c    kernel.Change
	}{
		{"op zero", kernel.Change{Task: task("bad")}},
		{"op unknown", kernel.Change{Op: 200, Task: task("bad")}},
		{"empty ID", mod(func(tk *kernel.StoredTask) { tk.ID = "" })},
		{"long ID", mod(func(tk *kernel.StoredTask) { tk.ID = strings.Repeat("x", kernel.StoredIDMax+1) })},
		{"empty kind", mod(func(tk *kernel.StoredTask) { tk.Kind = "" })},
		{"long kind", mod(func(tk *kernel.StoredTask) { tk.Kind = strings.Repeat("x", kernel.KindMax+1) })},
		{"long key", mod(func(tk *kernel.StoredTask) { tk.UniqueKey = strings.Repeat("x", kernel.UniqueKeyMax+1) })},
		{"priority", mod(func(tk *kernel.StoredTask) { tk.Priority = 9 })},
		{"state zero", mod(func(tk *kernel.StoredTask) { tk.State = 0 })},
		{"state unknown", mod(func(tk *kernel.StoredTask) { tk.State = 77 })},
		{"attempt", mod(func(tk *kernel.StoredTask) { tk.Attempt = -1 })},
		{"max attempts", mod(func(tk *kernel.StoredTask) { tk.MaxAttempts = -1 })},
		{"timeout", mod(func(tk *kernel.StoredTask) { tk.Timeout = -1 })},
		{"updated zero", mod(func(tk *kernel.StoredTask) { tk.UpdatedAt = time.Time{} })},
		{"start same fence", start("ok", 1, 1, 1)},
		{"start lower fence", start("ok", 5, 4, 1)},
		{"start attempt 0", start("ok", 1, 2, 0)},
		{"fail state", fail("ok", 1, kernel.Succeeded, "")},
		{"fail live state", fail("ok", 1, kernel.Queued, "")},
		{"succeed no time", withTime(succeed("ok", 1), time.Time{})},
	}
	mustCommit(t, s, ins(task("ok")))
	for _, b := range bad {
		if err := b.c.Validate(); !errors.Is(err, kernel.ErrInvalidChange) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidChange", b.name, err)
		}
		ch := []kernel.Change{b.c, ins(task("after-" + b.name))}
		wantResults(t, ch, commit(t, s, ch...), kernel.ErrInvalidChange, nil)
	}
	wantUnknown(t, s, "bad")
	wantTask(t, s, task("ok")) // untouched by the invalid changes naming it
}

func testChainInOneBatch(t *testing.T, s kernel.Store) {
	ch := []kernel.Change{
		ins(task("a")), start("a", 1, 2, 1), succeed("a", 2),
		ins(task("b")), start("b", 1, 2, 1), retry("b", 2, at(100), "e1"), start("b", 2, 3, 2), retry("b", 3, at(200), "e2"),
		ins(task("c")), start("c", 1, 2, 1), fail("c", 2, kernel.TimedOut, "slow"), cancel("c", 2),
	}
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, kernel.ErrStaleFence)
	check := func() {
		t.Helper()
		a := task("a")
		a.State, a.Fence, a.Attempt, a.UpdatedAt = kernel.Succeeded, 2, 1, at(3)
		wantTask(t, s, a)
		b := task("b")
		b.State, b.Fence, b.Attempt, b.RunAt, b.LastError, b.UpdatedAt = kernel.Retrying, 3, 2, at(200), "e2", at(2)
		wantTask(t, s, b)
		c := task("c")
		c.State, c.Fence, c.Attempt, c.LastError, c.UpdatedAt = kernel.TimedOut, 2, 1, "slow", at(4)
		wantTask(t, s, c)
	}
	check()
	// Retried whole, the batch reports the same and changes nothing.
	wantResults(t, ch, commit(t, s, ch...), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, kernel.ErrStaleFence)
	check()
	check()
}

func testRecover(t *testing.T, s kernel.Store) {
	type spec struct {
		id    string
		prio  kernel.Priority
		runAt int
		state kernel.State
	}
	specs := []spec{
		{"n-late", kernel.Normal, 900, kernel.Queued},
		{"h-late", kernel.High, 500, kernel.Delayed},
		{"l-early", kernel.Low, -100, kernel.Queued},
		{"h-early", kernel.High, 10, kernel.Queued},
		{"n-early", kernel.Normal, 5, kernel.Retrying},
		{"n-tie-b", kernel.Normal, 700, kernel.Running},
		{"n-tie-a", kernel.PriorityDefault, 700, kernel.Queued},
		{"h-done", kernel.High, 0, kernel.Succeeded},
		{"h-failed", kernel.High, 0, kernel.Failed},
		{"n-canceled", kernel.Normal, 0, kernel.Canceled},
		{"l-timedout", kernel.Low, 0, kernel.TimedOut},
		{"l-evicted", kernel.Low, 0, kernel.Evicted},
		{"l-abandoned", kernel.Low, 0, kernel.Abandoned},
		{"l-late", kernel.Low, 100_000, kernel.Delayed},
	}
	byID := map[string]kernel.StoredTask{}
	var ch []kernel.Change
	for _, sp := range specs {
		tk := task(sp.id)
		tk.Priority, tk.RunAt, tk.State = sp.prio, at(sp.runAt), sp.state
		byID[sp.id] = tk
		ch = append(ch, ins(tk))
	}
	mustCommit(t, s, ch...)
	got := recoverAll(t, s)
	want := []string{"h-early", "h-late", "n-early", "n-tie-a", "n-tie-b", "n-late", "l-early", "l-late"}
	if !slices.Equal(ids(got), want) {
		t.Fatalf("Recover() = %v, want %v", ids(got), want)
	}
	for _, tk := range got {
		if d := diffTask(tk, byID[tk.ID]); d != "" {
			t.Errorf("Recover(): %s: %s", tk.ID, d)
		}
	}
	// Recover changes nothing.
	if again := recoverAll(t, s); !slices.Equal(ids(again), want) {
		t.Errorf("second Recover() = %v, want %v", ids(again), want)
	}
}

func testRecoverRunning(t *testing.T, s kernel.Store) {
	mustCommit(t, s, ins(task("a")), start("a", 1, 2, 1))
	// The process dies here. At restart, the running attempt comes back as it was …
	got := recoverAll(t, s)
	if len(got) != 1 || got[0].State != kernel.Running || got[0].Attempt != 1 || got[0].Fence != 2 {
		t.Fatalf("Recover() = %+v, want a running at attempt 1, fence 2", got)
	}
	// … and the kernel runs it again as a new attempt with a new fence.
	mustCommit(t, s, start("a", 2, 3, 2))
	// A write of the dead attempt (a lagging batch) is refused.
	ch := []kernel.Change{succeed("a", 2)}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrStaleFence)
	// A task out of attempts is dead-lettered instead.
	mustCommit(t, s, fail("a", 3, kernel.Failed, "process died during the last attempt"))
	if n, err := s.CountDeadLetters(context.Background()); n != 1 || err != nil {
		t.Errorf("CountDeadLetters() = %d, %v; want 1", n, err)
	}
	if got := recoverAll(t, s); len(got) != 0 {
		t.Errorf("Recover() = %v, want none", ids(got))
	}
}

// deadLetters makes n dead letters "dNN" and a few tasks that are not.
func deadLetters(t *testing.T, s kernel.Store, n int) {
	t.Helper()
	states := []kernel.State{kernel.Failed, kernel.TimedOut, kernel.Evicted, kernel.Abandoned}
	var ch []kernel.Change
	for i := range n {
		id := fmt.Sprintf("d%02d", i)
		ch = append(ch, ins(task(id)), start(id, 1, 2, 1), fail(id, 2, states[i%len(states)], "error "+id))
	}
	ch = append(ch, ins(task("live")), ins(task("done")), cancel("done", 1), ins(task("ok")), start("ok", 1, 2, 1), succeed("ok", 2))
	mustCommit(t, s, ch...)
}

func testDeadLetters(t *testing.T, s kernel.Store) {
	ctx := context.Background()
	if n, err := s.CountDeadLetters(ctx); n != 0 || err != nil {
		t.Fatalf("CountDeadLetters() = %d, %v; want 0", n, err)
	}
	if dl, err := s.DeadLetters(ctx, 10, ""); len(dl) != 0 || err != nil {
		t.Fatalf("DeadLetters() = %v, %v; want none", ids(dl), err)
	}
	deadLetters(t, s, 25)
	if n, err := s.CountDeadLetters(ctx); n != 25 || err != nil {
		t.Fatalf("CountDeadLetters() = %d, %v; want 25", n, err)
	}
	var all []string
	after := ""
	for page := 0; ; page++ {
		dl, err := s.DeadLetters(ctx, 10, after)
		if err != nil {
			t.Fatalf("DeadLetters(10, %q) error = %v", after, err)
		}
		if len(dl) == 0 {
			break
		}
		if page > 3 || len(dl) > 10 {
			t.Fatalf("DeadLetters(10, %q) = %v: too many", after, ids(dl))
		}
		for _, tk := range dl {
			if !tk.State.DeadLetter() || tk.LastError != "error "+tk.ID || tk.Attempt != 1 || tk.Fence != 2 {
				t.Errorf("dead letter %q: state %v, error %q, attempt %d, fence %d", tk.ID, tk.State, tk.LastError, tk.Attempt, tk.Fence)
			}
			if !bytes.Equal(tk.Payload, []byte("payload of "+tk.ID)) {
				t.Errorf("dead letter %q: payload %q", tk.ID, tk.Payload)
			}
		}
		all = append(all, ids(dl)...)
		after = dl[len(dl)-1].ID
	}
	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("d%02d", i))
	}
	if !slices.Equal(all, want) {
		t.Errorf("DeadLetters pages = %v, want %v", all, want)
	}
	dl, err := s.DeadLetters(ctx, 0, "") // limit <= 0: the default page
	if err != nil || len(dl) != min(25, kernel.DeadLettersLimitDefault) {
		t.Errorf("DeadLetters(0, \"\") = %d tasks, %v; want 25", len(dl), err)
	}
	dl, err = s.DeadLetters(ctx, 3, "d10")
	if err != nil || !slices.Equal(ids(dl), []string{"d11", "d12", "d13"}) {
		t.Errorf("DeadLetters(3, d10) = %v, %v; want [d11 d12 d13]", ids(dl), err)
	}
}

func testRequeue(t *testing.T, s kernel.Store) {
	ctx := context.Background()
	deadLetters(t, s, 5)
	before := get(t, s, "d01")
	got, err := s.Requeue(ctx, at(1000), "d01", "d03", "live", "done", "ok", "unknown", "d03")
	if err != nil {
		t.Fatalf("Requeue() error = %v", err)
	}
	slices.SortFunc(got, func(a, b kernel.StoredTask) int { return strings.Compare(a.ID, b.ID) })
	if !slices.Equal(ids(got), []string{"d01", "d03"}) {
		t.Fatalf("Requeue() = %v, want [d01 d03]", ids(got))
	}
	for _, tk := range got {
		stored := get(t, s, tk.ID)
		if d := diffTask(tk, stored); d != "" {
			t.Errorf("Requeue() returned %q unlike Get: %s", tk.ID, d)
		}
		if tk.State != kernel.Queued || tk.Attempt != 0 || tk.Fence <= 2 || !tk.RunAt.Equal(at(1000)) ||
			!tk.UpdatedAt.Equal(at(1000)) || tk.LastError != "error "+tk.ID {
			t.Errorf("requeued %q: state %v, attempt %d, fence %d, run at %v, updated %v, error %q",
				tk.ID, tk.State, tk.Attempt, tk.Fence, tk.RunAt, tk.UpdatedAt, tk.LastError)
		}
	}
	if got[0].Kind != before.Kind || !bytes.Equal(got[0].Payload, before.Payload) || got[0].MaxAttempts != before.MaxAttempts {
		t.Errorf("requeued d01 lost its kind, payload or max attempts: %+v", got[0])
	}
	if n, err := s.CountDeadLetters(ctx); n != 3 || err != nil {
		t.Errorf("CountDeadLetters() = %d, %v; want 3", n, err)
	}
	if live := ids(recoverAll(t, s)); !slices.Equal(live, []string{"live", "d01", "d03"}) {
		t.Errorf("Recover() = %v, want [live d01 d03]", live)
	}
	// The new life runs under the returned fence; the old attempt's fence is stale.
	f := got[0].Fence
	ch := []kernel.Change{succeed("d01", 2), start("d01", f, f+1, 1), succeed("d01", f+1)}
	wantResults(t, ch, commit(t, s, ch...), kernel.ErrStaleFence, nil, nil)
	// Requeued tasks are no longer dead letters.
	if again, err := s.Requeue(ctx, at(2000), "d01", "d03"); len(again) != 0 || err != nil {
		t.Errorf("second Requeue() = %v, %v; want none", ids(again), err)
	}
	if none, err := s.Requeue(ctx, at(2000)); len(none) != 0 || err != nil {
		t.Errorf("Requeue() of no IDs = %v, %v", ids(none), err)
	}
}

func testPurge(t *testing.T, s kernel.Store) {
	ctx := context.Background()
	deadLetters(t, s, 4)
	n, err := s.Purge(ctx, "d00", "d02", "live", "done", "ok", "unknown", "d00")
	if n != 2 || err != nil {
		t.Fatalf("Purge() = %d, %v; want 2", n, err)
	}
	wantUnknown(t, s, "d00")
	wantUnknown(t, s, "d02")
	for _, id := range []string{"d01", "d03", "live", "done", "ok"} {
		get(t, s, id)
	}
	if c, err := s.CountDeadLetters(ctx); c != 2 || err != nil {
		t.Errorf("CountDeadLetters() = %d, %v; want 2", c, err)
	}
	if n, err := s.Purge(ctx); n != 0 || err != nil {
		t.Errorf("Purge() of no IDs = %d, %v", n, err)
	}
}

func testPurgeCompleted(t *testing.T, s kernel.Store) {
	ctx := context.Background()
	var ch []kernel.Change
	for i := range 10 {
		id := fmt.Sprintf("s%d", i)
		ch = append(ch, ins(task(id)), start(id, 1, 2, 1), withTime(succeed(id, 2), at(i*1000)))
		id = fmt.Sprintf("c%d", i)
		ch = append(ch, ins(task(id)), withTime(cancel(id, 1), at(i*1000)))
		id = fmt.Sprintf("f%d", i) // dead letters are kept however old
		ch = append(ch, ins(task(id)), withTime(fail(id, 1, kernel.Abandoned, ""), at(i*1000-1_000_000)))
		id = fmt.Sprintf("q%d", i) // live tasks too
		tk := task(id)
		tk.UpdatedAt = at(-1_000_000)
		ch = append(ch, ins(tk))
	}
	mustCommit(t, s, ch...)
	n, err := s.PurgeCompleted(ctx, at(5000)) // deletes those updated before 5 s: 0…4
	if n != 10 || err != nil {
		t.Fatalf("PurgeCompleted(5s) = %d, %v; want 10", n, err)
	}
	for i := range 10 {
		for _, p := range []string{"s", "c"} {
			id := fmt.Sprintf("%s%d", p, i)
			if i < 5 {
				wantUnknown(t, s, id)
			} else {
				get(t, s, id)
			}
		}
		get(t, s, fmt.Sprintf("f%d", i))
		get(t, s, fmt.Sprintf("q%d", i))
	}
	if n, err := s.PurgeCompleted(ctx, at(5000)); n != 0 || err != nil {
		t.Errorf("second PurgeCompleted(5s) = %d, %v; want 0", n, err)
	}
	if n, err := s.PurgeCompleted(ctx, at(1_000_000)); n != 10 || err != nil {
		t.Errorf("PurgeCompleted(1000s) = %d, %v; want 10", n, err)
	}
}

// outcome names the sentinel an error wraps, to compare results across commits.
func outcome(err error) string {
	for _, s := range []error{kernel.ErrDuplicateKey, kernel.ErrStaleFence, kernel.ErrUnknownTask, kernel.ErrInvalidChange, kernel.ErrPayloadTooLarge} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "nil"
}

// history makes a random but plausible sequence of batches over a few tasks: chains of
// inserts, starts, retries and ends, some duplicated or stale, some unique keys shared.
func history(seed uint64, batches, tasks int) [][]kernel.Change {
	rng := rand.New(rand.NewPCG(seed, 7))
	type model struct {
		inserted bool
		fence    uint64
		attempt  int
		state    kernel.State
	}
	m := make([]model, tasks)
	var out [][]kernel.Change
	tm := 0
	for range batches {
		var b []kernel.Change
		for range 1 + rng.IntN(12) {
			i := rng.IntN(tasks)
			id := fmt.Sprintf("h%02d", i)
			t := &m[i]
			tm++
			fence := t.fence
			if rng.IntN(8) == 0 { // a stale writer now and then
				fence = uint64(rng.IntN(int(t.fence) + 2))
			}
			var c kernel.Change
			switch {
			case !t.inserted || rng.IntN(15) == 0:
				tk := task(id)
				tk.UniqueKey = fmt.Sprintf("k%d", i%4)
				if rng.IntN(3) == 0 {
					tk.UniqueKey = ""
				}
				tk.State = []kernel.State{kernel.Queued, kernel.Delayed, kernel.Running}[rng.IntN(3)]
				c = ins(tk)
				if !t.inserted {
					*t = model{inserted: true, fence: 1, state: tk.State}
				}
			case t.state == kernel.Queued || t.state == kernel.Delayed || t.state == kernel.Retrying || rng.IntN(6) == 0:
				t.attempt++
				c = start(id, fence, t.fence+1+uint64(rng.IntN(3)), t.attempt)
				t.fence, t.state = c.Task.Fence, kernel.Running
			default:
				switch rng.IntN(5) {
				case 0:
					c = retry(id, fence, at(rng.IntN(1000)), fmt.Sprintf("err %d", tm))
					t.state = kernel.Retrying
				case 1:
					c = succeed(id, fence)
					t.state = kernel.Succeeded
				case 2:
					c = fail(id, fence, []kernel.State{0, kernel.TimedOut, kernel.Evicted}[rng.IntN(3)], fmt.Sprintf("fail %d", tm))
					t.state = kernel.Failed
				case 3:
					c = cancel(id, fence)
					t.state = kernel.Canceled
				default:
					c = retry(id, fence, at(rng.IntN(1000)), "")
					t.state = kernel.Retrying
				}
			}
			c.Task.UpdatedAt = at(tm)
			b = append(b, c)
		}
		out = append(out, b)
	}
	return out
}

func snapshot(t *testing.T, s kernel.Store, tasks int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range tasks {
		id := fmt.Sprintf("h%02d", i)
		tk, err := s.Get(context.Background(), id)
		if errors.Is(err, kernel.ErrUnknownTask) {
			out[id] = "unknown"
			continue
		}
		if err != nil {
			t.Fatalf("Get(%q) error = %v", id, err)
		}
		out[id] = fmt.Sprintf("%v fence=%d attempt=%d runAt=%d err=%q updated=%d key=%q",
			tk.State, tk.Fence, tk.Attempt, tk.RunAt.UnixMilli(), tk.LastError, tk.UpdatedAt.UnixMilli(), tk.UniqueKey)
	}
	return out
}

func testReplayBatches(t *testing.T, s kernel.Store) {
	// Every batch is committed twice, as a caller does after an error: the second commit
	// must report what the first did and change nothing.
	const tasks = 12
	for bi, b := range history(1, 150, tasks) {
		first := commit(t, s, b...)
		snap := snapshot(t, s, tasks)
		second := commit(t, s, b...)
		for i := range b {
			if outcome(first[i]) != outcome(second[i]) {
				t.Fatalf("batch %d replayed: results[%d] (%s %q fence %d) = %v, first commit said %v\nbatch: %s",
					bi, i, b[i].Op, b[i].Task.ID, b[i].Fence, second[i], first[i], describe(b))
			}
		}
		if again := snapshot(t, s, tasks); !mapsEqual(snap, again) {
			t.Fatalf("batch %d replayed changed the store:\nbefore %v\nafter  %v", bi, snap, again)
		}
	}
}

func testRetryAsPrefix(t *testing.T, s kernel.Store) {
	// A caller may retry a failed batch as the start of its next one, with new changes
	// after it. Whether the failed batch had landed or not, its changes report nil and the
	// new ones apply as if the two had been committed one after the other.
	mustCommit(t, s, ins(task("a")), ins(keyed("b", "kb")))
	failed := []kernel.Change{ins(keyed("c", "kc")), start("a", 1, 2, 1), start("b", 1, 2, 1)}
	next := []kernel.Change{succeed("a", 2), retry("b", 2, at(900), "e"), start("c", 1, 2, 1), ins(keyed("d", "kc"))}
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			prefix := make([]kernel.Change, len(failed))
			copy(prefix, failed)
			for i := range prefix { // other IDs per run
				prefix[i].Task.ID += fmt.Sprint(landed)
				if prefix[i].Op == kernel.OpInsert {
					prefix[i].Task.UniqueKey += fmt.Sprint(landed)
				}
			}
			rest := make([]kernel.Change, len(next))
			copy(rest, next)
			for i := range rest {
				rest[i].Task.ID += fmt.Sprint(landed)
				if rest[i].Op == kernel.OpInsert {
					rest[i].Task.UniqueKey += fmt.Sprint(landed)
				}
			}
			setup := []kernel.Change{ins(task("a" + fmt.Sprint(landed))), ins(keyed("b"+fmt.Sprint(landed), "kb"+fmt.Sprint(landed)))}
			mustCommit(t, s, setup...)
			if landed {
				mustCommit(t, s, prefix...) // its answer was lost
			}
			all := append(append([]kernel.Change(nil), prefix...), rest...)
			wantResults(t, all, commit(t, s, all...), nil, nil, nil, nil, nil, nil, kernel.ErrDuplicateKey)
			for id, st := range map[string]kernel.State{"a": kernel.Succeeded, "b": kernel.Retrying, "c": kernel.Running} {
				if got := get(t, s, id+fmt.Sprint(landed)); got.State != st || got.Fence != 2 || got.Attempt != 1 {
					t.Errorf("%s: %v fence %d attempt %d, want %v fence 2 attempt 1", id, got.State, got.Fence, got.Attempt, st)
				}
			}
		})
	}
}

func testReplayMatchesSingle(t *testing.T, once, twice kernel.Store) {
	// The same history on two stores, one committing each batch once and the other each
	// batch twice, leaves them equal.
	const tasks = 10
	for bi, b := range history(2, 120, tasks) {
		r1 := commit(t, once, b...)
		commit(t, twice, b...)
		r2 := commit(t, twice, b...)
		for i := range b {
			if outcome(r1[i]) != outcome(r2[i]) {
				t.Fatalf("batch %d: results[%d] (%s %q) = %v once, %v replayed\nbatch: %s",
					bi, i, b[i].Op, b[i].Task.ID, r1[i], r2[i], describe(b))
			}
		}
	}
	if a, b := snapshot(t, once, tasks), snapshot(t, twice, tasks); !mapsEqual(a, b) {
		t.Fatalf("stores differ:\nonce  %v\ntwice %v", a, b)
	}
}

func describe(b []kernel.Change) string {
	var sb strings.Builder
	for _, c := range b {
		fmt.Fprintf(&sb, "[%s %s fence %d→%d %v] ", c.Op, c.Task.ID, c.Fence, c.Task.Fence, c.Task.State)
	}
	return sb.String()
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func testBigBatch(t *testing.T, s kernel.Store) {
	const n = 5000
	ch := make([]kernel.Change, 0, n)
	for i := range n {
		tk := task(fmt.Sprintf("big-%05d", i))
		if i%2 == 0 {
			tk.UniqueKey = fmt.Sprintf("big-key-%05d", i)
		}
		tk.Priority = []kernel.Priority{kernel.High, kernel.Normal, kernel.Low}[i%3]
		tk.RunAt = at(i)
		ch = append(ch, ins(tk))
	}
	t0 := time.Now()
	mustCommit(t, s, ch...)
	t.Logf("%d inserts in one commit: %v", n, time.Since(t0))

	// One commit of 5,000 state changes: half end, half wait for a retry.
	ch = ch[:0]
	for i := range n {
		id := fmt.Sprintf("big-%05d", i)
		if i%2 == 0 {
			ch = append(ch, start(id, 1, 2, 1))
			if i%4 == 0 {
				ch[len(ch)-1] = succeed(id, 1)
			}
		} else {
			ch = append(ch, retry(id, 1, at(10_000+i), "later"))
		}
	}
	t0 = time.Now()
	mustCommit(t, s, ch...)
	t.Logf("%d updates in one commit: %v", n, time.Since(t0))
	live := recoverAll(t, s)
	if len(live) != n*3/4 {
		t.Fatalf("len(Recover()) = %d, want %d", len(live), n*3/4)
	}
	counts := map[kernel.State]int{}
	for _, tk := range live {
		counts[tk.State]++
	}
	if counts[kernel.Running] != n/4 || counts[kernel.Retrying] != n/2 {
		t.Errorf("Recover() states = %v, want %d running and %d retrying", counts, n/4, n/2)
	}
	wantKeyFree := []kernel.Change{ins(keyed("new-0", "big-key-00000")), ins(keyed("new-2", "big-key-00002"))}
	wantResults(t, wantKeyFree, commit(t, s, wantKeyFree...), nil, kernel.ErrDuplicateKey)
}

func testConcurrentCommits(t *testing.T, s kernel.Store) {
	const workers, batches, per = 6, 15, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for b := range batches {
				var ch []kernel.Change
				for i := range per {
					id := fmt.Sprintf("w%d-b%02d-%02d", w, b, i)
					ch = append(ch, ins(keyed(id, id)))
					if b > 0 { // finish the tasks of the previous batch
						prev := fmt.Sprintf("w%d-b%02d-%02d", w, b-1, i)
						ch = append(ch, start(prev, 1, 2, 1), succeed(prev, 2))
					}
				}
				res, err := s.Commit(ctx, ch)
				if err == nil {
					err = errors.Join(res...)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d batch %d: %w", w, b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if live := recoverAll(t, s); len(live) != workers*per {
		t.Errorf("len(Recover()) = %d, want %d", len(live), workers*per)
	}
	if n, err := s.PurgeCompleted(context.Background(), at(1_000_000)); n != workers*(batches-1)*per || err != nil {
		t.Errorf("PurgeCompleted() = %d, %v; want %d", n, err, workers*(batches-1)*per)
	}
}

func testConcurrentUniqueKeys(t *testing.T, s kernel.Store) {
	// Workers race to insert tasks with the same keys: exactly one live task per key.
	const workers, keys = 6, 30
	var wg sync.WaitGroup
	won := make([][]bool, workers)
	errs := make(chan error, workers)
	for w := range workers {
		won[w] = make([]bool, keys)
		wg.Go(func() {
			var ch []kernel.Change
			for k := range keys {
				ch = append(ch, ins(keyed(fmt.Sprintf("w%d-k%02d", w, k), fmt.Sprintf("race-%02d", k))))
			}
			res, err := s.Commit(context.Background(), ch)
			if err != nil {
				errs <- err
				return
			}
			for k, r := range res {
				switch {
				case r == nil:
					won[w][k] = true
				case !errors.Is(r, kernel.ErrDuplicateKey):
					errs <- r
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		n := 0
		for w := range workers {
			if won[w][k] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("key race-%02d: %d inserts won, want exactly 1", k, n)
		}
	}
	if live := recoverAll(t, s); len(live) != keys {
		t.Errorf("len(Recover()) = %d, want %d", len(live), keys)
	}
}

func testContextDone(t *testing.T, s kernel.Store) {
	ctx, cancelCtx := context.WithCancel(context.Background())
	cancelCtx()
	if _, err := s.Commit(ctx, []kernel.Change{ins(task("a"))}); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit(canceled ctx) error = %v, want context.Canceled", err)
	}
	wantUnknown(t, s, "a")
	if _, err := s.Recover(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Recover(canceled ctx) error = %v, want context.Canceled", err)
	}
}

func testClose(t *testing.T, s kernel.Store) {
	mustCommit(t, s, ins(task("a")))
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	ctx := context.Background()
	if _, err := s.Commit(ctx, []kernel.Change{ins(task("b"))}); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("Commit() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("Get() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Recover(ctx); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("Recover() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.DeadLetters(ctx, 1, ""); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("DeadLetters() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.CountDeadLetters(ctx); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("CountDeadLetters() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Requeue(ctx, t0, "a"); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("Requeue() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.Purge(ctx, "a"); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("Purge() after Close = %v, want ErrStoreClosed", err)
	}
	if _, err := s.PurgeCompleted(ctx, t0); !errors.Is(err, kernel.ErrStoreClosed) {
		t.Errorf("PurgeCompleted() after Close = %v, want ErrStoreClosed", err)
	}
}
