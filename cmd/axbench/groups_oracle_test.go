package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/axsched/ax/kernel"
)

// The differential tests of ax's groups against golang.org/x/time/rate and
// sony/gobreaker, through the kernel's public API, under testing/synctest so
// that the kernel, the limiter and the breaker read one fake clock.

// errUpstream is the failure of a task the breaker tests make fail.
var errUpstream = errors.New("upstream failed")

// stop shuts k down; in a synctest bubble, fake time lets it finish.
func stop(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown() = %v", err)
	}
	_ = k.Close()
}

// TestGroupRateMatchesLimiter submits instant tasks of one key in bursts at
// fake times and checks that each starts when an x/time/rate.Limiter of the same
// rate and burst, asked for a reservation at the task's submission (in order),
// lets it: within one tick of the kernel's wheel, never before.
func TestGroupRateMatchesLimiter(t *testing.T) {
	const tick = time.Millisecond // the kernel's default Config.Tick
	tests := []struct {
		name   string
		rate   kernel.Rate
		bursts []int           // tasks submitted at once, one batch after another
		gaps   []time.Duration // the fake time between batches
	}{
		{"100/s burst 1", kernel.Rate{N: 100, Per: time.Second}, []int{50}, nil},
		{"10/s burst 5", kernel.Rate{N: 10, Per: time.Second, Burst: 5}, []int{20, 3, 12}, []time.Duration{300 * time.Millisecond, 3 * time.Second}},
		{"3 per 30ms burst 2", kernel.Rate{N: 3, Per: 30 * time.Millisecond, Burst: 2}, []int{7, 7, 1, 9}, []time.Duration{5 * time.Millisecond, 45 * time.Millisecond, 13 * time.Millisecond}},
		{"3 per 20ms burst 1 off the tick", kernel.Rate{N: 3, Per: 20 * time.Millisecond}, []int{40}, nil},
		{"1 per 7ms burst 3 refilled", kernel.Rate{N: 1, Per: 7 * time.Millisecond, Burst: 3}, []int{4, 2, 6}, []time.Duration{time.Second, 15 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k, err := kernel.New(kernel.Config{
					Groups: map[string]kernel.GroupConfig{"g": {PerKey: kernel.Limits{Rate: tt.rate}}},
				})
				if err != nil {
					t.Fatalf("kernel.New() error = %v", err)
				}
				defer stop(t, k)
				burst := max(tt.rate.Burst, 1)
				lim := rate.NewLimiter(rate.Every(tt.rate.Per/time.Duration(tt.rate.N)), burst)
				var mu sync.Mutex
				var got []time.Time
				var want []time.Time
				for b, n := range tt.bursts {
					if b > 0 {
						advance(tt.gaps[b-1])
					}
					now := time.Now()
					for range n {
						r := lim.ReserveN(now, 1)
						if !r.OK() {
							t.Fatal("ReserveN() not OK")
						}
						want = append(want, now.Add(r.DelayFrom(now)))
						err := k.Go(t.Context(), kernel.Task{Group: "g", Key: "a", Run: func(context.Context) error {
							mu.Lock()
							got = append(got, time.Now())
							mu.Unlock()
							return nil
						}})
						if err != nil {
							t.Fatalf("Go() error = %v", err)
						}
					}
				}
				// Let every task start: the last is due within a few seconds.
				advance(time.Until(want[len(want)-1]) + time.Second)
				mu.Lock()
				defer mu.Unlock()
				if len(got) != len(want) {
					t.Fatalf("%d tasks started, want %d", len(got), len(want))
				}
				for i := range want {
					if d := got[i].Sub(want[i]); d < 0 || d > tick {
						t.Errorf("task %d started at %v, limiter allows %v: off by %v (want 0 to %v)",
							i, got[i].Sub(want[0]), want[i].Sub(want[0]), d, tick)
					}
				}
			})
		})
	}
}

// breakerCase is one configuration the breaker test drives through random
// outcome sequences.
type breakerCase struct {
	name     string
	minCalls int
	ratio    float64
	probes   int
	pFail    float64 // the chance of a failure in a closed spell
	pFailHO  float64 // …and in a half-open one
}

