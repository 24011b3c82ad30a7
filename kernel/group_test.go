package kernel

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// tracker counts the running tasks per key and in all, and keeps the maxima.
type tracker struct {
	mu      sync.Mutex
	running map[string]int
	maxKey  map[string]int
	total   int
	maxAll  int
	starts  map[string][]time.Duration
	order   []string
	t0      time.Time
	started atomic.Int64
}

func newTracker() *tracker {
	return &tracker{running: map[string]int{}, maxKey: map[string]int{}, starts: map[string][]time.Duration{}, t0: time.Now()}
}

// run returns a task function for key that runs for d (virtual time) or until
// release is closed (if not nil).
func (tr *tracker) run(key, label string, d time.Duration, release chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		tr.mu.Lock()
		tr.running[key]++
		tr.total++
		tr.maxKey[key] = max(tr.maxKey[key], tr.running[key])
		tr.maxAll = max(tr.maxAll, tr.total)
		tr.starts[key] = append(tr.starts[key], time.Since(tr.t0))
		tr.order = append(tr.order, label)
		tr.mu.Unlock()
		tr.started.Add(1)
		if release != nil {
			select {
			case <-release:
			case <-ctx.Done():
			}
		} else if d > 0 {
			tm := time.NewTimer(d)
			<-tm.C
		}
		tr.mu.Lock()
		tr.running[key]--
		tr.total--
		tr.mu.Unlock()
		return nil
	}
}

func TestGroupConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		g     GroupConfig
		field string
	}{
		{"negative concurrency", GroupConfig{PerKey: Limits{Concurrency: -1}}, `Config.Groups["g"].PerKey.Concurrency`},
		{"negative total concurrency", GroupConfig{Total: Limits{Concurrency: -1}}, `Config.Groups["g"].Total.Concurrency`},
		{"negative rate", GroupConfig{PerKey: Limits{Rate: Rate{N: -1}}}, `Config.Groups["g"].PerKey.Rate.N`},
		{"rate without per", GroupConfig{PerKey: Limits{Rate: Rate{N: 5}}}, `Config.Groups["g"].PerKey.Rate.Per`},
		{"per without rate", GroupConfig{Total: Limits{Rate: Rate{Per: time.Second}}}, `Config.Groups["g"].Total.Rate.Per`},
		{"burst without rate", GroupConfig{PerKey: Limits{Rate: Rate{Burst: 3}}}, `Config.Groups["g"].PerKey.Rate.Burst`},
		{"rate too fine", GroupConfig{PerKey: Limits{Rate: Rate{N: 10, Per: time.Nanosecond}}}, `Config.Groups["g"].PerKey.Rate.N`},
		{"negative burst", GroupConfig{PerKey: Limits{Rate: Rate{N: 1, Per: time.Second, Burst: -1}}}, `Config.Groups["g"].PerKey.Rate.Burst`},
		{"huge burst", GroupConfig{PerKey: Limits{Rate: Rate{N: 1, Per: time.Second, Burst: rateBurstMax + 1}}}, `Config.Groups["g"].PerKey.Rate.Burst`},
		{"negative max waiting", GroupConfig{MaxWaiting: -1}, `Config.Groups["g"].MaxWaiting`},
		{"negative key idle", GroupConfig{KeyIdle: -time.Second}, `Config.Groups["g"].KeyIdle`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Groups: map[string]GroupConfig{"g": tt.g}}
			err := cfg.Validate()
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate() = %v, want a *ConfigError", err)
			}
			if ce.Field != tt.field {
				t.Errorf("Validate() field = %q, want %q (%v)", ce.Field, tt.field, err)
			}
			if _, err := New(cfg); err == nil {
				t.Errorf("New() = nil error, want %v", tt.field)
			}
		})
	}
	for _, name := range []string{"", "a b", strings.Repeat("x", nameMax+1)} {
		cfg := Config{Groups: map[string]GroupConfig{name: {}}}
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate() with group name %q = nil, want an error", name)
		}
	}
	good := Config{Groups: map[string]GroupConfig{"up-stream.1": {
		PerKey: Limits{Concurrency: 5, Rate: Rate{N: 100, Per: time.Second, Burst: 10}},
		Total:  Limits{Concurrency: 50, Rate: Rate{N: 1000, Per: time.Second}}, MaxWaiting: 10, KeyIdle: time.Second,
	}}}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestGroupSubmitRefusals(t *testing.T) {
	k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {}}})
	tests := []struct {
		name  string
		task  Task
		field string
	}{
		{"unknown group", Task{Group: "nope", Run: noop}, "Task.Group"},
		{"key without group", Task{Key: "k", Run: noop}, "Task.Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, submit := range []func() error{
				func() error { _, err := k.TrySubmit(tt.task); return err },
				func() error { _, err := k.Submit(context.Background(), tt.task); return err },
				func() error { return k.TryGo(tt.task) },
				func() error { return k.Go(context.Background(), tt.task) },
			} {
				err := submit()
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Field != tt.field {
					t.Errorf("submit = %v, want a *ConfigError for %s", err, tt.field)
				}
			}
		})
	}
}

