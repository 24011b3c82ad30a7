package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// TestPauseDurableKind: a paused kind's tasks stay queued, others run, and the
// kind's tasks run in their order once resumed.
func TestPauseDurableKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{MaxConcurrency: 1, Store: storekit.NewMemoryStore()})
		var mu sync.Mutex
		var order []string
		rec := func(_ context.Context, p []byte) error {
			mu.Lock()
			order = append(order, string(p))
			mu.Unlock()
			return nil
		}
		for _, kind := range []string{"mail", "sms"} {
			if err := k.Register(kind, rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := k.Pause(kernel.Selector{Kind: "mail"}); err != nil {
			t.Fatal(err)
		}
		var mail []*kernel.Handle
		for _, p := range []string{"m1", "m2", "m3"} {
			h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "mail", Payload: []byte(p)})
			if err != nil {
				t.Fatal(err)
			}
			mail = append(mail, h)
		}
		sms, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "sms", Payload: []byte("s1")})
		if err != nil {
			t.Fatal(err)
		}
		if err := sms.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-time.After(time.Second)
		synctest.Wait()
		for _, h := range mail {
			if s := h.State(); s != kernel.Queued {
				t.Fatalf("paused kind's task State() = %v, want queued", s)
			}
		}
		mail[1].Cancel()
		if err := k.Resume(kernel.Selector{Kind: "mail"}); err != nil {
			t.Fatal(err)
		}
		for _, h := range mail {
			<-h.Done()
		}
		mu.Lock()
		defer mu.Unlock()
		if got := len(order); got != 3 || order[0] != "s1" || order[1] != "m1" || order[2] != "m3" {
			t.Fatalf("order = %v, want [s1 m1 m3]", order)
		}
		if s := mail[1].State(); s != kernel.Canceled {
			t.Errorf("canceled paused task: State() = %v", s)
		}
	})
}

// keyTracker is a durable kind whose payload is "key/label": it counts the
// attempts running per key, keeps the maxima and the runs per label, and runs
// for d of virtual time.
type keyTracker struct {
	mu      sync.Mutex
	d       time.Duration
	running map[string]int
	maxKey  map[string]int
	runs    map[string]int
}

func newKeyTracker(d time.Duration) *keyTracker {
	return &keyTracker{d: d, running: map[string]int{}, maxKey: map[string]int{}, runs: map[string]int{}}
}