// TestGroupBreakerMatchesGobreaker drives one key's breaker and a gobreaker
// CircuitBreaker with the same outcomes at the same fake times, one attempt at
// a time (PerKey.Concurrency 1), and compares their states after each.
//
// The configurations are mapped so that the two agree by construction:
// MaxRequests = Probes, Timeout = OpenFor, ReadyToTrip = "Requests >= MinCalls
// and TotalFailures/Requests >= FailureRatio". Three differences by design
// are kept out of the sequences:
//   - ax doubles the open period each time a half-open breaker reopens;
//     MaxOpenFor = OpenFor disables that, matching gobreaker's fixed Timeout.
//   - ax's window slides (10 buckets over Window) where gobreaker with Interval
//     0 never clears its counts while closed: Window is an hour, far beyond a
//     sequence's span, so that no outcome leaves ax's window either.
//   - ax checks the trip condition after every outcome, gobreaker only after a
//     failure: a success that brings the window to MinCalls with the failure
//     ratio already reached trips ax and not gobreaker. Such a success is
//     turned into a failure (which trips both).
//
// While open, the test waits out OpenFor and a millisecond before the next
// attempt (gobreaker would refuse it; ax would park it until then): at exactly
// OpenFor ax is half-open and gobreaker, whose expiry must be before now, still
// open. The kernel's state is the last
// breaker change its events reported (Event.Note == NoteBreaker), turned
// half-open once OpenFor has passed since an open, as ax half-opens lazily at
// the next admission.
func TestGroupBreakerMatchesGobreaker(t *testing.T) {
	const (
		openFor = 500 * time.Millisecond
		steps   = 60
		seqs    = 8
	)
	if !breakerTrips(t) {
		t.Fatal("a failure does not trip a breaker of MinCalls 1")
	}
	tests := []breakerCase{
		{"min 5 ratio 0.5 probes 1", 5, 0.5, 1, 0.5, 0.5},
		{"min 1 ratio 0.34 probes 2", 1, 0.34, 2, 0.3, 0.3},
		{"min 10 ratio 0.6 probes 3", 10, 0.6, 3, 0.7, 0.2},
		{"min 3 ratio 1 probes 1", 3, 1, 1, 0.8, 0.5},
	}
	for _, tt := range tests {
		trips, closes := 0, 0
		for seed := range uint64(seqs) {
			t.Run(fmt.Sprintf("%s seed %d", tt.name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tr, cl := runBreakerDiff(t, tt, seed, openFor, steps)
					trips += tr
					closes += cl
				})
			})
		}
		// The sequences must exercise the transitions, not only agree.
		if trips == 0 || closes == 0 {
			t.Errorf("%s: %d trips and %d recoveries over %d sequences; want some of each", tt.name, trips, closes, seqs)
		}
	}
}

// breakerTrips reports whether one failure trips a breaker of MinCalls 1 and
// FailureRatio 1, as any working breaker does.
func breakerTrips(t *testing.T) bool {
	tripped := false
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		k, err := kernel.New(kernel.Config{
			Groups: map[string]kernel.GroupConfig{"g": {Breaker: &kernel.BreakerConfig{MinCalls: 1, FailureRatio: 1}}},
			OnEvent: func(ev kernel.Event) {
				if ev.Note == kernel.NoteBreaker {
					mu.Lock()
					tripped = true
					mu.Unlock()
				}
			},
		})
		if err != nil {
			t.Fatalf("kernel.New() error = %v", err)
		}
		defer stop(t, k)
		h, err := k.Submit(t.Context(), kernel.Task{
			Group: "g", Key: "a", Retry: &kernel.RetryPolicy{MaxAttempts: 1},
			Run: func(context.Context) error { return errUpstream },
		})
		if err != nil {
			t.Fatalf("Submit() error = %v", err)
		}
		<-h.Done()
		synctest.Wait()
	})
	return tripped
}

