package flow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

func newKernel(t *testing.T, cfg kernel.Config) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func nop(context.Context, flow.Inputs) ([]byte, error) { return nil, nil }

func TestBadDefinitions(t *testing.T) {
	after := func(deps ...string) *flow.StageOptions { return &flow.StageOptions{After: deps} }
	count := func(context.Context, flow.Inputs) (int, error) { return 1, nil }
	shard := func(context.Context, flow.Shard, flow.Inputs) error { return nil }
	tests := []struct {
		name  string
		f     *flow.Flow
		is    error  // errors.Is
		words string // in the message
	}{
		{"empty", flow.New("f"), flow.ErrEmpty, `flow "f": flow: no stages`},
		{"duplicate", flow.New("f").Stage("a", nop, nil).Stage("a", nop, nil), flow.ErrDuplicate, `stage "a"`},
		{"unknown", flow.New("f").Stage("a", nop, after("b")), flow.ErrUnknown, `stage "a": flow: unknown stage: depends on "b"`},
		{"self", flow.New("f").Stage("a", nop, after("a")), flow.ErrCycle, `"a" -> "a"`},
		{"cycle", flow.New("f").Stage("x", nop, nil).Stage("a", nop, after("c", "x")).Stage("b", nop, after("a")).Stage("c", nop, after("b")), flow.ErrCycle, `"a" -> "b" -> "c" -> "a"`},
		{"nil run", flow.New("f").Stage("a", nil, nil), nil, `stage "a": flow: nil StageFunc`},
		{"empty name", flow.New("f").Stage("", nop, nil), nil, `flow "f": flow: a stage with an empty name`},
		{"nil count", flow.New("f").Sharded("a", nil, shard, nil), nil, "nil CountFunc"},
		{"nil shard", flow.New("f").Sharded("a", count, nil, nil), nil, "nil ShardFunc"},
		{"max shards", flow.New("f").Sharded("a", count, shard, &flow.ShardOptions{MaxShards: -1}), nil, "ShardOptions.MaxShards = -1"},
		{"max shards over", flow.New("f").Sharded("a", count, shard, &flow.ShardOptions{MaxShards: 1<<20 + 1}), nil, "ShardOptions.MaxShards = 1048577"},
		{"max parallel", flow.New("f").Sharded("a", count, shard, &flow.ShardOptions{MaxParallel: -2}), nil, "ShardOptions.MaxParallel = -2"},
		{"priority", flow.New("f").Stage("a", nop, &flow.StageOptions{Priority: 9}), nil, "kernel: flow.StageOptions.Priority = priority(9)"},
		{"timeout", flow.New("f").Stage("a", nop, &flow.StageOptions{Timeout: -1}), nil, "StageOptions.Timeout = -1ns"},
		{"key", flow.New("f").Stage("a", nop, &flow.StageOptions{Key: "k"}), nil, "StageOptions.Key = k: needs a Group"},
		{"retry", flow.New("f").Stage("a", nop, &flow.StageOptions{Retry: &kernel.RetryPolicy{MaxAttempts: -1}}), nil, "StageOptions.Retry.MaxAttempts = -1"},
	}
	k := newKernel(t, kernel.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate()
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.words) {
				t.Fatalf("Validate() = %v, want %v containing %q", err, tt.is, tt.words)
			}
			var de *flow.DefError
			if !errors.As(err, &de) || de.Flow != "f" {
				t.Errorf("Validate() = %#v, want a *DefError of flow f", err)
			}
			h, err2 := flow.Run(context.Background(), k, tt.f, nil)
			if h != nil || err2 == nil || err2.Error() != err.Error() {
				t.Errorf("Run() = %v, %v, want nil, %v", h, err2, err)
			}
		})
	}
	if st := k.Stats().ByPriority; st.High.Submitted+st.Normal.Submitted+st.Low.Submitted != 0 {
		t.Errorf("Stats() = %+v after refused flows, want nothing submitted", st)
	}
}

