package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// The default-owner restart test's knobs. The parent passes the children theirs in
// the environment.
const (
	envOwnerChild = "AX_E2E_OWNER_CHILD" // "1": TestOwnerRestartChild runs
	envOwnerTable = "AX_E2E_OWNER_TABLE"
	envOwnerDir   = "AX_E2E_OWNER_DIR"
	envOwnerRun   = "AX_E2E_OWNER_RUN" // 0: the process killed; 1: the restarted one

	ownerKind      = "e2e.owner"
	ownerDone      = 100 // tasks the first process runs to their end before its kill
	ownerLeft      = 500 // tasks it holds (running or queued) at its kill
	ownerRunning   = 50  // its MaxConcurrency: ownerRunning run at the kill, the rest wait
	ownerSubmitter = 10
	ownerResumeMax = 2 * time.Second // the restarted process finishes the tasks left within
)

// TestOwnerRestartDefaultConfig: a process whose kernel has the default owner
// (Config.Owner empty) and lease (15 s) is killed with SIGKILL while it holds
// ownerLeft acknowledged durable tasks, ownerRunning of them running. A process
// restarted on the same table with the default Config joins under the same default
// owner name, which ends the dead membership at once: it finishes every task left
// within ownerResumeMax of its start, far less than the dead lease, and every
// acknowledged task has run to its end (at least once) and is stored Succeeded.
func TestOwnerRestartDefaultConfig(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := ownTable(t, db, "owner")
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
	spawn := func(run int) *child {
		return spawnChildFor(t, "TestOwnerRestartChild", run, 2*time.Minute,
			envOwnerChild+"=1", envOwnerTable+"="+table, envOwnerDir+"="+dir, envOwnerRun+"="+strconv.Itoa(run))
	}

	first := spawn(0)
	first.waitSignal(t)
	first.kill(t, 0)
	live, err := s.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, st := range live {
		if st.State == store.Running {
			running++
		}
	}
	owners, err := s.Owners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(owners) != 1 || !owners[0].Live {
		t.Fatalf("owners after the kill: %+v, want the killed one, its lease live", owners)
	}

	second := spawn(1)
	second.waitExit(t)

	// The logs: each child's owner name (O), the second's start (B) and its kernel.New
	// returning (N), acknowledgements (A) and the ends of tasks (E).
	names := map[int]string{}
	acked := map[string]bool{}
	ends := map[string]int{}
	var begin, newDone, lastEnd int64
	for run := range 2 {
		for _, l := range readLog(t, filepath.Join(dir, ownerLog(run))) {
			switch l.kind {
			case 'O':
				names[run] = l.fields[0]
			case 'A':
				acked[l.fields[0]] = true
			case 'B':
				begin = l.micros
			case 'N':
				newDone = l.micros
			case 'E':
				ends[l.fields[0]]++
				if run == 1 {
					lastEnd = max(lastEnd, l.micros)
				}
			}
		}
	}
	if names[0] == "" || names[0] != names[1] {
		t.Errorf("owner names %q (killed) and %q (restarted), want one default name", names[0], names[1])
	}
	if len(acked) != ownerDone+ownerLeft {
		t.Fatalf("%d tasks acknowledged, want %d", len(acked), ownerDone+ownerLeft)
	}
	resume := time.Duration(lastEnd-begin) * time.Microsecond
	afterNew := time.Duration(lastEnd-newDone) * time.Microsecond
	t.Logf("owner %q: %d tasks left at the kill (%d running); the restarted process finished them %v after its start (%v after kernel.New returned); its lease was %v",
		names[1], len(live), running, resume.Round(time.Millisecond), afterNew.Round(time.Millisecond), owners[0].Lease)
	if len(live) != ownerLeft || running != ownerRunning {
		t.Errorf("%d tasks live at the kill, %d running; want %d, %d", len(live), running, ownerLeft, ownerRunning)
	}
	if begin == 0 || lastEnd < begin || resume > ownerResumeMax {
		t.Errorf("the restarted process finished the tasks left %v after its start, want within %v (the dead lease: %v)",
			resume, ownerResumeMax, owners[0].Lease)
	}

	var lost []string
	for p := range acked {
		if ends[p] == 0 {
			lost = append(lost, p)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged tasks never ran to their end, e.g. %v", len(lost), lost[:min(len(lost), 10)])
	}
	var rows, succeeded int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(state = ?), 0) FROM `"+table+"`", codeSucceeded).Scan(&rows, &succeeded)
	if err != nil {
		t.Fatal(err)
	}
	if rows != len(acked) || succeeded != rows {
		t.Errorf("%d rows, %d Succeeded; want %d, all Succeeded", rows, succeeded, len(acked))
	}
}

