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

// The grouped crash test's shape: keysN keys of one group, perKeyN tasks each, at
// most groupLimit of a key at once.
const (
	envGroupChild = "AX_E2E_GROUP_CHILD" // "1": TestGroupCrashChild runs
	envGroupTable = "AX_E2E_GROUP_TABLE"
	envGroupDir   = "AX_E2E_GROUP_DIR"

	groupKind  = "e2e.group"
	groupName  = "hosts"
	groupLimit = 2
	keysN      = 3
	perKeyN    = 6
	groupOwner = "e2e-group" // the second kernel takes the same name: the first's tasks at once
)

var groupsConfig = map[string]kernel.GroupConfig{groupName: {PerKey: kernel.Limits{Concurrency: groupLimit}}}

// TestCrashKeepsGroupLimits kills, with SIGKILL, a child process running durable
// tasks of a group (PerKey.Concurrency groupLimit) once groupLimit tasks of each key
// have begun, with the rest waiting for their permits. A kernel of this process with
// the same Config.Groups then takes the table over: the table holds each task's
// group and key, and the recovered tasks — the interrupted ones again, the waiting
// ones for the first time — run at most groupLimit of a key at once, each once.
func TestCrashKeepsGroupLimits(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := ownTable(t, db, "group")
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
	c := spawnChild(t, "TestGroupCrashChild", 0, envGroupChild+"=1", envGroupTable+"="+table, envGroupDir+"="+dir)
	c.waitSignal(t)
	c.kill(t, 0)

	begunBy := map[string]int{}
	for _, l := range readLog(t, filepath.Join(dir, runLog(0))) {
		if l.kind == 'S' {
			key, _, _ := strings.Cut(l.fields[0], "/")
			begunBy[key]++
		}
	}
	for i := range keysN {
		if key := fmt.Sprintf("k%d", i); begunBy[key] != groupLimit {
			t.Fatalf("the child began %d tasks of %s before the kill, want %d (PerKey.Concurrency)", begunBy[key], key, groupLimit)
		}
	}
	live, err := s.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != keysN*perKeyN {
		t.Fatalf("%d live tasks after the kill, want %d", len(live), keysN*perKeyN)
	}
	for _, tk := range live {
		if key, _, _ := strings.Cut(string(tk.Payload), "/"); tk.Group != groupName || tk.Key != key {
			t.Fatalf("stored %s: group %q key %q, want %q %q", tk.Payload, tk.Group, tk.Key, groupName, key)
		}
	}

	// The next kernel: its tasks block until release, so that the limits show.
	k, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: 64, Groups: groupsConfig, Owner: groupOwner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	var (
		mu      sync.Mutex
		running = map[string]int{}
		most    = map[string]int{}
		runs    = map[string]int{}
	)
	release := make(chan struct{})
	if err := k.Register(groupKind, func(ctx context.Context, p []byte) error {
		key, _, _ := strings.Cut(string(p), "/")
		mu.Lock()
		running[key]++
		most[key] = max(most[key], running[key])
		runs[string(p)]++
		mu.Unlock()
		defer func() {
			mu.Lock()
			running[key]--
			mu.Unlock()
		}()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the recovered tasks to fill every key's permits", 10*time.Millisecond, 30*time.Second, func() (bool, error) {
		g := k.Stats().Groups[groupName]
		mu.Lock()
		defer mu.Unlock()
		full := true
		for i := range keysN {
			full = full && running[fmt.Sprintf("k%d", i)] == groupLimit
		}
		return full && g.Running == keysN*groupLimit && g.Waiting == keysN*(perKeyN-groupLimit), nil
	})
	close(release)
	pollUntil(t, "every task to succeed", 10*time.Millisecond, 30*time.Second, func() (bool, error) {
		live, err := s.Recover(ctx)
		return len(live) == 0, err
	})
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range keysN {
		key := fmt.Sprintf("k%d", i)
		if most[key] != groupLimit {
			t.Errorf("most tasks of %s running at once after the crash = %d, want %d (PerKey.Concurrency)", key, most[key], groupLimit)
		}
		for j := range perKeyN {
			if p := fmt.Sprintf("%s/%d", key, j); runs[p] != 1 {
				t.Errorf("%s ran %d times after the crash, want 1", p, runs[p])
			}
		}
	}
	if n, err := s.CountDeadLetters(ctx); n != 0 || err != nil {
		t.Errorf("CountDeadLetters() = %d, %v; want 0 (MaxAttempts 3: an interrupted attempt is retried)", n, err)
	}
}

// TestGroupCrashChild is the child process of TestCrashKeepsGroupLimits; without
// AX_E2E_GROUP_CHILD it returns at once. It submits the tasks, logs each begin in
// one write(2), and signals the parent once groupLimit tasks of every key began; its
// tasks then block until it is killed.
func TestGroupCrashChild(t *testing.T) {
	if os.Getenv(envGroupChild) != "1" {
		return
	}
	runF := openAppend(t, filepath.Join(os.Getenv(envGroupDir), runLog(0)))
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()

	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: os.Getenv(envGroupTable), Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	k, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: 64, Groups: groupsConfig, Owner: groupOwner})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	var begun atomic.Int64
	enough := make(chan struct{})
	err = k.Register(groupKind, func(ctx context.Context, p []byte) error {
		writeLine(runF, 'S', string(p), time.Now().UnixMicro())
		if begun.Add(1) == keysN*groupLimit {
			close(enough)
		}
		<-ctx.Done() // until the kill
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	var ts []kernel.DurableTask
	for i := range keysN {
		key := fmt.Sprintf("k%d", i)
		for j := range perKeyN {
			ts = append(ts, kernel.DurableTask{Kind: groupKind, Group: groupName, Key: key, Payload: fmt.Appendf(nil, "%s/%d", key, j)})
		}
	}
	if _, err := k.SubmitDurableMany(context.Background(), ts); err != nil {
		t.Fatalf("SubmitDurableMany() = %v", err)
	}
	<-enough
	// The rest wait in the gate: the parent kills a child with every key's limit reached.
	pollUntil(t, "the other tasks to wait for their permits", time.Millisecond, 30*time.Second, func() (bool, error) {
		g := k.Stats().Groups[groupName]
		return g.Running == keysN*groupLimit && g.Waiting == keysN*(perKeyN-groupLimit), nil
	})
	_, _ = progress.Write([]byte{'k'})
	// Wait to be killed; the parent's end of stdin closes if it goes away.
	_, _ = io.Copy(io.Discard, os.Stdin)
}