func TestRunBadArguments(t *testing.T) {
	k := newKernel(t, kernel.Config{})
	f := flow.New("f").Stage("a", nop, nil)
	if _, err := flow.Run(context.Background(), nil, f, nil); err == nil || !strings.Contains(err.Error(), "nil kernel") {
		t.Errorf("Run(nil kernel) = %v", err)
	}
	if _, err := flow.Run(context.Background(), k, nil, nil); err == nil || !strings.Contains(err.Error(), "nil flow") {
		t.Errorf("Run(nil flow) = %v", err)
	}
	if _, err := flow.Run(context.Background(), k, f, &flow.Options{OnFailure: 7}); err == nil || !strings.Contains(err.Error(), "flow.Options.OnFailure = policy(7)") {
		t.Errorf("Run(OnFailure 7) = %v", err)
	}
	_ = k.Close()
	if _, err := flow.Run(context.Background(), k, f, nil); !errors.Is(err, kernel.ErrClosed) {
		t.Errorf("Run(closed kernel) = %v, want ErrClosed", err)
	}
}

// TestBadShardCounts: a CountFunc that panics, returns 0, a negative count, more
// than MaxShards or an error fails its stage clearly, with no shard started,
// and the run ends as its policy says.
func TestBadShardCounts(t *testing.T) {
	tests := []struct {
		name  string
		count flow.CountFunc
		words string
		is    error
	}{
		{"panic", func(context.Context, flow.Inputs) (int, error) { panic("no rows table") }, "CountFunc panicked: no rows table", flow.ErrShardCount},
		{"zero", func(context.Context, flow.Inputs) (int, error) { return 0, nil }, "CountFunc returned 0: must be in [1, 10]", flow.ErrShardCount},
		{"negative", func(context.Context, flow.Inputs) (int, error) { return -3, nil }, "CountFunc returned -3", flow.ErrShardCount},
		{"over max", func(context.Context, flow.Inputs) (int, error) { return 11, nil }, "CountFunc returned 11: must be in [1, 10] (ShardOptions.MaxShards)", flow.ErrShardCount},
		{"error", func(context.Context, flow.Inputs) (int, error) { return 5, errors.New("db down") }, "db down", nil},
	}
	for _, tt := range tests {
		for _, p := range []flow.Policy{flow.FailFast, flow.ContinueIndependent} {
			t.Run(tt.name+"/"+p.String(), func(t *testing.T) {
				k := newKernel(t, kernel.Config{})
				var shards, other atomic.Int32
				f := flow.New("f").
					Sharded("clean", tt.count, func(context.Context, flow.Shard, flow.Inputs) error { shards.Add(1); return nil },
						&flow.ShardOptions{MaxShards: 10, StageOptions: flow.StageOptions{Retry: &kernel.RetryPolicy{MaxAttempts: 1}}}).
					Stage("store", nop, &flow.StageOptions{After: []string{"clean"}}).
					Stage("other", func(context.Context, flow.Inputs) ([]byte, error) { other.Add(1); return nil, nil }, &flow.StageOptions{After: []string{"gate"}}).
					Stage("gate", nop, nil)
				h, err := flow.Run(context.Background(), k, f, &flow.Options{OnFailure: p})
				if err != nil {
					t.Fatal(err)
				}
				err = h.Wait(context.Background())
				var se *flow.StageError
				if !errors.As(err, &se) || se.Stage != "clean" || se.Shard != -1 || !strings.Contains(err.Error(), tt.words) || (tt.is != nil && !errors.Is(err, tt.is)) {
					t.Fatalf("Wait() = %v, want a *StageError of clean containing %q", err, tt.words)
				}
				if h.State() != flow.Failed || shards.Load() != 0 {
					t.Errorf("State() = %v, shards run %d, want failed, 0", h.State(), shards.Load())
				}
				clean, _ := h.Stage("clean")
				store, _ := h.Stage("store")
				if clean.State != flow.StageFailed || clean.Shards != 0 {
					t.Errorf("clean = %+v, want failed, no shards", clean)
				}
				wantStore := flow.StageCanceled
				if p == flow.ContinueIndependent {
					wantStore = flow.StageSkipped
					if o, _ := h.Stage("other"); o.State != flow.StageSucceeded || other.Load() != 1 {
						t.Errorf("other = %+v, ran %d, want succeeded once", o, other.Load())
					}
				}
				if store.State != wantStore {
					t.Errorf("store = %v, want %v", store.State, wantStore)
				}
			})
		}
	}
}

