package kernel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeBreaker is a small breaker for the gate's wiring: it opens after trip
// failures in a row, for openFor, then admits one probe at a time.
type fakeBreaker struct {
	trip    int
	openFor time.Duration

	mu       sync.Mutex // the test reads what the loop recorded
	st       BreakerState
	fails    int
	until    time.Time
	gen      uint32
	inflight int
	log      []fakeOutcome
}

type fakeOutcome struct {
	at time.Time
	o  breakerOutcome
}

func (b *fakeBreaker) admit(now time.Time) (bool, uint32, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.st {
	case BreakerOpen:
		if now.Before(b.until) {
			return false, 0, b.until
		}
		b.st = BreakerHalfOpen
		fallthrough
	case BreakerHalfOpen:
		if b.inflight > 0 {
			return false, 0, time.Time{}
		}
		b.inflight++
	}
	return true, b.gen, time.Time{}
}

func (b *fakeBreaker) done(now time.Time, gen uint32, o breakerOutcome) (BreakerState, BreakerState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, fakeOutcome{now, o})
	from := b.st
	if gen != b.gen || o == breakerIgnored {
		if b.st == BreakerHalfOpen && gen == b.gen {
			b.inflight--
		}
		return from, from
	}
	switch {
	case b.st == BreakerHalfOpen && o == breakerFailure:
		b.inflight--
		b.st, b.until, b.gen = BreakerOpen, now.Add(b.openFor), b.gen+1
	case b.st == BreakerHalfOpen:
		b.inflight--
		b.st, b.fails, b.gen = BreakerClosed, 0, b.gen+1
	case o == breakerFailure:
		if b.fails++; b.fails >= b.trip {
			b.st, b.until, b.gen = BreakerOpen, now.Add(b.openFor), b.gen+1
		}
	default:
		b.fails = 0
	}
	return from, b.st
}

func (b *fakeBreaker) state(now time.Time) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.st == BreakerOpen && !now.Before(b.until) {
		return BreakerHalfOpen
	}
	return b.st
}

func (b *fakeBreaker) idle(time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st == BreakerClosed && b.fails == 0
}

func (b *fakeBreaker) outcomes() []fakeOutcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]fakeOutcome(nil), b.log...)
}

// breakerKernel starts a kernel whose groups have fake breakers, and returns a
// function that finds the breaker of a key of group "g".
func breakerKernel(t *testing.T, failFast bool, cfg Config) (*Kernel, func(key string) *fakeBreaker) {
	if cfg.Groups == nil {
		cfg.Groups = map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}, Breaker: &BreakerConfig{FailFast: failFast}}}
	}
	k := newTestKernel(t, cfg)
	k.breakerFunc = func(*BreakerConfig, time.Time) keyBreaker {
		return &fakeBreaker{trip: 3, openFor: time.Second, st: BreakerClosed}
	}
	return k, func(key string) *fakeBreaker {
		synctest.Wait() // the loop is parked: its state may be read
		return k.ls.gate.groups["g"].keys[key].br.(*fakeBreaker)
	}
}

func TestBreakerParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var notes []BreakerState
		k, _ := breakerKernel(t, false, Config{OnEvent: func(e Event) {
			if e.Note == NoteBreaker {
				mu.Lock()
				notes = append(notes, e.Breaker)
				mu.Unlock()
			}
		}, Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}, Breaker: &BreakerConfig{}}}})
		start := time.Now()
		var calls []time.Duration
		failing := func(context.Context) error {
			mu.Lock()
			calls = append(calls, time.Since(start))
			mu.Unlock()
			return errors.New("down")
		}
		var hs []*Handle
		for range 6 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "bad", Retry: &RetryPolicy{MaxAttempts: 1}, Run: failing}))
		}
		good := mustSubmit(t, k, Task{Group: "g", Key: "good", Run: noop})
		if err := good.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		advance(500 * time.Millisecond)
		mu.Lock()
		if len(calls) != 3 {
			t.Fatalf("calls before the open time ended = %d, want 3 (the breaker opened)", len(calls))
		}
		mu.Unlock()
		for _, h := range hs[3:] {
			if s := h.State(); s != Queued {
				t.Fatalf("task behind an open breaker: State() = %v, want queued (parked)", s)
			}
		}
		if st := k.Stats().Groups["g"]; st.OpenBreakers != 1 || st.BreakerOpened != 1 {
			t.Fatalf("Stats = %+v, want 1 open breaker", st)
		}
		waitAll(t, hs)
		mu.Lock()
		defer mu.Unlock()
		// Then one probe a second, each failing: the breaker opens again.
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			if got := calls[3+i]; got < want || got > want+2*time.Millisecond {
				t.Errorf("probe %d at %v, want %v", i, got, want)
			}
		}
		if len(notes) < 2 || notes[0] != BreakerOpen || notes[1] != BreakerOpen {
			t.Errorf("breaker notes = %v, want open first", notes)
		}
	})
}

func TestBreakerFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := breakerKernel(t, true, Config{})
		var hs []*Handle
		for range 6 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "bad", Retry: &RetryPolicy{MaxAttempts: 1}, Run: func(context.Context) error { return errors.New("down") }}))
		}
		waitAll(t, hs)
		n := 0
		for _, h := range hs[3:] {
			if errors.Is(h.Err(), ErrCircuitOpen) && h.State() == Failed && h.Attempts() == 0 {
				n++
			}
		}
		if n != 3 {
			t.Fatalf("%d tasks failed fast with ErrCircuitOpen without an attempt, want 3", n)
		}
		synctest.Wait()
		if st := k.Stats().Groups["g"]; st.CircuitOpenFailed != 3 {
			t.Errorf("CircuitOpenFailed = %d, want 3", st.CircuitOpenFailed)
		}
	})
}

// TestBreakerOutcomes: what the breaker hears of each kind of end, and when.
func TestBreakerOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, br := breakerKernel(t, false, Config{Groups: map[string]GroupConfig{"g": {Breaker: &BreakerConfig{
			SlowCall:  50 * time.Millisecond,
			IsFailure: func(err error) bool { return err.Error() != "not found" },
		}}}})
		start := time.Now()
		run := func(fn func(context.Context) error, timeout time.Duration) *Handle {
			h := mustSubmit(t, k, Task{Group: "g", Key: "k", Timeout: timeout, Retry: &RetryPolicy{MaxAttempts: 1}, Run: fn})
			<-h.Done()
			synctest.Wait()
			return h
		}
		run(noop, 0)
		run(stubborn(100*time.Millisecond), 0)                                 // slow
		run(func(context.Context) error { return errors.New("not found") }, 0) // IsFailure false
		run(func(context.Context) error { return errors.New("boom") }, 0)      // failure
		var once sync.Once
		run(func(context.Context) error {
			var err error
			once.Do(func() { err = &RateLimitedError{} })
			return err
		}, 0)
		run(stubborn(time.Second), 10*time.Millisecond)                                          // judged at its timeout
		hung := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: gate(make(chan struct{})).run}) // canceled: ignored
		synctest.Wait()
		hung.Cancel()
		<-hung.Done()
		synctest.Wait()
		got := br("k").outcomes()
		want := []breakerOutcome{breakerSuccess, breakerSlow, breakerSuccess, breakerFailure, breakerIgnored, breakerSuccess, breakerFailure, breakerIgnored}
		if len(got) < len(want) {
			t.Fatalf("outcomes = %v, want %v", got, want)
		}
		for i, w := range want {
			if got[i].o != w {
				t.Errorf("outcome %d = %d, want %d", i, got[i].o, w)
			}
		}
		// The timed-out attempt was judged at its timeout, not when it returned.
		if d := got[6].at.Sub(start); d > 200*time.Millisecond {
			t.Errorf("timed-out attempt judged at %v, want at its timeout", d)
		}
	})
}