func (tr *keyTracker) run(ctx context.Context, p []byte) error {
	key, _, _ := strings.Cut(string(p), "/")
	tr.mu.Lock()
	tr.running[key]++
	tr.maxKey[key] = max(tr.maxKey[key], tr.running[key])
	tr.runs[string(p)]++
	tr.mu.Unlock()
	defer func() {
		tr.mu.Lock()
		tr.running[key]--
		tr.mu.Unlock()
	}()
	tm := time.NewTimer(tr.d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (tr *keyTracker) snapshot() (running, maxKey, runs map[string]int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.running), maps.Clone(tr.maxKey), maps.Clone(tr.runs)
}

var hostsGroups = map[string]kernel.GroupConfig{"hosts": {PerKey: kernel.Limits{Concurrency: 2}}}

// TestDurableGroupLimitsSurviveRestart: durable tasks of a group run at most
// PerKey.Concurrency at once per key; their rows carry the group and key; after a
// Close with tasks running and waiting, a new kernel on the store runs every one of
// them again under the same limits, each once more at most.
func TestDurableGroupLimitsSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k1, err := kernel.New(kernel.Config{Store: s, MaxConcurrency: 16, Groups: hostsGroups})
		if err != nil {
			t.Fatal(err)
		}
		tr1 := newKeyTracker(time.Hour) // still running at the Close
		if err := k1.Register("call", tr1.run); err != nil {
			t.Fatal(err)
		}
		var ts []kernel.DurableTask
		for _, key := range []string{"a", "b"} {
			for i := range 5 {
				ts = append(ts, kernel.DurableTask{Kind: "call", Group: "hosts", Key: key, Payload: fmt.Appendf(nil, "%s/%d", key, i)})
			}
		}
		ts = append(ts, kernel.DurableTask{Kind: "call", Payload: []byte("free/0")}) // no group
		hs, err := k1.SubmitDurableMany(context.Background(), ts)
		if err != nil {
			t.Fatal(err)
		}
		advance(time.Minute)
		running, _, _ := tr1.snapshot()
		if running["a"] != 2 || running["b"] != 2 || running["free"] != 1 {
			t.Fatalf("running per key = %v, want a:2 b:2 free:1", running)
		}
		if g := k1.Stats().Groups["hosts"]; g.Running != 4 || g.Waiting != 6 {
			t.Fatalf("Stats.Groups[hosts] = %+v, want 4 running, 6 waiting", g)
		}
		for i, h := range hs[:10] {
			st := stored(t, s, h.ID())
			if st.Group != "hosts" || st.Key != ts[i].Key {
				t.Fatalf("stored %s: group %q key %q, want hosts %q", h.ID(), st.Group, st.Key, ts[i].Key)
			}
		}
		if err := k1.Close(); err != nil {
			t.Fatal(err)
		}

		// The next process: same groups; the 4 interrupted and 6 waiting tasks of
		// the group come back in its gate with their keys.
		k2 := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: 16, Groups: hostsGroups})
		tr2 := newKeyTracker(time.Second)
		if err := k2.Register("call", tr2.run); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		running, _, _ = tr2.snapshot()
		if running["a"] != 2 || running["b"] != 2 {
			t.Fatalf("after the restart, running per key = %v, want a:2 b:2", running)
		}
		if g := k2.Stats().Groups["hosts"]; g.Running != 4 || g.Waiting != 6 {
			t.Fatalf("after the restart, Stats.Groups[hosts] = %+v, want 4 running, 6 waiting", g)
		}
		advance(time.Minute)
		_, maxKey, runs := tr2.snapshot()
		if maxKey["a"] != 2 || maxKey["b"] != 2 {
			t.Fatalf("after the restart, most running per key = %v, want 2 each", maxKey)
		}
		for i, tk := range ts {
			if n := runs[string(tk.Payload)]; n != 1 {
				t.Errorf("%s ran %d times after the restart, want 1", tk.Payload, n)
			}
			if st := stored(t, s, hs[i].ID()); st.State != kernel.Succeeded || st.Group != tk.Group || st.Key != tk.Key {
				t.Errorf("stored %s = %v, group %q key %q; want succeeded, %q %q", tk.Payload, st.State, st.Group, st.Key, tk.Group, tk.Key)
			}
		}
	})
}

// TestDurableGroupBadInput: an unknown group, a key without a group and a key too
// long are refused at submit, naming the field, and nothing is stored.
func TestDurableGroupBadInput(t *testing.T) {
	s := storekit.NewMemoryStore()
	k := newTestKernel(t, kernel.Config{Store: s, Groups: hostsGroups})
	if err := k.Register("call", func(context.Context, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		task  kernel.DurableTask
		field string
	}{
		{kernel.DurableTask{Kind: "call", Group: "nope", Key: "a"}, "DurableTask.Group"},
		{kernel.DurableTask{Kind: "call", Key: "a"}, "DurableTask.Key"},
		{kernel.DurableTask{Kind: "call", Group: "hosts", Key: strings.Repeat("k", store.GroupKeyMax+1)}, "DurableTask.Key"},
	}
	for _, c := range cases {
		_, err := k.SubmitDurable(context.Background(), c.task)
		var ce *kernel.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("SubmitDurable(group %q, key of %d bytes) = %v, want a *ConfigError naming %s", c.task.Group, len(c.task.Key), err, c.field)
		}
	}
	hs, err := k.SubmitDurableMany(context.Background(), []kernel.DurableTask{
		{Kind: "call", Group: "hosts", Key: strings.Repeat("k", store.GroupKeyMax)},
		{Kind: "call", Group: "nope"},
	})
	var ce *kernel.ConfigError
	if hs == nil || hs[0] == nil || hs[1] != nil || !errors.As(err, &ce) || ce.Field != "DurableTask[1].Group" {
		t.Fatalf("SubmitDurableMany() = %v, %v; want the first stored and the second refused naming DurableTask[1].Group", hs, err)
	}
	if err := hs[0].Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := k.Shutdown(context.Background()); err != nil { // the journal commits the end
		t.Fatal(err)
	}
	live, err := s.Recover(context.Background())
	if err != nil || len(live) != 0 {
		t.Fatalf("Recover() = %v, %v; want nothing live (refused tasks are not stored)", live, err)
	}
}

