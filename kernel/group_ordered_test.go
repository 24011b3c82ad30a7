package kernel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestGroupOrderedRetryHoldsKey: in an Ordered group, a task that fails holds its
// key through its backoff; the key's later tasks start after its retry succeeded.
func TestGroupOrderedRetryHoldsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}, Ordered: true}}})
		tr := newTracker()
		var n atomic.Int32
		failOnce := func(ctx context.Context) error {
			err := tr.run("k", "a", time.Millisecond, nil)(ctx)
			if n.Add(1) == 1 {
				return errors.New("boom")
			}
			return err
		}
		retry := &RetryPolicy{Base: 10 * time.Millisecond, Jitter: JitterNone}
		hs := []*Handle{mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: retry, Run: failOnce})}
		for _, label := range []string{"b", "c", "d"} {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", label, time.Millisecond, nil)}))
		}
		if got := waitAll(t, hs); got[Succeeded] != 4 {
			t.Fatalf("outcomes = %v, want 4 succeeded", got)
		}
		if got, want := strings.Join(tr.order, " "), "a a b c d"; got != want {
			t.Errorf("start order = %s, want %s", got, want)
		}
	})
}

// TestGroupOrderedAcrossPriorities: an Ordered key starts its tasks in the order
// they came, whatever their priorities (TestGroupPriorityOrderWithinKey shows the
// order without Ordered).
func TestGroupOrderedAcrossPriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Ordered: true}}})
		tr := newTracker()
		block := make(chan struct{})
		first := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "first", 0, block)})
		synctest.Wait()
		var hs []*Handle
		for i, p := range []Priority{Low, Normal, High, Low, High, Normal} {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Priority: p, Run: tr.run("k", p.String()+strconv.Itoa(i), time.Millisecond, nil)}))
		}
		synctest.Wait()
		close(block)
		waitAll(t, append(hs, first))
		if got, want := strings.Join(tr.order, " "), "first low0 normal1 high2 low3 high4 normal5"; got != want {
			t.Errorf("order = %s, want %s", got, want)
		}
		if tr.maxKey["k"] != 1 {
			t.Errorf("max running = %d, want 1 (Ordered implies PerKey.Concurrency 1)", tr.maxKey["k"])
		}
	})
}

// TestGroupOrderedFinalFailureFreesKey: a task that fails for good, or is
// cancelled during its backoff, frees its key for the next task.
func TestGroupOrderedFinalFailureFreesKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Ordered: true}}})
		tr := newTracker()
		fail := func(label string) func(context.Context) error {
			return func(ctx context.Context) error {
				_ = tr.run("k", label, 0, nil)(ctx)
				return errors.New("boom")
			}
		}
		twice := &RetryPolicy{MaxAttempts: 2, Base: 10 * time.Millisecond, Jitter: JitterNone}
		slow := &RetryPolicy{MaxAttempts: 5, Base: time.Hour, Jitter: JitterNone}
		a := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: twice, Run: fail("a")})
		b := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: slow, Run: fail("b")})
		c := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "c", 0, nil)})
		if err := a.Wait(context.Background()); err == nil {
			t.Fatal("a.Wait() = nil, want its error")
		}
		synctest.Wait()
		if got := b.State(); got != Retrying {
			t.Fatalf("b.State() = %v, want Retrying", got)
		}
		if got := c.State(); got != Queued {
			t.Fatalf("c.State() = %v while b waits for its retry, want Queued", got)
		}
		b.Cancel()
		if err := c.Wait(context.Background()); err != nil {
			t.Fatalf("c.Wait() = %v", err)
		}
		if got, want := strings.Join(tr.order, " "), "a a b c"; got != want {
			t.Errorf("order = %s, want %s", got, want)
		}
	})
}

// TestGroupOrderedRateLimitedKeepsHead: a RateLimitedError puts the task back at
// the head of its Ordered key.
func TestGroupOrderedRateLimitedKeepsHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Ordered: true}}})
		tr := newTracker()
		var n atomic.Int32
		limited := func(ctx context.Context) error {
			_ = tr.run("k", "a", 0, nil)(ctx)
			if n.Add(1) == 1 {
				return &RateLimitedError{RetryAfter: 20 * time.Millisecond}
			}
			return nil
		}
		hs := []*Handle{mustSubmit(t, k, Task{Group: "g", Key: "k", Run: limited})}
		for _, label := range []string{"b", "c"} {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", label, 0, nil)}))
		}
		if got := waitAll(t, hs); got[Succeeded] != 3 {
			t.Fatalf("outcomes = %v", got)
		}
		if got, want := strings.Join(tr.order, " "), "a a b c"; got != want {
			t.Errorf("order = %s, want %s", got, want)
		}
	})
}

