// Package storetest is the conformance suite of [store.Store]: every implementation
// runs [Exercise] in its tests, as storekit.MemoryStore and mysqlstore do. It also holds
// [FaultStore], which makes any store's commits fail on demand in tests.
//
//	func TestConformance(t *testing.T) {
//		storetest.Exercise(t, func(t *testing.T) store.Store {
//			s := newEmptyStore(t) // a store of its own; closed in t.Cleanup
//			return s
//		})
//	}
//
// Each subtest gets a new, empty store from newStore, which also arranges its cleanup.
// The suite checks the contract documented on [store.Store]: idempotent inserts and
// retried batches, unique keys, groups and keys, fences, recovery, dead letters, retention, large batches,
// results and attempt history,
// payload and time round trips, concurrent commits and closing; and, for a
// [store.SharedStore], [store.ScheduleStore], [store.ReplicaStore], [store.Clock], [store.TaskLister] or [store.KeyReader], their
// contracts too.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// Exercise runs the conformance suite against the stores newStore makes. newStore is
// called once per subtest and must return an empty store of its own, and register its
// cleanup (closing it, dropping its table) with t.Cleanup. A store may be closed by the
// suite before its cleanup runs: Close must be idempotent.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
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
		{"UniqueWindow", testUniqueWindow},
		{"UniqueWindowRequeuePurge", testUniqueWindowRequeuePurge},
		{"UniqueWindowValidation", testUniqueWindowValidation},
		{"GroupKey", testGroupKey},
		{"Headers", testHeaders},
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
		{"Results", testResults},
		{"History", testHistory},
		{"HistoryBatches", testHistoryBatches},
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
	probe := newStore(t)
	if _, ok := probe.(store.SharedStore); ok {
		exerciseShared(t, newStore)
	}
	if _, ok := probe.(store.ScheduleStore); ok {
		exerciseSchedules(t, newStore)
	}
	if _, ok := probe.(store.ReplicaStore); ok {
		exerciseReplicas(t, newStore)
	}
	if _, ok := probe.(store.Clock); ok {
		exerciseClock(t, newStore)
	}
	if _, ok := probe.(store.TaskLister); ok {
		exerciseLister(t, newStore)
	}
	if _, ok := probe.(store.KeyReader); ok {
		exerciseKeys(t, newStore)
	}
}

// t0 is the suite's base time, a whole millisecond.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// task returns a valid queued task with fence 1.
func task(id string) store.StoredTask {
	return store.StoredTask{
		ID:          id,
		Kind:        "storetest.kind",
		Payload:     []byte("payload of " + id),
		Priority:    store.Normal,
		RunAt:       t0,
		Timeout:     time.Second,
		MaxAttempts: 3,
		Fence:       1,
		State:       store.Queued,
		CreatedAt:   t0,
		UpdatedAt:   t0,
	}
}

func keyed(id, key string) store.StoredTask {
	tk := task(id)
	tk.UniqueKey = key
	return tk
}

func ins(tk store.StoredTask) store.Change { return store.Change{Op: store.OpInsert, Task: tk} }

func start(id string, from, to uint64, attempt int) store.Change {
	return store.Change{Op: store.OpStart, Fence: from, Task: store.StoredTask{
		ID: id, Fence: to, Attempt: attempt, UpdatedAt: at(1),
	}}
}

func retry(id string, fence uint64, runAt time.Time, msg string) store.Change {
	return store.Change{Op: store.OpRetry, Fence: fence, Task: store.StoredTask{
		ID: id, RunAt: runAt, LastError: msg, UpdatedAt: at(2),
	}}
}

func succeed(id string, fence uint64) store.Change {
	return store.Change{Op: store.OpSucceed, Fence: fence, Task: store.StoredTask{ID: id, UpdatedAt: at(3)}}
}

func fail(id string, fence uint64, st store.State, msg string) store.Change {
	return store.Change{Op: store.OpFail, Fence: fence, Task: store.StoredTask{
		ID: id, State: st, LastError: msg, UpdatedAt: at(4),
	}}
}

func cancel(id string, fence uint64) store.Change {
	return store.Change{Op: store.OpCancel, Fence: fence, Task: store.StoredTask{ID: id, UpdatedAt: at(5)}}
}

// withTime returns c recorded at tm.
func withTime(c store.Change, tm time.Time) store.Change {
	c.Task.UpdatedAt = tm
	return c
}

// commit commits changes and fails the test when the call itself fails.
func commit(t *testing.T, s store.Store, changes ...store.Change) []error {
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
func mustCommit(t *testing.T, s store.Store, changes ...store.Change) {
	t.Helper()
	for i, err := range commit(t, s, changes...) {
		if err != nil {
			t.Fatalf("Commit: results[%d] (%s %q) = %v, want nil", i, changes[i].Op, changes[i].Task.ID, err)
		}
	}
}

// wantResults checks each result against want: nil, or a sentinel it must wrap.
func wantResults(t *testing.T, changes []store.Change, got []error, want ...error) {
	t.Helper()
	for i := range want {
		ok := got[i] == nil && want[i] == nil || want[i] != nil && errors.Is(got[i], want[i])
		if !ok {
			t.Errorf("results[%d] (%s %q) = %v, want %v", i, changes[i].Op, changes[i].Task.ID, got[i], want[i])
		}
	}
}

func get(t *testing.T, s store.Store, id string) store.StoredTask {
	t.Helper()
	tk, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q) error = %v", id, err)
	}
	return tk
}

func wantUnknown(t *testing.T, s store.Store, id string) {
	t.Helper()
	if tk, err := s.Get(context.Background(), id); !errors.Is(err, store.ErrUnknownTask) {
		t.Fatalf("Get(%q) = %+v, %v; want ErrUnknownTask", id, tk, err)
	}
}

func recoverAll(t *testing.T, s store.Store) []store.StoredTask {
	t.Helper()
	live, err := s.Recover(context.Background())
	if err != nil {
		t.Fatalf("Recover() error = %v", err)
	}
	return live
}

func ids(ts []store.StoredTask) []string {
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
func diffTask(got, want store.StoredTask) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if want.Priority == store.PriorityDefault {
		want.Priority = store.Normal
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
	if got.Group != want.Group {
		add("Group", got.Group, want.Group)
	}
	if got.Key != want.Key {
		add("Key", got.Key, want.Key)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.LastError != want.LastError {
		add("LastError", got.LastError, want.LastError)
	}
	return strings.Join(d, "; ")
}

func wantTask(t *testing.T, s store.Store, want store.StoredTask) {
	t.Helper()
	if d := diffTask(get(t, s, want.ID), want); d != "" {
		t.Errorf("Get(%q): %s", want.ID, d)
	}
}