// TestDurableGroupHeldUntilConfigured: recovered tasks of a group this kernel does
// not have are held (Stats.Store.Held), not run, until an Update adds the group;
// they then run under its limits. A held task can be cancelled.
func TestDurableGroupHeldUntilConfigured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		var seeded []store.StoredTask
		for i := range 4 {
			seeded = append(seeded, store.StoredTask{
				ID: fmt.Sprintf("g%d", i), Kind: "call", Payload: fmt.Appendf(nil, "a/%d", i),
				State: kernel.Queued, Fence: 1, Group: "hosts", Key: "a",
			})
		}
		seeded = append(seeded, store.StoredTask{ID: "free", Kind: "call", Payload: []byte("free/0"), State: kernel.Queued, Fence: 1})
		seed(t, s, seeded...)
		k := newTestKernel(t, kernel.Config{Store: s, MaxConcurrency: 8})
		tr := newKeyTracker(time.Second)
		if err := k.Register("call", tr.run); err != nil {
			t.Fatal(err)
		}
		advance(time.Minute)
		if _, _, runs := tr.snapshot(); len(runs) != 1 || runs["free/0"] != 1 {
			t.Fatalf("runs before the group is configured = %v, want only free/0", runs)
		}
		if held := k.Stats().Store.Held; held != 4 {
			t.Fatalf("Stats.Store.Held = %d, want the 4 tasks of the unknown group", held)
		}
		if n, err := k.Cancel(context.Background(), "g3"); n != 1 || err != nil {
			t.Fatalf("Cancel(held g3) = %d, %v; want 1", n, err)
		}
		if err := k.Update(func(c *kernel.Config) {
			c.Groups = map[string]kernel.GroupConfig{"hosts": {PerKey: kernel.Limits{Concurrency: 1}}}
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if held := k.Stats().Store.Held; held != 0 {
			t.Fatalf("Stats.Store.Held after the Update = %d, want 0", held)
		}
		if g := k.Stats().Groups["hosts"]; g.Running != 1 || g.Waiting != 2 {
			t.Fatalf("Stats.Groups[hosts] after the Update = %+v, want 1 running, 2 waiting", g)
		}
		advance(time.Minute)
		_, maxKey, runs := tr.snapshot()
		if maxKey["a"] != 1 {
			t.Fatalf("most running of key a = %d, want 1 (PerKey.Concurrency)", maxKey["a"])
		}
		for i := range 3 {
			if runs[fmt.Sprintf("a/%d", i)] != 1 {
				t.Errorf("a/%d ran %d times, want 1", i, runs[fmt.Sprintf("a/%d", i)])
			}
			if st := stored(t, s, fmt.Sprintf("g%d", i)); st.State != kernel.Succeeded {
				t.Errorf("g%d stored %v, want succeeded", i, st.State)
			}
		}
		if st := stored(t, s, "g3"); st.State != kernel.Canceled || runs["a/3"] != 0 {
			t.Errorf("cancelled held g3 stored %v, ran %d times; want canceled, never run", st.State, runs["a/3"])
		}
	})
}

