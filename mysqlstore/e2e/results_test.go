package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

const (
	envResultsChild = "AX_E2E_RESULTS_CHILD" // "1": TestResultsChild runs
	envResultsTable = "AX_E2E_RESULTS_TABLE"

	resultsKind  = "e2e.results"
	resultsDone  = 12 // tasks that fail twice, then succeed with a result, before the kill
	resultsHang  = 4  // tasks that fail once, then hang in attempt 2 until the kill
	resultsOwner = "e2e-results-child"
)

// resultsRetry retries at once, up to 5 attempts.
var resultsRetry = kernel.ByPriority[kernel.RetryPolicy]{Normal: kernel.RetryPolicy{MaxAttempts: 5, Base: time.Millisecond, Max: time.Millisecond}}

// TestCrashKeepsResultsAndHistory kills, with SIGKILL, a child process whose
// durable tasks left results and attempt records: the done tasks failed twice and
// succeeded with a result; the hanging ones failed once and were in their second
// attempt at the kill. A kernel of this process then takes over (the child's lease
// ends): the stored results and records of the done tasks are there, in order, and
// each hanging task ends after a third attempt with the interrupted second one
// recorded as Abandoned.
func TestCrashKeepsResultsAndHistory(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := ownTable(t, db, "results")
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c := spawnChild(t, "TestResultsChild", 0, envResultsChild+"=1", envResultsTable+"="+table)
	c.waitSignal(t)
	c.kill(t, 0)

	byPayload := func() map[string]store.StoredTask {
		m := map[string]store.StoredTask{}
		rows, err := db.QueryContext(ctx, "SELECT id FROM `"+table+"`")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close() //nolint:errcheck // test
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			st, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			m[string(st.Payload)] = st
		}
		return m
	}
	checkDone := func(st store.StoredTask) {
		t.Helper()
		p := string(st.Payload)
		if st.State != store.Succeeded || string(st.Result) != "result of "+p {
			t.Errorf("%s: state %s, result %q; want succeeded, %q", p, st.State, st.Result, "result of "+p)
		}
		h := st.History
		if len(h) != 3 {
			t.Fatalf("%s: history %+v, want 3 attempts", p, h)
		}
		for i, want := range []store.State{store.Failed, store.Failed, store.Succeeded} {
			a := h[i]
			if a.Number != i+1 || a.Outcome != want || a.Owner != resultsOwner || a.Start.IsZero() || a.End.Before(a.Start) ||
				i > 0 && a.Start.Before(h[i-1].End) || want == store.Failed && a.Error != fmt.Sprintf("fail %d of %s", i+1, p) {
				t.Errorf("%s: history[%d] = %+v, want attempt %d %s by %s, in order", p, i, a, i+1, want, resultsOwner)
			}
		}
	}
	tasks := byPayload()
	if len(tasks) != resultsDone+resultsHang {
		t.Fatalf("%d tasks stored, want %d", len(tasks), resultsDone+resultsHang)
	}
	for i := range resultsDone {
		checkDone(tasks[fmt.Sprintf("done-%02d", i)])
	}

	// Take over: the hanging tasks run a third attempt here.
	k, err := kernel.New(kernel.Config{Store: s, Owner: "e2e-results-parent", Retry: resultsRetry})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	third := map[string]int{}
	if err := k.Register(resultsKind, func(ctx context.Context, p []byte) error {
		info, _ := kernel.TaskInfo(ctx)
		mu.Lock()
		third[string(p)] = info.Attempt
		mu.Unlock()
		return kernel.SetResult(ctx, []byte("after the kill"))
	}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the taking-over kernel to end every task", 20*time.Millisecond, 60*time.Second, func() (bool, error) {
		live, err := s.Recover(ctx)
		return len(live) == 0, err
	})
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	tasks = byPayload()
	for i := range resultsHang {
		p := fmt.Sprintf("hang-%02d", i)
		st := tasks[p]
		if st.State != store.Succeeded || string(st.Result) != "after the kill" || third[p] != 3 {
			t.Errorf("%s: state %s, result %q, ran here as attempt %d; want succeeded, after the kill, 3", p, st.State, st.Result, third[p])
		}
		h := st.History
		if len(h) != 3 || h[0].Outcome != store.Failed || h[0].Owner != resultsOwner ||
			h[1].Number != 2 || h[1].Outcome != store.Abandoned || !strings.Contains(h[1].Error, "interrupted") ||
			h[2].Number != 3 || h[2].Outcome != store.Succeeded || h[2].Owner != "e2e-results-parent" || h[2].Start.Before(h[1].Start) {
			t.Errorf("%s: history %+v; want failed (child), abandoned (the kill), succeeded (here)", p, h)
		}
	}
	for i := range resultsDone {
		checkDone(tasks[fmt.Sprintf("done-%02d", i)]) // the take-over changed none of them
	}
}

// TestResultsChild is the child process of TestCrashKeepsResultsAndHistory; without
// AX_E2E_RESULTS_CHILD it returns at once. It signals the parent once every done
// task ended and every hanging task is in its second attempt.
func TestResultsChild(t *testing.T) {
	if os.Getenv(envResultsChild) != "1" {
		return
	}
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: os.Getenv(envResultsTable), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	k, err := kernel.New(kernel.Config{Store: s, Owner: resultsOwner, Lease: time.Second, Retry: resultsRetry})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	hanging := make(chan struct{}, resultsHang)
	err = k.Register(resultsKind, func(ctx context.Context, p []byte) error {
		info, _ := kernel.TaskInfo(ctx)
		switch {
		case strings.HasPrefix(string(p), "done-") && info.Attempt < 3:
			return fmt.Errorf("fail %d of %s", info.Attempt, p)
		case strings.HasPrefix(string(p), "done-"):
			return kernel.SetResult(ctx, []byte("result of "+string(p)))
		case info.Attempt == 1:
			return errors.New("first")
		}
		hanging <- struct{}{}
		<-ctx.Done() // until the kill
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	var ts []kernel.DurableTask
	for i := range resultsDone {
		ts = append(ts, kernel.DurableTask{Kind: resultsKind, Payload: fmt.Appendf(nil, "done-%02d", i)})
	}
	for i := range resultsHang {
		ts = append(ts, kernel.DurableTask{Kind: resultsKind, Payload: fmt.Appendf(nil, "hang-%02d", i)})
	}
	hs, err := k.SubmitDurableMany(context.Background(), ts)
	if err != nil {
		t.Fatalf("SubmitDurableMany() = %v", err)
	}
	for _, h := range hs[:resultsDone] {
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("done task: Wait() = %v", err)
		}
	}
	for range resultsHang {
		<-hanging
	}
	// The journal commits ends and starts after the fact: wait until the store has
	// them all.
	pollUntil(t, "the store to hold every end and second start", 10*time.Millisecond, 30*time.Second, func() (bool, error) {
		for i, h := range hs {
			st, err := s.Get(context.Background(), h.ID())
			if err != nil {
				return false, err
			}
			if i < resultsDone && st.State != store.Succeeded || i >= resultsDone && (st.State != store.Running || st.Attempt != 2) {
				return false, nil
			}
		}
		return true, nil
	})
	_, _ = progress.Write([]byte{'k'})
	_, _ = io.Copy(io.Discard, os.Stdin)
}