// TestResults: a stage reads the results of the stages it depends on, directly
// or not, and nothing of the others; the caller reads them from the Handle.
func TestResults(t *testing.T) {
	k := newKernel(t, kernel.Config{})
	var got sync.Map
	read := func(name string) flow.StageFunc {
		return func(_ context.Context, in flow.Inputs) ([]byte, error) {
			got.Store(name, string(in.Result("a"))+"|"+string(in.Result("side"))+"|"+in.Flow())
			return []byte(name + "-out"), nil
		}
	}
	f := flow.New("r").
		Stage("a", func(context.Context, flow.Inputs) ([]byte, error) { return []byte("A"), nil }, nil).
		Stage("side", func(context.Context, flow.Inputs) ([]byte, error) { return []byte("S"), nil }, nil).
		Stage("b", read("b"), &flow.StageOptions{After: []string{"a"}}).
		Stage("c", read("c"), &flow.StageOptions{After: []string{"b"}})
	h, err := flow.Run(context.Background(), k, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "c"} {
		if v, _ := got.Load(n); v != "A||r" {
			t.Errorf("stage %s read %q, want %q", n, v, "A||r")
		}
	}
	if r := string(h.Result("c")); r != "c-out" {
		t.Errorf("Result(c) = %q, want c-out", r)
	}
	if h.Result("nope") != nil || h.Name() != "r" {
		t.Errorf("Result(nope) = %q, Name() = %q", h.Result("nope"), h.Name())
	}
	if _, ok := h.Stage("nope"); ok {
		t.Error("Stage(nope) found")
	}
	if (flow.Inputs{}).Result("a") != nil || (flow.Inputs{}).Flow() != "" {
		t.Error("the zero Inputs reads something")
	}
}

func TestResultTooLarge(t *testing.T) {
	k := newKernel(t, kernel.Config{})
	var runs atomic.Int32
	f := flow.New("big").Stage("a", func(context.Context, flow.Inputs) ([]byte, error) {
		runs.Add(1)
		return make([]byte, 1<<20+1), nil
	}, &flow.StageOptions{Retry: &kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond}})
	h, err := flow.Run(context.Background(), k, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(context.Background()); err == nil || !strings.Contains(err.Error(), "result of 1048577 bytes: at most 1048576") || runs.Load() != 1 {
		t.Errorf("Wait() = %v after %d runs, want the size error after 1", err, runs.Load())
	}
}

// TestShardRetriesAlone: a failed shard is retried on its own; the others run
// once.
func TestShardRetriesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKernel(t, kernel.Config{MaxConcurrency: 4})
		var mu sync.Mutex
		runs := map[int]int{}
		h, err := flow.RunSharded(context.Background(), k, "job",
			func(context.Context, flow.Inputs) (int, error) { return 16, nil },
			func(ctx context.Context, s flow.Shard, _ flow.Inputs) error {
				mu.Lock()
				runs[s.Index]++
				n := runs[s.Index]
				mu.Unlock()
				if s.Index == 5 && n < 3 {
					return errors.New("flaky")
				}
				return nil
			}, &flow.ShardOptions{StageOptions: flow.StageOptions{Retry: &kernel.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := range 16 {
			want := 1
			if i == 5 {
				want = 3
			}
			if runs[i] != want {
				t.Errorf("shard %d ran %d times, want %d", i, runs[i], want)
			}
		}
		if s, _ := h.Stage("job"); s.ShardsDone != 16 || s.Shards != 16 {
			t.Errorf("Stage(job) = %+v, want 16 of 16", s)
		}
	})
}