// TestDurableGroupClaimedHoldsPermit: a pool task of a group that this kernel
// claims runs at once and holds its key's permit meanwhile: a task of the same key
// in memory waits for it.
func TestDurableGroupClaimedHoldsPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s, Groups: map[string]kernel.GroupConfig{"hosts": {PerKey: kernel.Limits{Concurrency: 1}}}})
		release := make(gate)
		if err := k.Register("call", func(ctx context.Context, _ []byte) error { return release.run(ctx) }); err != nil {
			t.Fatal(err)
		}
		pool, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "call", Group: "hosts", Key: "a", Pool: true})
		if err != nil {
			t.Fatal(err)
		}
		advance(5 * time.Second) // the claimer's poll
		if s := pool.State(); s != kernel.Running {
			t.Fatalf("pool task State() = %v, want running (claimed)", s)
		}
		if g := k.Stats().Groups["hosts"]; g.Running != 1 {
			t.Fatalf("Stats.Groups[hosts].Running = %d, want 1 (the claimed task's permit)", g.Running)
		}
		mem, err := k.Submit(context.Background(), kernel.Task{Group: "hosts", Key: "a", Run: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := mem.State(); s != kernel.Queued {
			t.Fatalf("same key's task State() = %v while the claimed task runs, want queued", s)
		}
		release.open()
		if err := pool.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := mem.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the journal commits the end
		if st := stored(t, s, pool.ID()); st.State != kernel.Succeeded || st.Group != "hosts" || st.Key != "a" {
			t.Fatalf("pool task stored %+v, want succeeded of hosts/a", st)
		}
	})
}

// TestPauseDurableKindOfGroup: a paused kind's task of a group holds no permit of
// its key: another kind's task of the same key runs meanwhile; once resumed, the
// paused kind's task waits for its permit again and runs.
func TestPauseDurableKindOfGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{Store: storekit.NewMemoryStore(), Groups: map[string]kernel.GroupConfig{
			"hosts": {PerKey: kernel.Limits{Concurrency: 1}},
		}})
		for _, kind := range []string{"mail", "sms"} {
			if err := k.Register(kind, func(context.Context, []byte) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if err := k.Pause(kernel.Selector{Kind: "mail"}); err != nil {
			t.Fatal(err)
		}
		mail, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "mail", Group: "hosts", Key: "a"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		sms, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "sms", Group: "hosts", Key: "a"})
		if err != nil {
			t.Fatal(err)
		}
		advance(time.Second)
		if s := sms.State(); s != kernel.Succeeded {
			t.Fatalf("the other kind's task of the key: State() = %v, want succeeded (the paused task holds no permit)", s)
		}
		if s := mail.State(); s != kernel.Queued {
			t.Fatalf("paused kind's task State() = %v, want queued", s)
		}
		if err := k.Resume(kernel.Selector{Kind: "mail"}); err != nil {
			t.Fatal(err)
		}
		if err := mail.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if g := k.Stats().Groups["hosts"]; g.Running != 0 || g.Waiting != 0 {
			t.Fatalf("Stats.Groups[hosts] = %+v, want nothing running or waiting", g)
		}
	})
}

// refuseFirstStart is a MemoryStore that refuses the first OpStart it is given,
// as a store does when another owner took the task.
type refuseFirstStart struct {
	*storekit.MemoryStore
	done atomic.Bool
}

func (s *refuseFirstStart) CommitAs(ctx context.Context, o store.Owner, cs []store.Change) ([]error, error) {
	idx := slices.IndexFunc(cs, func(c store.Change) bool { return c.Op == store.OpStart })
	if idx < 0 || !s.done.CompareAndSwap(false, true) {
		return s.MemoryStore.CommitAs(ctx, o, cs)
	}
	res, err := s.MemoryStore.CommitAs(ctx, o, slices.Delete(slices.Clone(cs), idx, idx+1))
	if err != nil {
		return nil, err
	}
	return slices.Insert(res, idx, error(fmt.Errorf("refused: %w", store.ErrStaleFence))), nil
}