// TestGroupConfigCopied checks that New and Update copy Config.Groups.
func TestGroupConfigCopied(t *testing.T) {
	groups := map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}}
	k := newTestKernel(t, Config{Groups: groups})
	groups["h"] = GroupConfig{}
	if _, err := k.TrySubmit(Task{Group: "h", Run: noop}); err == nil {
		t.Fatal("TrySubmit() to a group added to the caller's map after New = nil, want an error")
	}
	if err := k.Update(func(c *Config) { c.Groups["h"] = GroupConfig{} }); err != nil {
		t.Fatalf("Update() = %v", err)
	}
	if h, err := k.TrySubmit(Task{Group: "h", Run: noop}); err != nil {
		t.Fatalf("TrySubmit() to a group added by Update = %v", err)
	} else if err := h.Wait(context.Background()); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if len(groups) != 2 {
		t.Fatalf("Update changed the caller's map: %v", groups)
	}
}

func TestGroupConcurrencyLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 50, Groups: map[string]GroupConfig{
			"g": {PerKey: Limits{Concurrency: 2}, Total: Limits{Concurrency: 5}},
		}})
		tr := newTracker()
		var hs []*Handle
		for i := range 40 {
			key := string(rune('a' + i%4))
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: key, Run: tr.run(key, "", 10*time.Millisecond, nil)}))
		}
		// Ungrouped work runs beside the group, unaffected.
		for range 20 {
			hs = append(hs, mustSubmit(t, k, Task{Run: tr.run("none", "", 10*time.Millisecond, nil)}))
		}
		synctest.Wait()
		if got := tr.maxKey["none"]; got != 20 {
			t.Errorf("ungrouped tasks running at once = %d, want 20", got)
		}
		st := k.Stats().Groups["g"]
		if st.Running != 5 || st.Waiting != 35 {
			t.Errorf("Stats().Groups[g] = %+v, want Running 5, Waiting 35", st)
		}
		if got := waitAll(t, hs); got[Succeeded] != 60 {
			t.Fatalf("outcomes = %v, want 60 succeeded", got)
		}
		for _, key := range []string{"a", "b", "c", "d"} {
			if got := tr.maxKey[key]; got != 2 {
				t.Errorf("max running of key %s = %d, want 2", key, got)
			}
		}
		if tr.maxAll > 5+20 {
			t.Errorf("max running = %d, want <= 25", tr.maxAll)
		}
	})
}

// TestGroupBlockedKeyDoesNotDelayOthers: a key whose tasks hang holds its own
// permits only; other keys' tasks start at once.
func TestGroupBlockedKeyDoesNotDelayOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 10, Groups: map[string]GroupConfig{
			"g": {PerKey: Limits{Concurrency: 3}},
		}})
		tr := newTracker()
		hang := make(chan struct{})
		var bad []*Handle
		for range 100 {
			bad = append(bad, mustSubmit(t, k, Task{Group: "g", Key: "bad", Run: tr.run("bad", "", 0, hang)}))
		}
		synctest.Wait()
		start := time.Now()
		var good []*Handle
		for i := range 20 {
			key := "good" + strconv.Itoa(i%5)
			good = append(good, mustSubmit(t, k, Task{Group: "g", Key: key, Priority: Low, Run: tr.run(key, "", time.Millisecond, nil)}))
		}
		waitAll(t, good)
		if d := time.Since(start); d > 5*time.Millisecond {
			t.Errorf("good keys took %v behind a hanging key, want about 4 ms", d)
		}
		if got := tr.maxKey["bad"]; got != 3 {
			t.Errorf("max running of the hanging key = %d, want 3", got)
		}
		close(hang)
		waitAll(t, bad)
	})
}

func TestGroupPriorityOrderWithinKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}}})
		tr := newTracker()
		block := make(chan struct{})
		first := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "first", 0, block)})
		synctest.Wait()
		var hs []*Handle
		for i, p := range []Priority{Low, Normal, High, Low, High, Normal} {
			label := p.String() + strconv.Itoa(i)
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Priority: p, Run: tr.run("k", label, time.Millisecond, nil)}))
		}
		synctest.Wait()
		close(block)
		waitAll(t, append(hs, first))
		want := "first high2 high4 normal1 normal5 low0 low3"
		if got := strings.Join(tr.order, " "); got != want {
			t.Errorf("order = %s, want %s", got, want)
		}
	})
}

func TestGroupRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{
			"even":  {PerKey: Limits{Rate: Rate{N: 10, Per: time.Second}}},
			"burst": {PerKey: Limits{Rate: Rate{N: 10, Per: time.Second, Burst: 5}}},
		}})
		tr := newTracker()
		var hs []*Handle
		for range 30 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "even", Key: "k", Run: tr.run("even", "", 0, nil)}))
			hs = append(hs, mustSubmit(t, k, Task{Group: "burst", Key: "k", Run: tr.run("burst", "", 0, nil)}))
		}
		waitAll(t, hs)
		even := tr.starts["even"]
		for i := 1; i < len(even); i++ {
			if gap := even[i] - even[i-1]; gap < 100*time.Millisecond || gap > 102*time.Millisecond {
				t.Errorf("even start %d came %v after the previous, want 100 ms", i, gap)
			}
		}
		burst := tr.starts["burst"]
		for i := range 5 {
			if burst[i] > time.Millisecond {
				t.Errorf("burst start %d at %v, want at once", i, burst[i])
			}
		}
		if last := burst[29]; last < 2500*time.Millisecond || last > 2502*time.Millisecond {
			t.Errorf("burst's 30th start at %v, want 2.5 s", last)
		}
		if st := k.Stats().Groups["even"]; st.Throttles == 0 {
			t.Errorf("Stats().Groups[even].Throttles = 0, want > 0")
		}
	})
}

func TestGroupMaxWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}, MaxWaiting: 3}}})
		block := make(chan struct{})
		g := gate(block)
		var hs []*Handle
		hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: g.run}))
		synctest.Wait() // it runs: not waiting any more
		for range 3 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: g.run}))
		}
		if _, err := k.TrySubmit(Task{Group: "g", Key: "k", Run: g.run}); !errors.Is(err, ErrGroupFull) {
			t.Fatalf("TrySubmit() past MaxWaiting = %v, want ErrGroupFull", err)
		}
		if err := k.TryGo(Task{Group: "g", Key: "k", Delay: time.Second, Run: g.run}); !errors.Is(err, ErrGroupFull) {
			t.Fatalf("TryGo() past MaxWaiting = %v, want ErrGroupFull", err)
		}
		// Another key has room.
		hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "other", Run: g.run}))
		hs[1].Cancel()
		synctest.Wait()
		hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: g.run}))
		g.open()
		got := waitAll(t, hs)
		if got[Succeeded] != 5 || got[Canceled] != 1 {
			t.Fatalf("outcomes = %v, want 5 succeeded, 1 canceled", got)
		}
		d := k.rc.Load().groups["g"]
		if n := d.counts.Keys(); n != 0 {
			t.Errorf("waiting counts hold %d keys after all ended, want 0", n)
		}
	})
}

func TestGroupRateLimitedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 2}}}})
		start := time.Now()
		var calls atomic.Int32
		var at []time.Duration
		var mu sync.Mutex
		run := func(ctx context.Context) error {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
			if calls.Add(1) <= 3 {
				return &RateLimitedError{RetryAfter: 2 * time.Second}
			}
			return nil
		}
		h := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: &RetryPolicy{MaxAttempts: 1}, Run: run})
		other := mustSubmit(t, k, Task{Group: "g", Key: "k2", Run: noop})
		if err := h.Wait(context.Background()); err != nil {
			t.Fatalf("Wait() = %v, want nil (rate-limited attempts are not spent)", err)
		}
		if err := other.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if h.Attempts() != 1 {
			t.Errorf("Attempts() = %d, want 1", h.Attempts())
		}
		want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}
		for i, w := range want {
			if at[i] < w || at[i] > w+2*time.Millisecond {
				t.Errorf("call %d at %v, want %v", i, at[i], w)
			}
		}
		if st := k.Stats(); st.Groups["g"].RateLimited != 3 || st.ByPriority.Normal.Retried != 0 {
			t.Errorf("RateLimited = %d, Retried = %d, want 3 and 0", st.Groups["g"].RateLimited, st.ByPriority.Normal.Retried)
		}
	})
}

func TestGroupRetryReentersGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}}})
		tr := newTracker()
		var n atomic.Int32
		failOnce := func(ctx context.Context) error {
			if n.Add(1) == 1 {
				return errors.New("boom")
			}
			return tr.run("k", "", 10*time.Millisecond, nil)(ctx)
		}
		var hs []*Handle
		hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: &RetryPolicy{Base: time.Millisecond, Jitter: JitterNone}, Run: failOnce}))
		for range 5 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "", 10*time.Millisecond, nil)}))
		}
		if got := waitAll(t, hs); got[Succeeded] != 6 {
			t.Fatalf("outcomes = %v", got)
		}
		if tr.maxKey["k"] != 1 {
			t.Errorf("max running = %d, want 1", tr.maxKey["k"])
		}
	})
}

func TestGroupZombieKeepsPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}}})
		start := time.Now()
		h1 := mustSubmit(t, k, Task{Group: "g", Key: "k", Timeout: 10 * time.Millisecond, Retry: &RetryPolicy{MaxAttempts: 1}, Run: stubborn(time.Second)})
		var at time.Duration
		h2 := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: func(context.Context) error { at = time.Since(start); return nil }})
		if err := h1.Wait(context.Background()); !errors.Is(err, ErrTimeout) {
			t.Fatalf("Wait() = %v, want ErrTimeout", err)
		}
		if err := h2.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if at < time.Second {
			t.Errorf("second task started at %v, want after the zombie returned at 1 s", at)
		}
	})
}

func TestGroupKeyIdleForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 100, Capacity: ByPriority[int]{Normal: 200_000}, DegradeAt: 1, Groups: map[string]GroupConfig{
			"g": {PerKey: Limits{Concurrency: 1, Rate: Rate{N: 1, Per: time.Second}}, KeyIdle: 10 * time.Second},
		}})
		const keys = 100_000
		for i := range keys {
			if err := k.TryGo(Task{Group: "g", Key: "key-" + strconv.Itoa(i), Run: noop}); err != nil {
				t.Fatal(err)
			}
		}
		for k.Stats().ByPriority.Normal.Succeeded < keys {
			advance(time.Millisecond)
		}
		if got := k.Stats().Groups["g"].Keys; got != keys {
			t.Errorf("Keys right after = %d, want %d", got, keys)
		}
		advance(16 * time.Second)
		advance(time.Second)
		if got := k.Stats().Groups["g"].Keys; got != 0 {
			t.Errorf("Keys after KeyIdle = %d, want 0", got)
		}
	})
}

func TestGroupUpdateLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}}})
		tr := newTracker()
		release := make(chan struct{})
		var hs []*Handle
		for range 6 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "", 0, release)}))
		}
		synctest.Wait()
		if n := tr.started.Load(); n != 1 {
			t.Fatalf("started = %d, want 1", n)
		}
		if err := k.Update(func(c *Config) { c.Groups["g"] = GroupConfig{PerKey: Limits{Concurrency: 3}} }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := tr.started.Load(); n != 3 {
			t.Fatalf("started after raising the limit = %d, want 3", n)
		}
		// A group removed keeps serving its tasks; new ones are refused.
		if err := k.Update(func(c *Config) { delete(c.Groups, "g") }); err != nil {
			t.Fatal(err)
		}
		if _, err := k.TrySubmit(Task{Group: "g", Key: "k", Run: noop}); err == nil {
			t.Fatal("TrySubmit() to a removed group = nil, want an error")
		}
		close(release)
		if got := waitAll(t, hs); got[Succeeded] != 6 {
			t.Fatalf("outcomes = %v", got)
		}
	})
}