func ownerLog(run int) string { return fmt.Sprintf("owner-%d.log", run) }

// TestOwnerRestartChild is a child process of TestOwnerRestartDefaultConfig; without
// AX_E2E_OWNER_CHILD it returns at once. Run 0 submits ownerDone tasks and waits for
// their ends, then ownerLeft more, which it holds until it is killed, and signals the
// parent. Run 1 runs what run 0 left, until the table has no live task.
func TestOwnerRestartChild(t *testing.T) {
	if os.Getenv(envOwnerChild) != "1" {
		return
	}
	begin := time.Now()
	table := os.Getenv(envOwnerTable)
	run := envInt(t, envOwnerRun, 0)
	logF := openAppend(t, filepath.Join(os.Getenv(envOwnerDir), ownerLog(run)))
	writeLine(logF, 'B', "begin", begin.UnixMicro())

	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	cfg := kernel.Config{Store: s} // Owner and Lease: the defaults
	if run == 0 {
		cfg.MaxConcurrency = ownerRunning
	}
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	writeLine(logF, 'N', "new", time.Now().UnixMicro())
	writeLine(logF, 'O', k.Stats().Store.Owner, time.Now().UnixMicro())

	if run == 1 {
		err := k.Register(ownerKind, func(_ context.Context, p []byte) error {
			writeLine(logF, 'E', string(p), time.Now().UnixMicro())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			live, err := s.Recover(context.Background())
			if err != nil {
				t.Fatalf("Recover() = %v", err)
			}
			if len(live) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d tasks still live after a minute", len(live))
			}
			<-tick.C
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := k.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown() = %v", err)
		}
		return
	}

	err = k.Register(ownerKind, func(ctx context.Context, p []byte) error {
		if n, _ := strconv.Atoi(string(p[len("o-"):])); n >= ownerDone {
			<-ctx.Done() // held until the kill
			return ctx.Err()
		}
		writeLine(logF, 'E', string(p), time.Now().UnixMicro())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(from, to int) []*kernel.Handle {
		hs := make([]*kernel.Handle, to-from)
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range ownerSubmitter {
			wg.Go(func() {
				for {
					n := int(next.Add(1) - 1)
					if n >= to {
						return
					}
					p := fmt.Sprintf("o-%04d", n)
					h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: ownerKind, Payload: []byte(p), MaxAttempts: 10})
					if err != nil {
						t.Errorf("SubmitDurable(%s) = %v", p, err)
						return
					}
					writeLine(logF, 'A', p, time.Now().UnixMicro())
					hs[n-from] = h
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		return hs
	}
	for _, h := range submit(0, ownerDone) {
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("task %s: %v", h.ID(), err)
		}
	}
	submit(ownerDone, ownerDone+ownerLeft)
	// Signal once ownerRunning run (their starts stored) and the journal is idle.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(time.Minute)
	for st := k.Stats(); st.Running < ownerRunning || st.Store.Pending > 0; st = k.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("Stats() = %d running, %d changes pending; want %d running, none pending", st.Running, st.Store.Pending, ownerRunning)
		}
		<-tick.C
	}
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()
	_, _ = progress.Write([]byte{'k'})
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed, or the parent goes away
}
