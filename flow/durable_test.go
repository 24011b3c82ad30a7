package flow_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// durKernel returns a kernel on st named owner, closed at the test's end.
func durKernel(t *testing.T, st store.Store, owner string) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(kernel.Config{
		Store:          st,
		Owner:          owner,
		MaxConcurrency: 4,
		Retry:          kernel.ByPriority[kernel.RetryPolicy]{High: fastRetry, Normal: fastRetry, Low: fastRetry},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

var fastRetry = kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}

func register(t *testing.T, k *kernel.Kernel, st store.Store, f *flow.Flow, opts *flow.DurableOptions) *flow.Durable {
	t.Helper()
	if opts == nil {
		opts = &flow.DurableOptions{}
	}
	if opts.Poll == 0 {
		opts.Poll = 10 * time.Millisecond
	}
	d, err := flow.Register(k, st, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// restartMidRun starts a run of f() on a kernel on st, closes that kernel once
// started says what (a stage or shard) began, then waits for the run to succeed
// on a new kernel on st, as after a crash.
func restartMidRun(t *testing.T, st store.Store, f func() *flow.Flow, started <-chan struct{}, what string) {
	t.Helper()
	k1, err := kernel.New(kernel.Config{Store: st, Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	d1, err := flow.Register(k1, st, f(), &flow.DurableOptions{Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t)
	run, err := d1.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("%s did not start", what)
	}
	_ = k1.Close()
	_ = d1.Close()

	k2 := durKernel(t, st, "a")
	d2 := register(t, k2, st, f(), nil)
	if err := d2.Wait(ctx, run); err != nil {
		t.Fatalf("Wait() after the restart = %v, want nil", err)
	}
}

// startWait starts a run of d with input and waits for it to succeed.
func startWait(ctx context.Context, t *testing.T, d *flow.Durable, input string) string {
	t.Helper()
	run, err := d.Start(ctx, []byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, run); err != nil {
		t.Fatalf("Wait() = %v, want nil", err)
	}
	return run
}

// counts counts the runs of stages and shards by name, with the attempts seen.
type counts struct {
	mu sync.Mutex
	n  map[string]int
	at map[string][]int
}

func newCounts() *counts { return &counts{n: map[string]int{}, at: map[string][]int{}} }

func (c *counts) add(ctx context.Context, name string) int {
	info, _ := kernel.TaskInfo(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[name]++
	c.at[name] = append(c.at[name], info.Attempt)
	return c.n[name]
}

func (c *counts) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// etl is the fetch → clean (n shards) → store pipeline: fetch returns the input
// with "!" appended, each shard adds its index, store returns what fetch
// returned and the sum of the shards.
func etl(c *counts, n int, sum *atomic.Int64) *flow.Flow {
	return flow.New("etl").
		Stage("fetch", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
			c.add(ctx, "fetch")
			return append([]byte(nil), append(in.Input(), '!')...), nil
		}, nil).
		Sharded("clean", func(ctx context.Context, in flow.Inputs) (int, error) {
			c.add(ctx, "count")
			if string(in.Result("fetch")) == "" {
				return 0, errors.New("no fetch result")
			}
			return n, nil
		}, func(ctx context.Context, s flow.Shard, in flow.Inputs) error {
			c.add(ctx, "clean/"+strconv.Itoa(s.Index))
			if s.Total != n {
				return kernel.Permanent(fmt.Errorf("shard total %d, want %d", s.Total, n))
			}
			sum.Add(int64(s.Index))
			return nil
		}, &flow.ShardOptions{StageOptions: flow.StageOptions{After: []string{"fetch"}}, MaxShards: 100}).
		Stage("store", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
			c.add(ctx, "store")
			return []byte(string(in.Result("fetch")) + " " + strconv.FormatInt(sum.Load(), 10)), nil
		}, &flow.StageOptions{After: []string{"clean"}})
}

// TestDurableRun: a durable run reads its input and its dependencies' results,
// runs every stage and shard once, and Inspect and List show it succeeded.
func TestDurableRun(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	c := newCounts()
	var sum atomic.Int64
	d := register(t, k, st, etl(c, 8, &sum), nil)
	ctx := waitCtx(t)
	run := startWait(ctx, t, d, "rows")
	info, err := d.Inspect(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != run || info.Flow != "etl" || info.State != flow.Succeeded || info.Err != "" || info.Created.IsZero() || info.Ended.Before(info.Created) {
		t.Errorf("Inspect() = %+v, want run %s of etl succeeded", info, run)
	}
	want := []flow.StageStatus{
		{Name: "fetch", State: flow.StageSucceeded},
		{Name: "clean", State: flow.StageSucceeded, Shards: 8, ShardsDone: 8},
		{Name: "store", State: flow.StageSucceeded},
	}
	if fmt.Sprint(info.Stages) != fmt.Sprint(want) {
		t.Errorf("Inspect().Stages = %+v, want %+v", info.Stages, want)
	}
	for _, name := range []string{"fetch", "count", "store", "clean/0", "clean/7"} {
		if n := c.get(name); n != 1 {
			t.Errorf("%s ran %d times, want 1", name, n)
		}
	}
	if sum.Load() != 28 {
		t.Errorf("sum of the shards = %d, want 28", sum.Load())
	}
	// The store's result: fetch's, read downstream.
	lst, next, err := d.List(ctx, "", 10)
	if err != nil || next != "" || len(lst) != 1 || lst[0].ID != run || lst[0].State != flow.Succeeded {
		t.Fatalf("List() = %+v, %q, %v; want the run, succeeded", lst, next, err)
	}
	if _, err := d.Inspect(ctx, "nope"); !errors.Is(err, flow.ErrUnknownRun) {
		t.Errorf("Inspect(nope) = %v, want ErrUnknownRun", err)
	}
	if err := d.Wait(ctx, "nope"); !errors.Is(err, flow.ErrUnknownRun) {
		t.Errorf("Wait(nope) = %v, want ErrUnknownRun", err)
	}
}

// TestDurableResults: a stage reads the results of the stages it depends on
// (directly or not) and the run's input, and nothing of the others.
func TestDurableResults(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	got := make(chan string, 1)
	ret := func(s string) flow.StageFunc {
		return func(context.Context, flow.Inputs) ([]byte, error) { return []byte(s), nil }
	}
	f := flow.New("res").
		Stage("a", ret("A"), nil).
		Stage("b", ret("B"), &flow.StageOptions{After: []string{"a"}}).
		Stage("x", ret("X"), nil).
		Stage("c", func(_ context.Context, in flow.Inputs) ([]byte, error) {
			got <- fmt.Sprintf("%s %s %s [%s] %s", in.Result("a"), in.Result("b"), in.Result("x"), in.Input(), in.Flow())
			return nil, nil
		}, &flow.StageOptions{After: []string{"b"}})
	d := register(t, k, st, f, nil)
	ctx := waitCtx(t)
	run, err := d.Start(ctx, []byte("in"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, run); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "A B  [in] res" {
		t.Errorf("c read %q, want %q", s, "A B  [in] res")
	}
}

// TestDurableRestart: a run goes on across a Close and a new kernel on the same
// store, from the stages that had not succeeded; a stage that succeeded does not
// run again, and the interrupted one runs as a new attempt.
func TestDurableRestart(t *testing.T) {
	st := storekit.NewMemoryStore()
	c := newCounts()
	started := make(chan struct{})
	var once sync.Once
	f := func() *flow.Flow {
		return flow.New("restart").
			Stage("a", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
				c.add(ctx, "a")
				return []byte("A"), nil
			}, nil).
			Stage("b", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
				if c.add(ctx, "b") == 1 {
					once.Do(func() { close(started) })
					<-ctx.Done() // until the kernel closes
					return nil, ctx.Err()
				}
				return append(in.Result("a"), 'B'), nil
			}, &flow.StageOptions{After: []string{"a"}}).
			Stage("c", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
				c.add(ctx, "c")
				if string(in.Result("b")) != "AB" {
					return nil, kernel.Permanent(fmt.Errorf("b's result %q", in.Result("b")))
				}
				return nil, nil
			}, &flow.StageOptions{After: []string{"b"}})
	}
	restartMidRun(t, st, f, started, "b")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n["a"] != 1 || c.n["b"] != 2 || c.n["c"] != 1 {
		t.Errorf("runs a, b, c = %d, %d, %d; want 1, 2, 1", c.n["a"], c.n["b"], c.n["c"])
	}
	if fmt.Sprint(c.at["b"]) != "[1 2]" {
		t.Errorf("b's attempts = %v, want [1 2]", c.at["b"])
	}
}

// TestDurableTwoKernels: two kernels on one store share a run's shards through
// the pool, and each shard runs once.
func TestDurableTwoKernels(t *testing.T) {
	st := storekit.NewMemoryStore()
	const n = 12
	var (
		mu      sync.Mutex
		ran     = map[int]string{}
		twice   bool
		running atomic.Int32
		gate    = make(chan struct{})
		gateOne sync.Once
	)
	f := func(owner string) *flow.Flow {
		return flow.New("two").Sharded("work", func(context.Context, flow.Inputs) (int, error) { return n, nil },
			func(ctx context.Context, s flow.Shard, _ flow.Inputs) error {
				mu.Lock()
				if _, ok := ran[s.Index]; ok {
					twice = true
				}
				ran[s.Index] = owner
				mu.Unlock()
				// The first shards wait until more run than one kernel has slots.
				if running.Add(1) >= 3 {
					gateOne.Do(func() { close(gate) })
				}
				select {
				case <-gate:
				case <-ctx.Done():
					return ctx.Err()
				}
				return nil
			}, nil)
	}
	cfg := func(owner string) kernel.Config {
		return kernel.Config{Store: st, Owner: owner, MaxConcurrency: 2}
	}
	k1, err := kernel.New(cfg("k1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k1.Close() })
	k2, err := kernel.New(cfg("k2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k2.Close() })
	d1 := register(t, k1, st, f("k1"), &flow.DurableOptions{Pool: true})
	d2 := register(t, k2, st, f("k2"), &flow.DurableOptions{Pool: true})
	ctx := waitCtx(t)
	run, err := d1.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Wait(ctx, run); err != nil {
		t.Fatalf("Wait() on the other kernel = %v, want nil", err)
	}
	if err := d1.Wait(ctx, run); err != nil {
		t.Fatalf("Wait() = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	by := map[string]int{}
	for _, o := range ran {
		by[o]++
	}
	if twice || len(ran) != n || by["k1"] == 0 || by["k2"] == 0 {
		t.Errorf("shards ran on %v (twice: %v), want each of %d once, on both kernels", by, twice, n)
	}
}

// TestDurableBadCounts: a count out of range, or a panic, fails the stage with
// ErrShardCount; no shard runs, and the stages after it do not either.
func TestDurableBadCounts(t *testing.T) {
	tests := []struct {
		name  string
		count flow.CountFunc
		words string
	}{
		{"zero", func(context.Context, flow.Inputs) (int, error) { return 0, nil }, "CountFunc returned 0: must be in [1, 10]"},
		{"negative", func(context.Context, flow.Inputs) (int, error) { return -3, nil }, "CountFunc returned -3"},
		{"over", func(context.Context, flow.Inputs) (int, error) { return 11, nil }, "CountFunc returned 11"},
		{"panic", func(context.Context, flow.Inputs) (int, error) { panic("oops") }, "CountFunc panicked: oops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := storekit.NewMemoryStore()
			k := durKernel(t, st, "a")
			var shards, after atomic.Int32
			f := flow.New("bad").
				Sharded("s", tt.count, func(context.Context, flow.Shard, flow.Inputs) error {
					shards.Add(1)
					return nil
				}, &flow.ShardOptions{MaxShards: 10}).
				Stage("next", func(context.Context, flow.Inputs) ([]byte, error) {
					after.Add(1)
					return nil, nil
				}, &flow.StageOptions{After: []string{"s"}})
			d := register(t, k, st, f, nil)
			ctx := waitCtx(t)
			run, err := d.Start(ctx, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = d.Wait(ctx, run)
			var se *flow.StageError
			if !errors.Is(err, flow.ErrShardCount) || !errors.As(err, &se) || se.Stage != "s" || !strings.Contains(err.Error(), tt.words) {
				t.Fatalf("Wait() = %v, want a *StageError of s wrapping ErrShardCount, saying %q", err, tt.words)
			}
			info, err := d.Inspect(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			if info.State != flow.Failed || info.Stages[0].State != flow.StageFailed || info.Stages[1].State != flow.StageCanceled || !strings.Contains(info.Err, tt.words) {
				t.Errorf("Inspect() = %+v, want failed, s failed, next canceled", info)
			}
			if shards.Load() != 0 || after.Load() != 0 {
				t.Errorf("%d shards and %d later stages ran, want none", shards.Load(), after.Load())
			}
		})
	}
}

// TestDurableShardRetry: a failed shard is retried alone.
func TestDurableShardRetry(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	c := newCounts()
	f := flow.New("retry").Sharded("s", func(context.Context, flow.Inputs) (int, error) { return 5, nil },
		func(ctx context.Context, s flow.Shard, _ flow.Inputs) error {
			if c.add(ctx, strconv.Itoa(s.Index)) == 1 && s.Index == 2 {
				return errors.New("flaky")
			}
			return nil
		}, &flow.ShardOptions{StageOptions: flow.StageOptions{Retry: &kernel.RetryPolicy{MaxAttempts: 3}}, MaxParallel: 2})
	d := register(t, k, st, f, nil)
	ctx := waitCtx(t)
	run, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, run); err != nil {
		t.Fatalf("Wait() = %v, want nil", err)
	}
	for i := range 5 {
		want := 1
		if i == 2 {
			want = 2
		}
		if n := c.get(strconv.Itoa(i)); n != want {
			t.Errorf("shard %d ran %d times, want %d", i, n, want)
		}
	}
}

// TestDurableCancel: Cancel ends the running stage and the waiting ones; the run
// ends Canceled, and Cancel of an ended run does nothing.
func TestDurableCancel(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	started := make(chan struct{})
	var after atomic.Int32
	f := flow.New("cancel").
		Stage("long", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil).
		Stage("next", func(context.Context, flow.Inputs) ([]byte, error) {
			after.Add(1)
			return nil, nil
		}, &flow.StageOptions{After: []string{"long"}})
	d := register(t, k, st, f, nil)
	ctx := waitCtx(t)
	run, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := d.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, run); !errors.Is(err, kernel.ErrCanceled) {
		t.Fatalf("Wait() = %v, want ErrCanceled", err)
	}
	info, err := d.Inspect(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != flow.Canceled || info.Stages[0].State != flow.StageCanceled || info.Stages[1].State != flow.StageCanceled {
		t.Errorf("Inspect() = %+v, want canceled, both stages canceled", info)
	}
	if err := d.Cancel(ctx, run); err != nil {
		t.Errorf("Cancel() of an ended run = %v, want nil", err)
	}
	if err := d.RetryStage(ctx, run, "long"); err == nil {
		t.Errorf("RetryStage() of a cancelled run = nil, want an error")
	}
	if after.Load() != 0 {
		t.Errorf("next ran %d times, want 0", after.Load())
	}
}

// TestDurableRetryStage: under both policies, a failed stage retried with
// RetryStage succeeds, and the stages skipped or not started because of it run;
// the run returns to Running and ends Succeeded. Stages that succeeded do not
// run again.
func TestDurableRetryStage(t *testing.T) {
	for _, policy := range []flow.Policy{flow.FailFast, flow.ContinueIndependent} {
		t.Run(policy.String(), func(t *testing.T) {
			st := storekit.NewMemoryStore()
			k := durKernel(t, st, "a")
			c := newCounts()
			var broken atomic.Bool
			broken.Store(true)
			stage := func(name string) flow.StageFunc {
				return func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
					c.add(ctx, name)
					if name == "b" && broken.Load() {
						return nil, kernel.Permanent(errors.New("disk full"))
					}
					return nil, nil
				}
			}
			f := flow.New("rs").
				Stage("a", stage("a"), nil).
				Stage("b", stage("b"), &flow.StageOptions{After: []string{"a"}}).
				Stage("c", stage("c"), &flow.StageOptions{After: []string{"b"}})
			d := register(t, k, st, f, nil)
			ctx := waitCtx(t)
			run, err := d.Start(ctx, nil, &flow.Options{OnFailure: policy})
			if err != nil {
				t.Fatal(err)
			}
			err = d.Wait(ctx, run)
			var se *flow.StageError
			if !errors.As(err, &se) || se.Stage != "b" || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("Wait() = %v, want b's StageError (disk full)", err)
			}
			info, _ := d.Inspect(ctx, run)
			wantC := flow.StageCanceled
			if policy == flow.ContinueIndependent {
				wantC = flow.StageSkipped
			}
			if info.State != flow.Failed || info.Stages[1].State != flow.StageFailed || info.Stages[2].State != wantC {
				t.Fatalf("Inspect() = %+v, want failed, b failed, c %s", info, wantC)
			}
			if err := d.RetryStage(ctx, run, "a"); err == nil {
				t.Errorf("RetryStage(a) = nil, want an error: a succeeded")
			}
			if err := d.RetryStage(ctx, run, "zz"); err == nil {
				t.Errorf("RetryStage(zz) = nil, want an error")
			}
			broken.Store(false)
			if err := d.RetryStage(ctx, run, "b"); err != nil {
				t.Fatalf("RetryStage(b) = %v", err)
			}
			if err := d.Wait(ctx, run); err != nil {
				t.Fatalf("Wait() after RetryStage = %v, want nil", err)
			}
			if a, b, cc := c.get("a"), c.get("b"), c.get("c"); a != 1 || b != 2 || cc != 1 {
				t.Errorf("runs a, b, c = %d, %d, %d; want 1, 2, 1", a, b, cc)
			}
		})
	}
}

// TestDurablePolicies: FailFast starts nothing after a failure; ContinueIndependent
// runs the stages that do not depend on the failed one and skips the others.
func TestDurablePolicies(t *testing.T) {
	for _, policy := range []flow.Policy{flow.FailFast, flow.ContinueIndependent} {
		t.Run(policy.String(), func(t *testing.T) {
			st := &commitWatch{MemoryStore: storekit.NewMemoryStore(), ch: make(chan struct{})}
			k := durKernel(t, st, "a")
			c := newCounts()
			failed := make(chan struct{})
			f := flow.New("pol").
				Stage("x", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
					c.add(ctx, "x")
					defer close(failed)
					return nil, kernel.Permanent(errors.New("boom"))
				}, nil).
				Stage("y", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
					c.add(ctx, "y")
					return nil, nil
				}, &flow.StageOptions{After: []string{"x"}}).
				Stage("gate", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
					<-failed // ends after x's failure is stored
					for {
						next := st.next()
						ts, err := st.TasksByKey(ctx, []string{"axflow/" + in.RunID() + "/x"})
						if err != nil {
							return nil, err
						}
						if len(ts) == 1 && ts[0].State == store.Failed {
							return nil, nil
						}
						select {
						case <-next:
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}
				}, nil).
				Stage("z", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
					c.add(ctx, "z")
					return nil, nil
				}, &flow.StageOptions{After: []string{"gate"}})
			d := register(t, k, st, f, nil)
			ctx := waitCtx(t)
			run, err := d.Start(ctx, nil, &flow.Options{OnFailure: policy})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Wait(ctx, run); err == nil || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("Wait() = %v, want x's error", err)
			}
			info, _ := d.Inspect(ctx, run)
			got := make([]string, len(info.Stages))
			for i, s := range info.Stages {
				got[i] = s.Name + ":" + s.State.String()
			}
			want := "[x:failed y:canceled gate:succeeded z:canceled]"
			if policy == flow.ContinueIndependent {
				want = "[x:failed y:skipped gate:succeeded z:succeeded]"
			}
			if fmt.Sprint(got) != want {
				t.Errorf("stages = %v, want %s", got, want)
			}
			if c.get("y") != 0 {
				t.Errorf("y ran, want not")
			}
		})
	}
}

// commitWatch is a MemoryStore that announces every commit of its owners.
type commitWatch struct {
	*storekit.MemoryStore
	mu sync.Mutex
	ch chan struct{} // guarded by mu: closed at the next commit
}

func (s *commitWatch) CommitAs(ctx context.Context, o store.Owner, changes []store.Change) ([]error, error) {
	res, err := s.MemoryStore.CommitAs(ctx, o, changes)
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
	return res, err
}

// next returns a channel closed when the next commit returned.
func (s *commitWatch) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// keyless hides the store's KeyReader and TaskLister.
type keyless struct{ store.Store }

func TestDurableRegisterErrors(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	ok := flow.New("ok").Stage("a", nop, nil)
	tests := []struct {
		name  string
		st    store.Store
		f     *flow.Flow
		opts  *flow.DurableOptions
		words string
	}{
		{"no key reader", keyless{st}, ok, nil, "must implement store.KeyReader"},
		{"pool", keyless{st}, ok, &flow.DurableOptions{Pool: true}, "DurableOptions.Pool = true: needs a store.SharedStore"},
		{"poll", st, ok, &flow.DurableOptions{Poll: -1}, "DurableOptions.Poll = -1ns"},
		{"hash", st, flow.New("h").Stage("a#1", nop, nil), nil, `stage "a#1": flow: a durable stage's name must not contain '#'`},
		{"long", st, flow.New("l").Stage(strings.Repeat("x", 300), nop, nil), nil, "a durable stage's name has at most"},
		{"cycle", st, flow.New("c").Stage("a", nop, &flow.StageOptions{After: []string{"a"}}), nil, "dependency cycle"},
		{"nil flow", st, nil, nil, "nil flow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := flow.Register(k, tt.st, tt.f, tt.opts)
			if d != nil || err == nil || !strings.Contains(err.Error(), tt.words) {
				t.Errorf("Register() = %v, %v; want an error saying %q", d, err, tt.words)
			}
		})
	}
	d := register(t, k, st, ok, nil)
	if _, err := flow.Register(k, st, ok, nil); err == nil {
		t.Errorf("Register() of a flow registered already = nil, want an error")
	}
	if _, err := d.Start(context.Background(), nil, &flow.Options{OnFailure: 7}); err == nil || !strings.Contains(err.Error(), "OnFailure") {
		t.Errorf("Start(OnFailure 7) = %v, want an error naming OnFailure", err)
	}
}

// TestDurableRefused: a stage whose task the kernel refuses (a group it does not
// know) fails, with the refusal as its error, and the run ends Failed.
func TestDurableRefused(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	f := flow.New("refused").Stage("a", nop, &flow.StageOptions{Group: "nope"})
	d := register(t, k, st, f, nil)
	ctx := waitCtx(t)
	run, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Wait(ctx, run)
	var se *flow.StageError
	if !errors.As(err, &se) || se.Stage != "a" || !strings.Contains(err.Error(), "DurableTask.Group") {
		t.Fatalf("Wait() = %v, want a's StageError naming DurableTask.Group", err)
	}
}

// TestDurableList: List pages through the runs, live and ended, in the order
// they started.
func TestDurableList(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	release := make(chan struct{})
	f := flow.New("list").Stage("a", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
		if string(in.Input()) == "hold" {
			<-release
		}
		return nil, nil
	}, nil)
	d := register(t, k, st, f, nil)
	ctx := waitCtx(t)
	var runs []string
	for _, in := range []string{"a", "b", "hold"} {
		run, err := d.Start(ctx, []byte(in), nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for _, r := range runs[:2] {
		if err := d.Wait(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	var states []string
	after := ""
	for {
		page, next, err := d.List(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			got = append(got, r.ID)
			states = append(states, r.State.String())
		}
		if next == "" {
			break
		}
		after = next
	}
	close(release)
	if fmt.Sprint(got) != fmt.Sprint(runs) || strings.Join(states, " ") != "succeeded succeeded running" {
		t.Errorf("List() = %v %v, want %v [succeeded succeeded running]", got, states, runs)
	}
	if err := d.Wait(ctx, runs[2]); err != nil {
		t.Fatal(err)
	}
}

// TestDurableModel runs the random flows of TestModelRandomDAGs durably, on a
// kernel with few slots and little room and a memory store, in a synctest
// bubble, and checks them against the same model: no stage starts before its
// dependencies succeeded, every part runs once per attempt, the failure
// policies hold, and Cancel ends every stage.
func TestDurableModel(t *testing.T) {
	seeds := 120
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runDurableModel(t, uint64(seed)) })
		})
	}
}

func runDurableModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 29))
	m := genFlow(rng)
	cancelAt := -1
	if rng.IntN(3) == 0 {
		cancelAt = rng.IntN(len(m.stages))
	}
	c := 1 + rng.IntN(4)
	st := storekit.NewMemoryStore()
	k, err := kernel.New(kernel.Config{
		Store:          st,
		Owner:          "model",
		MaxConcurrency: 1 + rng.IntN(4),
		Capacity:       kernel.ByPriority[int]{High: c, Normal: c, Low: c},
		RetryBudget:    kernel.RetryBudget{Disabled: true},
		Retry:          kernel.ByPriority[kernel.RetryPolicy]{High: fastRetry, Normal: fastRetry, Low: fastRetry},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	r := newRecorder(&m, cancelAt)
	d, err := flow.Register(k, st, m.build(r), &flow.DurableOptions{Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := d.Start(ctx, nil, &flow.Options{OnFailure: m.policy})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer func() {
		select {
		case <-r.proceed:
		default:
			close(r.proceed)
		}
	}()
	ended := make(chan error, 1)
	go func() { ended <- d.Wait(ctx, run) }()
	canceled := false
	var werr error
	select {
	case werr = <-ended:
	case <-r.started:
		if err := d.Cancel(ctx, run); err != nil {
			t.Fatal(err)
		}
		info, err := d.Inspect(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		canceled = info.State == flow.Running || info.State == flow.Canceled
		r.mu.Lock()
		r.canceled = true
		r.allowed = map[string]bool{}
		for _, s := range info.Stages {
			if s.State == flow.StageRunning {
				r.allowed[s.Name] = true
			}
		}
		r.mu.Unlock()
		close(r.proceed)
		werr = <-ended
	}
	if errors.Is(werr, context.DeadlineExceeded) {
		t.Fatalf("Wait() = %v", werr)
	}
	info, err := d.Inspect(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, &m, r, info.Stages, info.State, werr, canceled)
}

// TestDurableRetryShard: RetryStage of a sharded stage requeues only its failed
// shard; the shards that succeeded do not run again, and the stage after it runs.
func TestDurableRetryShard(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	c := newCounts()
	var broken atomic.Bool
	broken.Store(true)
	f := flow.New("rshard").
		Sharded("s", func(ctx context.Context, _ flow.Inputs) (int, error) {
			c.add(ctx, "count")
			return 6, nil
		}, func(ctx context.Context, s flow.Shard, _ flow.Inputs) error {
			c.add(ctx, strconv.Itoa(s.Index))
			if s.Index == 3 && broken.Load() {
				return kernel.Permanent(errors.New("bad partition"))
			}
			return nil
		}, nil).
		Stage("after", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			c.add(ctx, "after")
			return nil, nil
		}, &flow.StageOptions{After: []string{"s"}})
	d := register(t, k, st, f, nil)
	ctx := waitCtx(t)
	run, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Wait(ctx, run)
	var se *flow.StageError
	if !errors.As(err, &se) || se.Stage != "s" || se.Shard != 3 {
		t.Fatalf("Wait() = %v, want the StageError of s, shard 3", err)
	}
	info, _ := d.Inspect(ctx, run)
	if s := info.Stages[0]; s.State != flow.StageFailed || s.Shards != 6 || s.ShardsDone != 5 {
		t.Errorf("Inspect().Stages[0] = %+v, want failed, 5 of 6 shards", s)
	}
	broken.Store(false)
	if err := d.RetryStage(ctx, run, "s"); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, run); err != nil {
		t.Fatalf("Wait() after RetryStage = %v, want nil", err)
	}
	for name, want := range map[string]int{"count": 1, "0": 1, "2": 1, "3": 2, "5": 1, "after": 1} {
		if n := c.get(name); n != want {
			t.Errorf("%s ran %d times, want %d", name, n, want)
		}
	}
}

// TestDurableCancelElsewhere: Cancel called in another process (a second kernel
// on the store) ends the stage running in the first, whose reconciler cancels it.
func TestDurableCancelElsewhere(t *testing.T) {
	st := storekit.NewMemoryStore()
	started := make(chan struct{})
	var once sync.Once
	f := flow.New("far").Stage("long", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil, ctx.Err()
	}, nil)
	k1 := durKernel(t, st, "k1")
	d1 := register(t, k1, st, f, nil)
	ctx := waitCtx(t)
	run, err := d1.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started // in k1: the second process starts after
	k2 := durKernel(t, st, "k2")
	d2 := register(t, k2, st, f, nil)
	if err := d2.Cancel(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := d2.Wait(ctx, run); !errors.Is(err, kernel.ErrCanceled) {
		t.Fatalf("Wait() = %v, want ErrCanceled", err)
	}
	if err := d1.Wait(ctx, run); !errors.Is(err, kernel.ErrCanceled) {
		t.Fatalf("Wait() in the first process = %v, want ErrCanceled", err)
	}
}

// TestDurableTaskCanceled: a stage's task cancelled by other means than
// Durable.Cancel (Kernel.Cancel by its stored ID) fails the stage, as in memory,
// and the run ends Failed.
func TestDurableTaskCanceled(t *testing.T) {
	st := storekit.NewMemoryStore()
	k := durKernel(t, st, "a")
	ids := make(chan string, 1)
	f := flow.New("kc").
		Stage("a", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			info, _ := kernel.TaskInfo(ctx)
			ids <- info.ID
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil).
		Stage("b", nop, &flow.StageOptions{After: []string{"a"}})
	d := register(t, k, st, f, nil)
	ctx := waitCtx(t)
	run, err := d.Start(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Cancel(ctx, <-ids); err != nil {
		t.Fatal(err)
	}
	err = d.Wait(ctx, run)
	var se *flow.StageError
	if !errors.As(err, &se) || se.Stage != "a" || !errors.Is(err, kernel.ErrCanceled) {
		t.Fatalf("Wait() = %v, want a's StageError wrapping ErrCanceled", err)
	}
	if info, _ := d.Inspect(ctx, run); info.State != flow.Failed || info.Stages[1].State != flow.StageCanceled {
		t.Errorf("Inspect() = %+v, want failed, b canceled", info)
	}
	if err := d.RetryStage(ctx, run, "a"); err == nil || !strings.Contains(err.Error(), "nothing to requeue") {
		t.Errorf("RetryStage(a) = %v, want an error: nothing to requeue", err)
	}
}

// TestDurableRestartShards: after a Close and a new kernel on the store, the shards
// that succeeded do not run again; the interrupted one runs as a new attempt.
func TestDurableRestartShards(t *testing.T) {
	st := storekit.NewMemoryStore()
	c := newCounts()
	started := make(chan struct{})
	var once sync.Once
	f := func() *flow.Flow {
		return flow.New("rshards").Sharded("s", func(ctx context.Context, _ flow.Inputs) (int, error) {
			c.add(ctx, "count")
			return 4, nil
		}, func(ctx context.Context, s flow.Shard, _ flow.Inputs) error {
			if c.add(ctx, strconv.Itoa(s.Index)) == 1 && s.Index == 2 {
				once.Do(func() { close(started) })
				<-ctx.Done() // until the kernel closes
				return ctx.Err()
			}
			return nil
		}, &flow.ShardOptions{MaxParallel: 1}) // 0, 1, then 2 blocks; 3 waits for it
	}
	restartMidRun(t, st, f, started, "shard 2")
	c.mu.Lock()
	defer c.mu.Unlock()
	if fmt.Sprint(c.n) != "map[0:1 1:1 2:2 3:1 count:1]" || fmt.Sprint(c.at["2"]) != "[1 2]" {
		t.Errorf("runs %v, shard 2's attempts %v; want map[0:1 1:1 2:2 3:1 count:1], [1 2]", c.n, c.at["2"])
	}
}

// keyReads is a MemoryStore that counts the succeeded shards its TasksByKey
// returned.
type keyReads struct {
	*storekit.MemoryStore
	shards atomic.Int64
}

func (s *keyReads) TasksByKey(ctx context.Context, keys []string) ([]store.StoredTask, error) {
	ts, err := s.MemoryStore.TasksByKey(ctx, keys)
	for _, t := range ts {
		if t.State == store.Succeeded && strings.Contains(t.UniqueKey, "/clean#") {
			s.shards.Add(1)
		}
	}
	return ts, err
}

// TestDurableReadsSucceededOnce: a shard whose success was read is not read
// again at every pass of the reconciler: with shards ending one at a time, the
// succeeded shards read back stay a few per shard (the confirmer's read, and a
// pass's that came before it), not one per shard and pass (several hundred).
func TestDurableReadsSucceededOnce(t *testing.T) {
	const n = 32
	st := &keyReads{MemoryStore: storekit.NewMemoryStore()}
	k, err := kernel.New(kernel.Config{Store: st, Owner: "a", MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	c := newCounts()
	var sum atomic.Int64
	d := register(t, k, st, etl(c, n, &sum), nil)
	ctx := waitCtx(t)
	startWait(ctx, t, d, "rows")
	if sum.Load() != n*(n-1)/2 {
		t.Errorf("sum of the shards = %d, want %d", sum.Load(), n*(n-1)/2)
	}
	if got := st.shards.Load(); got > 3*n {
		t.Errorf("succeeded shards read back %d times for %d shards, want at most %d", got, n, 3*n)
	}
	t.Logf("succeeded shards read back %d times for %d shards", st.shards.Load(), n)
}