// TestGroupCapacityCountsGate: tasks waiting for a permit hold their room.
func TestGroupCapacityCountsGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{
			Capacity: ByPriority[int]{Normal: 4}, DegradeAt: 1,
			Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}},
		})
		release := make(chan struct{})
		g := gate(release)
		var hs []*Handle
		for range 5 { // one runs, four wait at the gate
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: g.run}))
			synctest.Wait()
		}
		if _, err := k.TrySubmit(Task{Group: "g", Key: "other", Run: noop}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("TrySubmit() with the gate full = %v, want ErrQueueFull", err)
		}
		g.open()
		waitAll(t, hs)
	})
}

// TestGroupIsFailureRecovered: BreakerConfig.IsFailure runs on the executor, and
// a panic in it is recovered and counted.
func TestGroupIsFailureRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Breaker: &BreakerConfig{
			IsFailure: func(error) bool { panic("bad classifier") },
		}}}})
		h := mustSubmit(t, k, Task{Group: "g", Key: "k", Retry: &RetryPolicy{MaxAttempts: 1}, Run: func(context.Context) error { return errors.New("boom") }})
		if err := h.Wait(context.Background()); err == nil || err.Error() != "boom" {
			t.Fatalf("Wait() = %v, want boom", err)
		}
		if n := k.Stats().CallbackPanics; n != 1 {
			t.Errorf("CallbackPanics = %d, want 1", n)
		}
	})
}

// TestGroupTotalFair: keys that wait for the group's total take turns: a key
// with a long backlog does not starve one that arrives later.
func TestGroupTotalFair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {Total: Limits{Concurrency: 1}}}})
		tr := newTracker()
		var hs []*Handle
		for range 20 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "a", Run: tr.run("a", "a", time.Millisecond, nil)}))
		}
		synctest.Wait()
		for range 3 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "b", Run: tr.run("b", "b", time.Millisecond, nil)}))
		}
		waitAll(t, hs)
		if got, want := strings.Join(tr.order[:7], " "), "a a b a b a b"; got != want {
			t.Errorf("order = %s, want %s (turns)", got, want)
		}
		if tr.maxAll != 1 {
			t.Errorf("max running = %d, want 1", tr.maxAll)
		}
	})
}

func TestGroupBatchAndMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 2}, MaxWaiting: 10}}})
		tr := newTracker()
		items := make([]int, 8)
		out, err := Map(context.Background(), k, items, func(ctx context.Context, _ int) (int, error) {
			return 1, tr.run("k", "", time.Millisecond, nil)(ctx)
		}, &BatchOptions{Group: "g", Key: "k"})
		if err != nil || len(out) != 8 || out[7] != 1 {
			t.Fatalf("Map() = %v, %v", out, err)
		}
		if tr.maxKey["k"] != 2 {
			t.Errorf("members running at once = %d, want 2 (PerKey.Concurrency)", tr.maxKey["k"])
		}
		// Past MaxWaiting, a flush submits what fits and fails with ErrGroupFull.
		release := make(chan struct{})
		b := k.NewBatch(context.Background(), &BatchOptions{Group: "g", Key: "k2"})
		for range 15 {
			b.Go(gate(release).run)
		}
		if err := b.Flush(); !errors.Is(err, ErrGroupFull) {
			t.Fatalf("Flush() past MaxWaiting = %v, want ErrGroupFull", err)
		}
		close(release)
		if err := b.Wait(); !errors.Is(err, ErrGroupFull) {
			t.Fatalf("Wait() = %v, want ErrGroupFull", err)
		}
		// MaxWaiting counts the tasks waiting for a permit: 10 of them, and up to
		// PerKey.Concurrency more if the loop granted permits during the flush.
		if st := k.Stats().ByPriority.Normal; st.Succeeded < 18 || st.Succeeded > 20 {
			t.Errorf("succeeded = %d, want 8 + 10 to 8 + 12", st.Succeeded)
		}
		_, err = Map(context.Background(), k, items, func(context.Context, int) (int, error) { return 0, nil }, &BatchOptions{Group: "nope"})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "BatchOptions.Group" {
			t.Errorf("Map() with an unknown group = %v, want a ConfigError for BatchOptions.Group", err)
		}
	})
}

