package kernel_test

import (
	"context"
	"errors"
	"maps"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

type hookKey struct{}

// hookValue is the key of the values the tests of hooks put in contexts.
type hookValue string

// recHooks records what a kernel hands its Hooks; its behaviour is set per test.
type recHooks struct {
	mu       sync.Mutex
	attempts []kernel.AttemptInfo
	ends     []error
	headers  func(ctx context.Context) map[string]string
	attempt  func(ctx context.Context, a kernel.AttemptInfo) (context.Context, func(error)) // nil: add hookKey
}

func (r *recHooks) Headers(ctx context.Context) map[string]string {
	if r.headers == nil {
		return nil
	}
	return r.headers(ctx)
}

func (r *recHooks) Attempt(ctx context.Context, a kernel.AttemptInfo) (context.Context, func(error)) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
	if r.attempt != nil {
		return r.attempt(ctx, a)
	}
	return context.WithValue(ctx, hookKey{}, "from the hook"), func(err error) {
		r.mu.Lock()
		r.ends = append(r.ends, err)
		r.mu.Unlock()
	}
}

func (r *recHooks) snapshot() ([]kernel.AttemptInfo, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kernel.AttemptInfo(nil), r.attempts...), append([]error(nil), r.ends...)
}

// TestHooksAttempts: the hook sees every attempt of a retried task with its info, the
// function sees the hook's values, the task's own values, its TaskInfo and its
// cancellation, and the end function gets each attempt's outcome.
func TestHooksAttempts(t *testing.T) {
	rh := &recHooks{}
	k := newTestKernel(t, kernel.Config{Hooks: rh, Groups: map[string]kernel.GroupConfig{"hosts": {}}})
	boom := errors.New("boom")
	n := 0
	vals := context.WithValue(context.Background(), hookValue("submitter"), "values")
	h, err := k.Submit(vals, kernel.Task{
		ID: "t1", Priority: kernel.High, Group: "hosts", Key: "a",
		Retry: &kernel.RetryPolicy{MaxAttempts: 3, BackoffFunc: func(int, error) time.Duration { return 0 }},
		Run: func(ctx context.Context) error {
			n++
			if ctx.Value(hookKey{}) != "from the hook" || ctx.Value(hookValue("submitter")) != "values" {
				t.Errorf("attempt %d: the function's context lacks the hook's or the submitter's values", n)
			}
			if info, ok := kernel.TaskInfo(ctx); !ok || info.Attempt != n || info.ID != "t1" {
				t.Errorf("attempt %d: TaskInfo() = %+v, %v", n, info, ok)
			}
			if ctx.Done() == nil || ctx.Err() != nil {
				t.Errorf("attempt %d: Done() = %v, Err() = %v; want the attempt's cancellation", n, ctx.Done(), ctx.Err())
			}
			if n < 3 {
				return boom
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(t.Context()); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	as, ends := rh.snapshot()
	if len(as) != 3 || len(ends) != 3 {
		t.Fatalf("hooks saw %d attempts, %d ends; want 3, 3", len(as), len(ends))
	}
	for i, a := range as {
		if a.ID != "t1" || a.Attempt != i+1 || a.Priority != kernel.High || a.Group != "hosts" || a.Kind != "" || a.Headers != nil {
			t.Errorf("attempt %d: AttemptInfo = %+v", i+1, a)
		}
	}
	if !errors.Is(ends[0], boom) || !errors.Is(ends[1], boom) || ends[2] != nil {
		t.Errorf("ends = %v; want boom, boom, nil", ends)
	}
}

// TestHooksLightAndGoexit: a fire-and-forget task (light without hooks) is seen too,
// and an attempt that panics or calls runtime.Goexit ends with a *PanicError.
func TestHooksLightAndGoexit(t *testing.T) {
	rh := &recHooks{}
	k := newTestKernel(t, kernel.Config{Hooks: rh, Retry: kernel.ByPriority[kernel.RetryPolicy]{Normal: kernel.RetryPolicy{MaxAttempts: 1}}})
	done := make(chan struct{})
	if err := k.TryGo(kernel.Task{Run: func(context.Context) error { close(done); return nil }}); err != nil {
		t.Fatal(err)
	}
	<-done
	h, err := k.Submit(t.Context(), kernel.Task{Run: func(context.Context) error { runtime.Goexit(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	var pe *kernel.PanicError
	if err := h.Wait(t.Context()); !errors.As(err, &pe) || !pe.Goexit {
		t.Fatalf("Wait() = %v, want a *PanicError of a Goexit", err)
	}
	h, err = k.Submit(t.Context(), kernel.Task{Run: func(context.Context) error { panic("boom") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(t.Context()); !errors.As(err, &pe) || pe.Goexit {
		t.Fatalf("Wait() = %v, want a *PanicError of a panic", err)
	}
	if err := k.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	as, ends := rh.snapshot()
	if len(as) != 3 || len(ends) != 3 {
		t.Fatalf("hooks saw %d attempts, %d ends; want 3, 3", len(as), len(ends))
	}
	var pe2 *kernel.PanicError
	if ends[0] != nil || !errors.As(ends[1], &pe) || !pe.Goexit || !errors.As(ends[2], &pe2) || pe2.Value != "boom" {
		t.Errorf("ends = %v; want nil, a Goexit *PanicError, a *PanicError of boom", ends)
	}
}

// TestHooksPanics: hooks that panic (in Attempt, in its end function, in Headers) crash
// nothing: every task runs and ends as without hooks, and each panic is counted.
func TestHooksPanics(t *testing.T) {
	for _, tt := range []struct {
		name    string
		attempt func(ctx context.Context, a kernel.AttemptInfo) (context.Context, func(error))
	}{
		{"Attempt", func(context.Context, kernel.AttemptInfo) (context.Context, func(error)) { panic("in Attempt") }},
		{"end", func(ctx context.Context, _ kernel.AttemptInfo) (context.Context, func(error)) {
			return ctx, func(error) { panic("in end") }
		}},
		{"nil context", func(context.Context, kernel.AttemptInfo) (context.Context, func(error)) { return nil, nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rh := &recHooks{attempt: tt.attempt, headers: func(context.Context) map[string]string { panic("in Headers") }}
			st := storekit.NewMemoryStore()
			k := newTestKernel(t, kernel.Config{Hooks: rh, Store: st})
			ran := make(chan struct{}, 1)
			if err := k.Register("k", func(ctx context.Context, _ []byte) error {
				if _, ok := kernel.TaskInfo(ctx); !ok {
					t.Error("TaskInfo() found nothing")
				}
				ran <- struct{}{}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			h, err := k.Submit(t.Context(), kernel.Task{Run: func(ctx context.Context) error { return ctx.Err() }})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(t.Context()); err != nil {
				t.Fatalf("in-memory Wait() = %v", err)
			}
			dh, err := k.SubmitDurable(t.Context(), kernel.DurableTask{Kind: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if err := dh.Wait(t.Context()); err != nil {
				t.Fatalf("durable Wait() = %v", err)
			}
			<-ran
			want := uint64(1) // Headers
			if tt.name != "nil context" {
				want += 2 // one per attempt
			}
			if got := k.Stats().CallbackPanics; got != want {
				t.Errorf("Stats().CallbackPanics = %d, want %d", got, want)
			}
		})
	}
}

// TestHooksDurableHeaders: the headers of a durable submit are stored with each task
// (a copy), handed to its attempts and to the attempts of a later kernel on the store;
// headers over store.HeadersMax are dropped whole.
func TestHooksDurableHeaders(t *testing.T) {
	st := storekit.NewMemoryStore()
	hdr := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	rh := &recHooks{headers: func(ctx context.Context) map[string]string {
		if v, _ := ctx.Value(hookValue("big")).(bool); v {
			return map[string]string{"k": strings.Repeat("v", store.HeadersMax)}
		}
		return hdr
	}}
	k1, err := kernel.New(kernel.Config{Hooks: rh, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	if err := k1.Register("k", func(ctx context.Context, _ []byte) error { started <- struct{}{}; <-ctx.Done(); return ctx.Err() }); err != nil {
		t.Fatal(err)
	}
	hs, err := k1.SubmitDurableMany(t.Context(), []kernel.DurableTask{{Kind: "k"}, {Kind: "k", Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	big, err := k1.SubmitDurable(context.WithValue(t.Context(), hookValue("big"), true), kernel.DurableTask{Kind: "k", Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	hdr["traceparent"] = "changed by the hook after the submit"
	<-started // its first attempt runs: the second kernel runs the second
	want := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for _, h := range hs {
		got, err := st.Get(t.Context(), h.ID())
		if err != nil || !maps.Equal(got.Headers, want) {
			t.Errorf("stored %s: headers %v, %v; want %v", h.ID(), got.Headers, err, want)
		}
	}
	if got, err := st.Get(t.Context(), big.ID()); err != nil || got.Headers != nil {
		t.Errorf("stored %s (headers over HeadersMax): headers %v, %v; want none", big.ID(), got.Headers, err)
	}
	if err := k1.Close(); err != nil {
		t.Fatal(err)
	}
	// A second kernel on the store runs the recovered tasks with their headers.
	rh2 := &recHooks{}
	k2 := newTestKernel(t, kernel.Config{Hooks: rh2, Store: st})
	ran := make(chan struct{})
	if err := k2.Register("k", func(ctx context.Context, _ []byte) error {
		if info, _ := kernel.TaskInfo(ctx); info.ID == hs[0].ID() {
			close(ran)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	<-ran
	as, _ := rh2.snapshot()
	found := false
	for _, a := range as {
		if a.ID == hs[0].ID() {
			found = true
			if !maps.Equal(a.Headers, want) || a.Kind != "k" || a.Attempt != 2 {
				t.Errorf("recovered attempt: %+v; want attempt 2 of kind k with headers %v", a, want)
			}
		}
	}
	if !found {
		t.Errorf("hooks of the second kernel saw %+v, not %s", as, hs[0].ID())
	}
}

// TestHooksHeadersOfClaimedTask: a task of the pool that this kernel claims (another
// process inserted it) reaches the hooks with its stored headers.
func TestHooksHeadersOfClaimedTask(t *testing.T) {
	s := storekit.NewMemoryStore()
	now := time.Now()
	hdr := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	res, err := s.Commit(t.Context(), []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
		ID: "pool-1", Kind: "k", State: store.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now, Headers: hdr,
	}}})
	if err != nil || res[0] != nil {
		t.Fatalf("Commit(insert into the pool) = %v, %v", res, err)
	}
	rh := &recHooks{}
	k := newTestKernel(t, kernel.Config{Store: s, Owner: "claimer", Hooks: rh})
	ran := make(chan struct{})
	if err := k.Register("k", func(context.Context, []byte) error { close(ran); return nil }); err != nil {
		t.Fatal(err)
	}
	<-ran
	as, _ := rh.snapshot()
	if len(as) != 1 || as[0].ID != "pool-1" || !maps.Equal(as[0].Headers, hdr) || as[0].Attempt != 1 {
		t.Fatalf("hooks saw %+v; want pool-1's first attempt with headers %v", as, hdr)
	}
	if st := k.Stats().Store; st.Claimed != 1 {
		t.Errorf("Stats().Store.Claimed = %d, want 1 (the task came by a claim)", st.Claimed)
	}
}

// TestHooksNotChangeable: an Update keeps the hooks; one that changes them is refused
// with a *ConfigError naming Config.Hooks.
func TestHooksNotChangeable(t *testing.T) {
	rh := &recHooks{}
	k := newTestKernel(t, kernel.Config{Hooks: rh})
	if err := k.Update(func(c *kernel.Config) { c.MaxConcurrency = 7 }); err != nil {
		t.Fatalf("Update() of another field = %v", err)
	}
	err := k.Update(func(c *kernel.Config) { c.Hooks = &recHooks{} })
	var ce *kernel.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.Hooks" {
		t.Fatalf("Update() of Hooks = %v, want a *ConfigError for Config.Hooks", err)
	}
}