// TestGroupOrderedUpdate: clearing Ordered with Update frees a key held by a
// retrying task at once; setting it orders the tasks waiting.
func TestGroupOrderedUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Ordered: true}}})
		tr := newTracker()
		var n atomic.Int32
		failOnce := func(ctx context.Context) error {
			_ = tr.run("k", "a", 0, nil)(ctx)
			if n.Add(1) == 1 {
				return errors.New("boom")
			}
			return nil
		}
		a := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: &RetryPolicy{Base: time.Hour, Jitter: JitterNone}, Run: failOnce})
		b := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "b", 0, nil)})
		synctest.Wait()
		if got := b.State(); got != Queued {
			t.Fatalf("b.State() = %v while a waits for its retry, want Queued", got)
		}
		if err := k.Update(func(c *Config) { c.Groups["g"] = GroupConfig{PerKey: Limits{Concurrency: 1}} }); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(context.Background()); err != nil {
			t.Fatalf("b.Wait() = %v", err)
		}
		a.Cancel()
		<-a.Done()

		// Set again: the tasks waiting start in the order they came.
		block := make(chan struct{})
		first := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "first", 0, block)})
		synctest.Wait()
		hs := []*Handle{first}
		for i, p := range []Priority{Low, High} {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Priority: p, Run: tr.run("k", p.String()+strconv.Itoa(i), 0, nil)}))
		}
		if err := k.Update(func(c *Config) { c.Groups["g"] = GroupConfig{Ordered: true} }); err != nil {
			t.Fatal(err)
		}
		close(block)
		waitAll(t, hs)
		if got, want := strings.Join(tr.order, " "), "a b first low0 high1"; got != want {
			t.Errorf("order = %s, want %s", got, want)
		}
	})
}

func TestGroupOrderedValidate(t *testing.T) {
	cfg := Config{Groups: map[string]GroupConfig{"g": {Ordered: true, PerKey: Limits{Concurrency: 2}}}}
	var ce *ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != `Config.Groups["g"].PerKey.Concurrency` {
		t.Fatalf("Validate() = %v, want a *ConfigError naming Config.Groups[\"g\"].PerKey.Concurrency", err)
	}
	for _, c := range []int{0, 1} {
		cfg.Groups["g"] = GroupConfig{Ordered: true, PerKey: Limits{Concurrency: c}}
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate() with PerKey.Concurrency %d = %v, want nil", c, err)
		}
	}
}

// TestGroupOrderedKeyIdle: a key held by a task waiting for its retry is not
// forgotten, however long the backoff lasts past KeyIdle.
func TestGroupOrderedKeyIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Ordered: true, KeyIdle: 10 * time.Millisecond}}})
		tr := newTracker()
		var n atomic.Int32
		failOnce := func(ctx context.Context) error {
			_ = tr.run("k", "a", 0, nil)(ctx)
			if n.Add(1) == 1 {
				return errors.New("boom")
			}
			return nil
		}
		a := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: &RetryPolicy{Base: time.Second, Jitter: JitterNone}, Run: failOnce})
		advance(500 * time.Millisecond)
		b := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "b", 0, nil)})
		synctest.Wait()
		if got := b.State(); got != Queued {
			t.Fatalf("b.State() = %v while a waits for its retry, want Queued", got)
		}
		if got := waitAll(t, []*Handle{a, b}); got[Succeeded] != 2 {
			t.Fatalf("outcomes = %v", got)
		}
		if got, want := strings.Join(tr.order, " "), "a a b"; got != want {
			t.Errorf("order = %s, want %s", got, want)
		}
	})
}

// TestGroupOrderedShutdown: Shutdown abandons a retry not yet due, which frees
// its key: the key's next tasks run, and Shutdown returns.
func TestGroupOrderedShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Ordered: true, PerKey: Limits{Rate: Rate{N: 1, Per: 100 * time.Millisecond}}}}})
		fail := func(context.Context) error { return errors.New("boom") }
		a := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: &RetryPolicy{Base: time.Hour, Jitter: JitterNone}, Run: fail})
		b := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: noop})
		advance(10 * time.Millisecond)
		if got := b.State(); got != Queued {
			t.Fatalf("b.State() = %v while a waits for its retry, want Queued", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown() = %v", err)
		}
		if a.State() != Abandoned || b.State() != Succeeded {
			t.Errorf("states = %v, %v, want abandoned, succeeded", a.State(), b.State())
		}
	})
}