// TestMaxParallel: at most MaxParallel shards are in the kernel at once, and
// with 1 they run one at a time in index order.
func TestMaxParallel(t *testing.T) {
	for _, par := range []int{1, 3} {
		synctest.Test(t, func(t *testing.T) {
			k := newKernel(t, kernel.Config{MaxConcurrency: 8})
			var mu sync.Mutex
			var live, peak int
			var order []int
			h, err := flow.RunSharded(context.Background(), k, "job",
				func(context.Context, flow.Inputs) (int, error) { return 12, nil },
				func(ctx context.Context, s flow.Shard, _ flow.Inputs) error {
					mu.Lock()
					live++
					peak = max(peak, live)
					order = append(order, s.Index)
					mu.Unlock()
					shardWork()
					mu.Lock()
					live--
					mu.Unlock()
					return nil
				}, &flow.ShardOptions{MaxParallel: par})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if peak > par || peak == 0 {
				t.Errorf("MaxParallel %d: peak %d shards at once", par, peak)
			}
			for i, v := range order {
				if par == 1 && v != i {
					t.Fatalf("MaxParallel 1: order %v, want 0, 1, 2, ...", order)
				}
			}
		})
	}
}

// TestKernelRefusesStage: a stage the kernel refuses (a group it does not
// know) fails with the kernel's error.
func TestKernelRefusesStage(t *testing.T) {
	k := newKernel(t, kernel.Config{})
	f := flow.New("g").Stage("a", nop, &flow.StageOptions{Group: "nope"})
	h, err := flow.Run(context.Background(), k, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(context.Background()); err == nil || !strings.Contains(err.Error(), `flow "g": stage "a": kernel: Task.Group`) {
		t.Errorf("Wait() = %v, want the kernel's refusal", err)
	}
}

// TestGroupLimitsApply: a sharded stage's shards obey their group's limits.
func TestGroupLimitsApply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKernel(t, kernel.Config{MaxConcurrency: 8, Groups: map[string]kernel.GroupConfig{"db": {PerKey: kernel.Limits{Concurrency: 2}}}})
		var mu sync.Mutex
		var live, peak int
		h, err := flow.RunSharded(context.Background(), k, "job",
			func(context.Context, flow.Inputs) (int, error) { return 10, nil },
			func(context.Context, flow.Shard, flow.Inputs) error {
				mu.Lock()
				live++
				peak = max(peak, live)
				mu.Unlock()
				shardWork()
				mu.Lock()
				live--
				mu.Unlock()
				return nil
			}, &flow.ShardOptions{StageOptions: flow.StageOptions{Group: "db", Key: "primary"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil || peak != 2 {
			t.Errorf("Wait() = %v, peak %d, want nil, 2", err, peak)
		}
	})
}

// TestCloseEndsRun: closing the kernel ends a live run.
func TestCloseEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := kernel.New(kernel.Config{})
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		f := flow.New("c").
			Stage("a", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			}, nil).
			Stage("b", nop, &flow.StageOptions{After: []string{"a"}})
		h, err := flow.Run(context.Background(), k, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-started
		_ = k.Close()
		if err := h.Wait(context.Background()); err == nil || h.State() == flow.Succeeded {
			t.Errorf("Wait() = %v, State() = %v after Close, want an error", err, h.State())
		}
		if b, _ := h.Stage("b"); b.State != flow.StageCanceled {
			t.Errorf("b = %v, want canceled", b.State)
		}
	})
}

// TestWaitContext: Wait returns ctx.Err() when ctx ends first; RunWait cancels
// the run when its ctx ends and returns its end.
func TestWaitContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKernel(t, kernel.Config{})
		release := make(chan struct{})
		f := flow.New("w").Stage("a", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, nil
		}, nil)
		h, err := flow.Run(context.Background(), k, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := h.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) || h.State() != flow.Running {
			t.Errorf("Wait() = %v, State() = %v, want DeadlineExceeded, running", err, h.State())
		}
		cancel()
		close(release)
		var never context.Context // nil: never ends, as Wait documents
		if err := h.Wait(never); err != nil {
			t.Errorf("Wait(nil) = %v", err)
		}

		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = flow.RunWait(ctx, k, flow.New("w2").Stage("a", func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil), nil)
		if !errors.Is(err, kernel.ErrCanceled) {
			t.Errorf("RunWait() = %v, want ErrCanceled", err)
		}
	})
}

