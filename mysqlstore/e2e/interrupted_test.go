package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
)

// The interrupted test's shape: a backlog of tasks with one attempt each on a few
// slots, killed once some of them ran.
const (
	envInterruptedChild = "AX_E2E_INTERRUPTED_CHILD" // "1": TestInterruptedChild runs
	envInterruptedTable = "AX_E2E_INTERRUPTED_TABLE"
	envInterruptedDir   = "AX_E2E_INTERRUPTED_DIR"

	interruptedTasks = 2_100
	interruptedSlots = 8
	interruptedKill  = 150 // begun tasks before the kill
	interruptedWork  = 2 * time.Millisecond
	interruptedKind  = "e2e.interrupted"
	interruptedMsg   = "was interrupted"
)

// TestCrashDeadLettersOnlyBegunTasks kills, with SIGKILL, a child process that runs a
// backlog of durable tasks with MaxAttempts 1 on MaxConcurrency slots, once
// interruptedKill of them have begun (each logs its begin, one write(2), before it
// works). A kernel of this process then recovers the table. A task the store held
// Running at the kill is dead-lettered as interrupted, since its only attempt was
// used: those must be at most the tasks that had begun, and at most the slots. No
// acknowledged task is lost: each one ran to its end or is such a dead letter.
func TestCrashDeadLettersOnlyBegunTasks(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := ownTable(t, db, "interrupted")
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := spawnChild(t, "TestInterruptedChild", 0,
		envInterruptedChild+"=1", envInterruptedTable+"="+table, envInterruptedDir+"="+dir)
	c.waitSignal(t)
	c.kill(t, 0)

	acked := map[string]bool{}
	for _, l := range readLog(t, filepath.Join(dir, ackLog(0))) {
		acked[l.fields[0]] = true
	}
	began, ended := map[string]bool{}, map[string]bool{}
	for _, l := range readLog(t, filepath.Join(dir, runLog(0))) {
		switch l.kind {
		case 'S':
			began[l.fields[0]] = true
		case 'E':
			ended[l.fields[0]] = true
		}
	}
	if len(acked) != interruptedTasks {
		t.Fatalf("%d tasks acknowledged before the kill, want %d", len(acked), interruptedTasks)
	}

	// Recover: the kernel dead-letters the tasks stored Running and runs the others.
	k, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: interruptedSlots, Owner: "e2e-interrupted"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ranAfter := map[string]bool{}
	if err := k.Register(interruptedKind, func(_ context.Context, p []byte) error {
		mu.Lock()
		ranAfter[string(p)] = true
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the recovering kernel to end every task", 20*time.Millisecond, 60*time.Second, func() (bool, error) {
		live, err := s.Recover(ctx)
		return len(live) == 0, err
	})
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}

	dead, err := s.DeadLetters(ctx, 10*interruptedTasks, "")
	if err != nil {
		t.Fatal(err)
	}
	interrupted := map[string]bool{}
	var neverBegun, other []string
	for _, d := range dead {
		token := string(d.Payload)
		if !strings.Contains(d.LastError, interruptedMsg) {
			other = append(other, fmt.Sprintf("%s: %v %q", token, d.State, d.LastError))
			continue
		}
		interrupted[token] = true
		if !began[token] {
			neverBegun = append(neverBegun, token)
		}
	}
	var lost []string
	for token := range acked {
		if !ended[token] && !ranAfter[token] && !interrupted[token] {
			lost = append(lost, token)
		}
	}
	t.Logf("%d tasks acknowledged, %d begun and %d ended before the kill; %d dead-lettered as interrupted, %d of them never begun; %d ran after",
		len(acked), len(began), len(ended), len(interrupted), len(neverBegun), len(ranAfter))
	if len(interrupted) > len(began) || len(interrupted) > interruptedSlots {
		t.Errorf("%d tasks dead-lettered as interrupted, more than the %d that had begun or the %d slots; %d never began (e.g. %v)",
			len(interrupted), len(began), interruptedSlots, len(neverBegun), neverBegun[:min(len(neverBegun), 5)])
	}
	if len(other) > 0 {
		t.Errorf("%d dead letters not interrupted by the kill, e.g. %v", len(other), other[:min(len(other), 5)])
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged tasks lost: no end, no run after the kill, no dead letter; e.g. %v", len(lost), lost[:min(len(lost), 5)])
	}
}

// TestInterruptedChild is the child process of TestCrashDeadLettersOnlyBegunTasks;
// without AX_E2E_INTERRUPTED_CHILD it returns at once. It submits the backlog in one
// SubmitDurableMany, logs the acknowledgements in one write(2), and signals the
// parent once they are logged and interruptedKill tasks have begun.
func TestInterruptedChild(t *testing.T) {
	if os.Getenv(envInterruptedChild) != "1" {
		return
	}
	dir := os.Getenv(envInterruptedDir)
	ackF := openAppend(t, filepath.Join(dir, ackLog(0)))
	runF := openAppend(t, filepath.Join(dir, runLog(0)))
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()

	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: os.Getenv(envInterruptedTable), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	k, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: interruptedSlots, Owner: "e2e-interrupted"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	var begun atomic.Int64
	enough := make(chan struct{})
	err = k.Register(interruptedKind, func(ctx context.Context, p []byte) error {
		writeLine(runF, 'S', string(p), time.Now().UnixMicro())
		if begun.Add(1) == interruptedKill {
			close(enough)
		}
		work := time.NewTimer(interruptedWork)
		defer work.Stop()
		select {
		case <-work.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		writeLine(runF, 'E', string(p), time.Now().UnixMicro())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]kernel.DurableTask, interruptedTasks)
	for i := range ts {
		ts[i] = kernel.DurableTask{Kind: interruptedKind, Payload: fmt.Appendf(nil, "i-%06d", i), MaxAttempts: 1}
	}
	hs, err := k.SubmitDurableMany(context.Background(), ts)
	if err != nil {
		t.Fatalf("SubmitDurableMany() = %v", err)
	}
	var acks []byte
	for i, h := range hs {
		acks = fmt.Appendf(acks, "A %s %s %d\n", ts[i].Payload, h.ID(), time.Now().UnixMicro())
	}
	_, _ = ackF.Write(acks)
	<-enough
	_, _ = progress.Write([]byte{'k'})
	// Wait to be killed; the parent's end of stdin closes if it goes away.
	_, _ = io.Copy(io.Discard, os.Stdin)
}