// TestGroupRateOffTick checks that a backlogged key keeps its rate when its
// interval is not a whole number of ticks: the wheel wakes the key up to a tick
// after its token is due, and the next token is counted from the due time, not
// from the late grant, so the lateness does not add up.
func TestGroupRateOffTick(t *testing.T) {
	tests := []struct {
		name string
		rate Rate
		tick time.Duration
	}{
		{"3 per 20ms", Rate{N: 3, Per: 20 * time.Millisecond}, 0},
		{"1 per 5ms tick 4ms", Rate{N: 1, Per: 5 * time.Millisecond}, 4 * time.Millisecond},
		{"100/s tick 3ms", Rate{N: 100, Per: time.Second}, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newTestKernel(t, Config{Tick: tt.tick, Groups: map[string]GroupConfig{
					"g": {PerKey: Limits{Rate: tt.rate}},
				}})
				tick := cmp.Or(tt.tick, tickDefault)
				iv := tt.rate.Per / time.Duration(tt.rate.N)
				const n = 60
				tr := newTracker()
				var hs []*Handle
				for range n {
					hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", "", 0, nil)}))
				}
				waitAll(t, hs)
				s := tr.starts["k"]
				for i, at := range s {
					want := time.Duration(i) * iv
					if at < want || at > want+2*tick {
						t.Errorf("start %d at %v, want in [%v, %v]", i, at, want, want+2*tick)
					}
				}
			})
		})
	}
}

// TestGroupRateSpacesStarts holds a key's and a group's rates to the tasks' starts:
// the slot is busy while the key's tasks come, its Low task takes the key's token
// and waits in its bucket, and High tasks of the key come meanwhile. Once the slot
// frees, a window of the rate's Per holds at most N starts and one more, the late
// one (Rate's doc): the rate grants no other permit while one waits to start, so
// the backlog does not release the High tasks' tokens in a bunch.
func TestGroupRateSpacesStarts(t *testing.T) {
	for _, tc := range []struct {
		name string
		gc   GroupConfig
		keys int // the High tasks' keys
	}{
		{"per key", GroupConfig{PerKey: Limits{Rate: Rate{N: 3, Per: 300 * time.Millisecond}}}, 1},
		{"total", GroupConfig{Total: Limits{Rate: Rate{N: 3, Per: 300 * time.Millisecond}}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newTestKernel(t, Config{MaxConcurrency: 1, Groups: map[string]GroupConfig{"g": tc.gc}})
				tr := newTracker()
				blocker := mustSubmit(t, k, Task{Priority: Low, Run: tr.run("blocker", "", 250*time.Millisecond, nil)})
				synctest.Wait()
				hs := []*Handle{blocker, mustSubmit(t, k, Task{Group: "g", Key: "k0", Priority: Low, Run: tr.run("g", "low", 0, nil)})}
				for i := range 4 {
					advance(60 * time.Millisecond)
					hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k" + strconv.Itoa(i%tc.keys), Priority: High, Run: tr.run("g", "high", 0, nil)}))
				}
				waitAll(t, hs)
				starts := tr.starts["g"]
				if len(starts) != 5 {
					t.Fatalf("%d starts of the group's tasks, want 5", len(starts))
				}
				if starts[0] < 250*time.Millisecond {
					t.Errorf("first start at %v, before the slot freed (250 ms)", starts[0])
				}
				for i := range starts {
					n := 0
					for _, s := range starts[i:] {
						if s-starts[i] < 300*time.Millisecond {
							n++
						}
					}
					if n > 3+1 {
						t.Errorf("%d starts within 300 ms from %v (starts %v), want at most 3 and a late one", n, starts[i], starts)
					}
				}
			})
		})
	}
}