// TestFromSchedule: a schedule's occurrence runs a sharded job with RunWait.
func TestFromSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKernel(t, kernel.Config{MaxConcurrency: 4})
		s, err := schedule.New(k, schedule.Config{})
		if err != nil {
			t.Fatal(err)
		}
		var shards atomic.Int32
		done := make(chan error, 1)
		job := flow.New("nightly").Sharded("reconcile",
			func(context.Context, flow.Inputs) (int, error) { return 8, nil },
			func(context.Context, flow.Shard, flow.Inputs) error { shards.Add(1); return nil }, nil)
		_, err = s.Add(schedule.Every(time.Hour), func(ctx context.Context, _ schedule.Fire) error {
			err := flow.RunWait(ctx, k, job, nil)
			done <- err
			return err
		}, &schedule.Options{Name: "nightly"})
		if err != nil {
			t.Fatal(err)
		}
		// The receive blocks the bubble: its clock jumps to the first target.
		if err := <-done; err != nil || shards.Load() != 8 {
			t.Errorf("occurrence = %v, %d shards, want nil, 8", err, shards.Load())
		}
		s.Stop()
	})
}

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{flow.Running.String(), "running"},
		{flow.Succeeded.String(), "succeeded"},
		{flow.Failed.String(), "failed"},
		{flow.Canceled.String(), "canceled"},
		{flow.State(9).String(), "state(9)"},
		{flow.StageWaiting.String(), "waiting"},
		{flow.StageRunning.String(), "running"},
		{flow.StageSucceeded.String(), "succeeded"},
		{flow.StageFailed.String(), "failed"},
		{flow.StageCanceled.String(), "canceled"},
		{flow.StageSkipped.String(), "skipped"},
		{flow.StageState(0).String(), "stage-state(0)"},
		{flow.FailFast.String(), "fail-fast"},
		{flow.ContinueIndependent.String(), "continue-independent"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
}

// TestFullKernel: shards the kernel has no room for wait on the run's
// submitting goroutine and run in order; Cancel while they wait ends the run.
func TestFullKernel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKernel(t, kernel.Config{MaxConcurrency: 1, Capacity: kernel.ByPriority[int]{High: 1, Normal: 1, Low: 1}})
		var mu sync.Mutex
		var order []int
		h, err := flow.RunSharded(context.Background(), k, "full",
			func(context.Context, flow.Inputs) (int, error) { return 20, nil },
			func(_ context.Context, s flow.Shard, _ flow.Inputs) error {
				mu.Lock()
				order = append(order, s.Index)
				mu.Unlock()
				return nil
			}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, v := range order {
			if v != i {
				t.Fatalf("order %v, want 0, 1, 2, ...", order)
			}
		}

		block := make(chan struct{})
		started := make(chan struct{}, 1)
		var ran atomic.Int32
		h, err = flow.RunSharded(context.Background(), k, "blocked",
			func(context.Context, flow.Inputs) (int, error) { return 10, nil },
			func(ctx context.Context, _ flow.Shard, _ flow.Inputs) error {
				ran.Add(1)
				select {
				case started <- struct{}{}:
				default:
				}
				select {
				case <-block:
				case <-ctx.Done():
					return ctx.Err()
				}
				return nil
			}, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-started
		synctest.Wait() // the other shards wait for room
		h.Cancel()
		if err := h.Wait(context.Background()); !errors.Is(err, kernel.ErrCanceled) || h.State() != flow.Canceled {
			t.Errorf("Wait() = %v, State() = %v, want ErrCanceled, canceled", err, h.State())
		}
		if n := ran.Load(); n > 2 {
			t.Errorf("%d shards ran after Cancel, want at most 2 (the running one and the queued one)", n)
		}
		s, _ := h.Stage("blocked")
		if s.State != flow.StageCanceled || s.ShardsDone != 0 || s.Shards != 10 {
			t.Errorf("Stage() = %+v, want canceled, 0 of 10", s)
		}
		close(block)
	})
}

// shardWork stands for a shard's work: a millisecond of the bubble's virtual clock
// (the tests that call it run under synctest), during which the shard holds its slot.
func shardWork() { <-time.After(time.Millisecond) }