// runBreakerDiff runs one sequence and returns how often the breakers tripped
// from closed and closed again from half-open.
func runBreakerDiff(t *testing.T, tc breakerCase, seed uint64, openFor time.Duration, steps int) (trips, closes int) {
	var mu sync.Mutex
	type change struct {
		at    time.Time
		state kernel.BreakerState
	}
	var changes []change
	k, err := kernel.New(kernel.Config{
		Groups: map[string]kernel.GroupConfig{"g": {
			PerKey: kernel.Limits{Concurrency: 1},
			Breaker: &kernel.BreakerConfig{
				Window: time.Hour, MinCalls: tc.minCalls, FailureRatio: tc.ratio,
				OpenFor: openFor, MaxOpenFor: openFor, Probes: tc.probes,
			},
		}},
		OnEvent: func(ev kernel.Event) {
			if ev.Note == kernel.NoteBreaker {
				mu.Lock()
				changes = append(changes, change{ev.Time, ev.Breaker})
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatalf("kernel.New() error = %v", err)
	}
	defer stop(t, k)
	ready := func(c gobreaker.Counts) bool {
		return c.Requests >= uint32(tc.minCalls) && float64(c.TotalFailures)/float64(c.Requests) >= tc.ratio
	}
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name: "g/a", MaxRequests: uint32(tc.probes), Timeout: openFor, ReadyToTrip: ready,
	})
	kernelState := func() kernel.BreakerState {
		mu.Lock()
		defer mu.Unlock()
		if len(changes) == 0 {
			return kernel.BreakerClosed
		}
		last := changes[len(changes)-1]
		if last.state == kernel.BreakerOpen && !time.Now().Before(last.at.Add(openFor)) {
			return kernel.BreakerHalfOpen
		}
		return last.state
	}
	oracleState := func() kernel.BreakerState {
		switch cb.State() {
		case gobreaker.StateOpen:
			return kernel.BreakerOpen
		case gobreaker.StateHalfOpen:
			return kernel.BreakerHalfOpen
		default:
			return kernel.BreakerClosed
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0xb4ea))
	var trail []string
	for step := range steps {
		if oracleState() == kernel.BreakerOpen {
			advance(openFor + time.Millisecond)
		}
		st := oracleState()
		p := tc.pFail
		if st == kernel.BreakerHalfOpen {
			p = tc.pFailHO
		}
		fail := rng.Float64() < p
		if c := cb.Counts(); st == kernel.BreakerClosed && !fail &&
			ready(gobreaker.Counts{Requests: c.Requests + 1, TotalFailures: c.TotalFailures}) {
			fail = true // the documented difference: ax would trip on this success
		}
		var outcome error
		if fail {
			outcome = errUpstream
		}
		h, err := k.Submit(t.Context(), kernel.Task{
			Group: "g", Key: "a", Retry: &kernel.RetryPolicy{MaxAttempts: 1},
			Run: func(context.Context) error { return outcome },
		})
		if err != nil {
			t.Fatalf("step %d: Submit() error = %v", step, err)
		}
		<-h.Done()
		synctest.Wait() // the breaker's events delivered
		_, oerr := cb.Execute(func() (struct{}, error) { return struct{}{}, outcome })
		if oerr != nil && !errors.Is(oerr, errUpstream) {
			t.Fatalf("step %d: gobreaker refused the attempt the kernel ran: %v", step, oerr)
		}
		if !errors.Is(h.Err(), outcome) && (outcome != nil || h.Err() != nil) {
			t.Fatalf("step %d: task error = %v, want %v", step, h.Err(), outcome)
		}
		got, want := kernelState(), oracleState()
		mark := "S"
		if fail {
			mark = "F"
		}
		trail = append(trail, mark+"→"+stateName(want))
		switch {
		case want == kernel.BreakerOpen && st == kernel.BreakerClosed:
			trips++
		case want == kernel.BreakerClosed && st == kernel.BreakerHalfOpen:
			closes++
		}
		if got != want {
			t.Fatalf("after step %d (%v): kernel breaker %s, gobreaker %s; trail %v", step, mark, stateName(got), stateName(want), trail)
		}
	}
	return trips, closes
}

// stateName names a breaker state in failure messages.
func stateName(s kernel.BreakerState) string {
	switch s {
	case kernel.BreakerClosed:
		return "closed"
	case kernel.BreakerOpen:
		return "open"
	case kernel.BreakerHalfOpen:
		return "half-open"
	default:
		return fmt.Sprintf("BreakerState(%d)", s)
	}
}

// advance lets d pass on the bubble's clock, then waits until every goroutine of
// the bubble is blocked (inside synctest.Test only).
func advance(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}