// TestDurableGroupRefusedStartReturnsPermit: an attempt of a group whose start the
// store refused (another owner holds the task) never runs and gives its key's
// permit back: the key's next task runs.
func TestDurableGroupRefusedStartReturnsPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &refuseFirstStart{MemoryStore: storekit.NewMemoryStore()}
		k := newTestKernel(t, kernel.Config{Store: s, Groups: map[string]kernel.GroupConfig{
			"hosts": {PerKey: kernel.Limits{Concurrency: 1}},
		}})
		var ran atomic.Int32
		if err := k.Register("call", func(context.Context, []byte) error { ran.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		first, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "call", Group: "hosts", Key: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Wait(context.Background()); !errors.Is(err, kernel.ErrTaskTaken) || first.State() != kernel.Abandoned {
			t.Fatalf("refused start: Wait() = %v, State() = %v; want ErrTaskTaken, abandoned", err, first.State())
		}
		next, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "call", Group: "hosts", Key: "a"})
		if err != nil {
			t.Fatal(err)
		}
		advance(time.Second)
		if s := next.State(); s != kernel.Succeeded || ran.Load() != 1 {
			t.Fatalf("the key's next task: State() = %v, ran %d; want succeeded once (the refused attempt's permit returned)", s, ran.Load())
		}
	})
}

// plainStore hides the SharedStore methods of the store it wraps: the kernel
// then reads its tasks back with Recover.
type plainStore struct{ store.Store }

// TestDurableGroupRecoverAndRequeuePlainStore: on a Store that is not a
// SharedStore, tasks read back by Recover and dead letters given another life by
// Requeue wait in their group's gate with their keys.
func TestDurableGroupRecoverAndRequeuePlainStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := storekit.NewMemoryStore()
		var seeded []store.StoredTask
		for i := range 3 {
			seeded = append(seeded, store.StoredTask{
				ID: fmt.Sprintf("r%d", i), Kind: "call", Payload: fmt.Appendf(nil, "a/r%d", i),
				State: kernel.Queued, Fence: 1, Group: "hosts", Key: "a",
			})
		}
		seed(t, mem, seeded...)
		k := newTestKernel(t, kernel.Config{Store: plainStore{mem}, Groups: map[string]kernel.GroupConfig{
			"hosts": {PerKey: kernel.Limits{Concurrency: 1}},
		}})
		tr := newKeyTracker(time.Second)
		if err := k.Register("call", tr.run); err != nil {
			t.Fatal(err)
		}
		if err := k.Register("fail", func(context.Context, []byte) error { return kernel.Permanent(errors.New("no")) }); err != nil {
			t.Fatal(err)
		}
		dead := make([]kernel.DurableTask, 3)
		for i := range dead {
			dead[i] = kernel.DurableTask{Kind: "fail", Group: "hosts", Key: "b"}
		}
		hs, err := k.SubmitDurableMany(context.Background(), dead)
		if err != nil {
			t.Fatal(err)
		}
		advance(time.Minute)
		if _, maxKey, runs := tr.snapshot(); maxKey["a"] != 1 || len(runs) != 3 {
			t.Fatalf("recovered tasks: most running of key a = %d, runs %v; want 1, each of the 3 once", maxKey["a"], runs)
		}
		ids := make([]string, len(hs))
		for i, h := range hs {
			if h.State() != kernel.Failed {
				t.Fatalf("task %d State() = %v, want failed", i, h.State())
			}
			ids[i] = h.ID()
		}
		// Another life, under a kind that runs, with their group and key.
		if err := k.Pause(kernel.Selector{Group: "hosts", Key: "b"}); err != nil {
			t.Fatal(err)
		}
		if n, err := k.Requeue(context.Background(), ids...); n != 3 || err != nil {
			t.Fatalf("Requeue() = %d, %v; want 3", n, err)
		}
		synctest.Wait()
		if g := k.Stats().Groups["hosts"]; g.Waiting != 3 || g.PausedKeys != 1 {
			t.Fatalf("Stats.Groups[hosts] after Requeue = %+v, want the 3 requeued tasks waiting in paused key b", g)
		}
	})
}
