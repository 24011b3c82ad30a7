package kernel

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// breakerBase is the creation time of the breakers under test, a whole second so
// that buckets start at whole multiples of their width.
var breakerBase = time.Unix(1_700_000_000, 0)

// breakerHarness drives a breaker at offsets from breakerBase and checks each
// result.
type breakerHarness struct {
	t *testing.T
	b *breaker
}

func newBreakerHarness(t *testing.T, c BreakerConfig) *breakerHarness {
	t.Helper()
	if errs := c.validate("c"); errs != nil {
		t.Fatalf("validate() = %v, want none", errors.Join(errs...))
	}
	c = c.withDefaults()
	return &breakerHarness{t: t, b: newBreaker(&c, breakerBase)}
}

// admit admits an attempt at d and returns its generation.
func (h *breakerHarness) admit(d time.Duration) uint32 {
	h.t.Helper()
	ok, gen, wake := h.b.admit(breakerBase.Add(d))
	if !ok || !wake.IsZero() {
		h.t.Fatalf("at %v: admit() = %v, _, %v, want true, _, zero", d, ok, wake)
	}
	return gen
}

// refuse checks that admit at d refuses, with wake at offset wake (or zero if
// wake < 0).
func (h *breakerHarness) refuse(d, wake time.Duration) {
	h.t.Helper()
	ok, _, got := h.b.admit(breakerBase.Add(d))
	want := time.Time{}
	if wake >= 0 {
		want = breakerBase.Add(wake)
	}
	if ok || !got.Equal(want) {
		h.t.Fatalf("at %v: admit() = %v, _, %v, want false, _, %v", d, ok, got, want)
	}
}

// done reports outcome o of the attempt of gen at d and checks that the state
// moves from what it was to want (or stays, if want is the state before).
func (h *breakerHarness) done(d time.Duration, gen uint32, o breakerOutcome, want BreakerState) {
	h.t.Helper()
	now := breakerBase.Add(d)
	before := h.b.state(now)
	from, to := h.b.done(now, gen, o)
	if from != before || to != want {
		h.t.Fatalf("at %v: done(%d) = %v, %v, want %v, %v", d, o, from, to, before, want)
	}
	if got := h.b.state(now); got != want {
		h.t.Fatalf("at %v: state() = %v after done, want %v", d, got, want)
	}
}

// calls runs n attempts admitted and ended at d with outcome o; the last one must
// leave the state at want, the others unchanged.
func (h *breakerHarness) calls(d time.Duration, n int, o breakerOutcome, want BreakerState) {
	h.t.Helper()
	for i := range n {
		gen := h.admit(d)
		if i == n-1 {
			h.done(d, gen, o, want)
		} else {
			h.done(d, gen, o, h.b.state(breakerBase.Add(d)))
		}
	}
}

func (h *breakerHarness) state(d time.Duration, want BreakerState) {
	h.t.Helper()
	if got := h.b.state(breakerBase.Add(d)); got != want {
		h.t.Fatalf("at %v: state() = %v, want %v", d, got, want)
	}
}

func (h *breakerHarness) window(d time.Duration, calls, failures, slow uint64) {
	h.t.Helper()
	c, f, sl := h.b.window(breakerBase.Add(d))
	if c != calls || f != failures || sl != slow {
		h.t.Fatalf("at %v: window() = %d, %d, %d, want %d, %d, %d", d, c, f, sl, calls, failures, slow)
	}
}

// trip opens h's breaker at d with MinCalls failures.
func (h *breakerHarness) trip(d time.Duration) {
	h.t.Helper()
	h.calls(d, h.b.cfg.MinCalls, breakerFailure, BreakerOpen)
}

const (
	msec = time.Millisecond
	sec  = time.Second
)

func TestBreakerTransitions(t *testing.T) {
	tests := []struct {
		name string
		cfg  BreakerConfig
		run  func(h *breakerHarness)
	}{
		{
			name: "trips at the ratio once MinCalls are in",
			cfg:  BreakerConfig{MinCalls: 4, FailureRatio: 0.5, OpenFor: 5 * sec},
			run: func(h *breakerHarness) {
				h.calls(0, 2, breakerSuccess, BreakerClosed)
				h.calls(0, 1, breakerFailure, BreakerClosed)
				h.calls(1*sec, 1, breakerFailure, BreakerOpen) // 2/4 = 0.5
				h.refuse(1*sec, 6*sec)
				h.refuse(6*sec-1, 6*sec)
			},
		},
		{
			name: "no trip below MinCalls",
			cfg:  BreakerConfig{MinCalls: 5, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 4, breakerFailure, BreakerClosed)
				h.window(0, 4, 4, 0)
				h.calls(0, 1, breakerFailure, BreakerOpen)
			},
		},
		{
			name: "a success that reaches MinCalls trips when the ratio is met",
			cfg:  BreakerConfig{MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 3, breakerFailure, BreakerClosed)
				h.calls(0, 1, breakerSuccess, BreakerOpen)
			},
		},
		{
			name: "no trip below the ratio",
			cfg:  BreakerConfig{MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 6, breakerSuccess, BreakerClosed)
				h.calls(0, 5, breakerFailure, BreakerClosed) // 5/11
				h.window(0, 11, 5, 0)
			},
		},
		{
			name: "FailureRatio 1 trips only when every call failed",
			cfg:  BreakerConfig{MinCalls: 2, FailureRatio: 1},
			run: func(h *breakerHarness) {
				h.calls(0, 1, breakerSuccess, BreakerClosed)
				h.calls(0, 20, breakerFailure, BreakerClosed)
				h.calls(10*sec, 2, breakerFailure, BreakerOpen) // the success has left
			},
		},
		{
			name: "the window forgets calls older than Window",
			cfg:  BreakerConfig{Window: 10 * sec, MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 3, breakerFailure, BreakerClosed)
				h.window(10*sec-1, 3, 3, 0)
				h.window(10*sec, 0, 0, 0)
				h.calls(10*sec, 1, breakerFailure, BreakerClosed)
				h.window(10*sec, 1, 1, 0)
			},
		},
		{
			name: "the window keeps calls younger than Window",
			cfg:  BreakerConfig{Window: 10 * sec, MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 3, breakerFailure, BreakerClosed)
				h.calls(10*sec-1, 1, breakerFailure, BreakerOpen)
			},
		},
		{
			name: "the window slides a bucket at a time",
			cfg:  BreakerConfig{Window: 10 * sec, MinCalls: 100},
			run: func(h *breakerHarness) {
				for i := range 15 {
					h.calls(time.Duration(i)*sec+500*msec, i+1, breakerSuccess, BreakerClosed)
				}
				// At 14.5 sec the buckets of 5 sec to 14 sec hold 6+...+15 calls.
				h.window(14*sec+500*msec, 105, 0, 0)
				h.window(20*sec, 54, 0, 0) // 12+13+14+15
				h.window(24*sec-1, 15, 0, 0)
				h.window(24*sec, 0, 0, 0)
				// A gap longer than the window clears every bucket.
				h.calls(100*sec, 1, breakerFailure, BreakerClosed)
				h.window(100*sec, 1, 1, 0)
			},
		},
		{
			name: "open turns half-open at OpenFor",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: 5 * sec},
			run: func(h *breakerHarness) {
				h.trip(1 * sec)
				h.state(6*sec-1, BreakerOpen)
				h.refuse(6*sec-1, 6*sec)
				h.state(6*sec, BreakerHalfOpen)
				h.admit(6 * sec)
				h.state(6*sec, BreakerHalfOpen)
			},
		},
		{
			name: "half-open admits at most Probes",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: sec, Probes: 2},
			run: func(h *breakerHarness) {
				h.trip(0)
				g1 := h.admit(sec)
				g2 := h.admit(sec)
				h.refuse(sec, -1)
				h.done(2*sec, g1, breakerSuccess, BreakerHalfOpen)
				h.refuse(2*sec, -1) // one passed, one pending: both places taken
				h.done(3*sec, g2, breakerSuccess, BreakerClosed)
				h.admit(3 * sec)
			},
		},
		{
			name: "a probe success closes with an empty window",
			cfg:  BreakerConfig{MinCalls: 3, OpenFor: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.done(sec, h.admit(sec), breakerSuccess, BreakerClosed)
				h.window(sec, 0, 0, 0)
				if !h.b.idle(breakerBase.Add(sec)) {
					h.t.Fatal("idle() = false after closing, want true")
				}
				h.calls(sec, 2, breakerFailure, BreakerClosed)
				h.calls(sec, 1, breakerFailure, BreakerOpen)
				h.refuse(sec, 2*sec) // OpenFor again, not doubled
			},
		},
		{
			name: "a probe failure reopens for twice as long, up to MaxOpenFor",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: sec, MaxOpenFor: 3 * sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.refuse(0, sec)
				h.done(1500*msec, h.admit(sec), breakerFailure, BreakerOpen)
				h.refuse(1500*msec, 3500*msec) // 2 sec
				h.done(3500*msec, h.admit(3500*msec), breakerFailure, BreakerOpen)
				h.refuse(3500*msec, 6500*msec) // 4 sec capped to 3 sec
				h.done(7*sec, h.admit(7*sec), breakerFailure, BreakerOpen)
				h.refuse(7*sec, 10*sec) // still 3 sec
				h.done(10*sec, h.admit(10*sec), breakerSuccess, BreakerClosed)
				h.trip(11 * sec)
				h.refuse(11*sec, 12*sec) // reset to OpenFor
			},
		},
		{
			name: "a slow probe reopens when SlowCall is set",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: sec, SlowCall: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.done(sec, h.admit(sec), breakerSlow, BreakerOpen)
				h.refuse(sec, 3*sec)
			},
		},
		{
			name: "a slow probe succeeds when SlowCall is 0",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.done(sec, h.admit(sec), breakerSlow, BreakerClosed)
			},
		},
		{
			name: "outcomes of an older generation change nothing",
			cfg:  BreakerConfig{MinCalls: 2, OpenFor: sec, Probes: 1},
			run: func(h *breakerHarness) {
				closed1 := h.admit(0)
				closed2 := h.admit(0)
				h.trip(0)
				h.done(0, closed1, breakerSuccess, BreakerOpen)
				h.refuse(0, sec)
				probe := h.admit(sec)
				h.done(sec, closed2, breakerSuccess, BreakerHalfOpen) // not the probe's success
				h.refuse(sec, -1)
				h.done(sec, probe, breakerSuccess, BreakerClosed)
				h.done(sec, closed2, breakerFailure, BreakerClosed) // not counted
				h.window(sec, 0, 0, 0)
				h.done(sec, probe, breakerFailure, BreakerClosed)
				h.window(sec, 0, 0, 0)
			},
		},
		{
			name: "a probe ending after its half-open reopened changes nothing",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: sec, Probes: 2},
			run: func(h *breakerHarness) {
				h.trip(0)
				p1 := h.admit(sec)
				p2 := h.admit(sec)
				h.done(sec, p1, breakerFailure, BreakerOpen)
				h.done(2*sec, p2, breakerSuccess, BreakerOpen)
				h.state(3*sec, BreakerHalfOpen)
				h.done(3*sec, p2, breakerSuccess, BreakerHalfOpen)
				h.admit(3 * sec)
				h.admit(3 * sec)
				h.refuse(3*sec, -1)
			},
		},
		{
			name: "an ignored probe frees its place",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: sec, Probes: 1},
			run: func(h *breakerHarness) {
				h.trip(0)
				p := h.admit(sec)
				h.refuse(sec, -1)
				h.done(sec, p, breakerIgnored, BreakerHalfOpen)
				h.done(sec, h.admit(sec), breakerSuccess, BreakerClosed)
			},
		},
		{
			name: "ignored outcomes are not counted while closed",
			cfg:  BreakerConfig{MinCalls: 2, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 5, breakerIgnored, BreakerClosed)
				h.calls(0, 1, breakerFailure, BreakerClosed)
				h.window(0, 1, 1, 0)
				if h.b.idle(breakerBase) {
					h.t.Fatal("idle() = true with a failure in the window, want false")
				}
				if !h.b.idle(breakerBase.Add(BreakerWindowDefault)) {
					h.t.Fatal("idle() = false once the window is empty, want true")
				}
			},
		},
		{
			name: "slow calls trip at SlowRatio",
			cfg:  BreakerConfig{MinCalls: 4, SlowCall: sec, SlowRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 2, breakerSuccess, BreakerClosed)
				h.calls(0, 1, breakerSlow, BreakerClosed)
				h.calls(0, 1, breakerFailure, BreakerClosed) // 1/4 failed, 1/4 slow
				h.window(0, 4, 1, 1)
				h.calls(0, 1, breakerSlow, BreakerClosed) // 2/5 slow
				h.calls(0, 1, breakerSlow, BreakerOpen)   // 3/6 slow
			},
		},
		{
			name: "slow calls are successes when SlowCall is 0",
			cfg:  BreakerConfig{MinCalls: 2},
			run: func(h *breakerHarness) {
				h.calls(0, 10, breakerSlow, BreakerClosed)
				h.window(0, 10, 0, 0)
			},
		},
		{
			name: "idle only when closed",
			cfg:  BreakerConfig{MinCalls: 1, OpenFor: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				for _, d := range []time.Duration{0, sec, time.Hour} {
					if h.b.idle(breakerBase.Add(d)) {
						h.t.Fatalf("at %v: idle() = true while not closed, want false", d)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(newBreakerHarness(t, tt.cfg))
		})
	}
}

func TestBreakerStateString(t *testing.T) {
	for _, tt := range []struct {
		s    BreakerState
		want string
	}{{BreakerClosed, "closed"}, {BreakerOpen, "open"}, {BreakerHalfOpen, "half-open"}, {0, "BreakerState(0)"}} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("BreakerState(%d).String() = %q, want %q", uint8(tt.s), got, tt.want)
		}
	}
}

func TestBreakerUnknownOutcomePanics(t *testing.T) {
	h := newBreakerHarness(t, BreakerConfig{})
	gen := h.admit(0)
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "kernel: ") {
			t.Errorf("done(0) panicked with %v, want a kernel: message", r)
		}
	}()
	h.b.done(breakerBase, gen, 0)
}

// refBreaker is an exact, unbucketed model of the breaker: it keeps every outcome
// of the closed state and counts those in (now - Window, now]. Its half-open rules
// are sony/gobreaker v2's with MaxRequests = Probes: at most MaxRequests requests
// not excluded, closed after MaxRequests successes, reopened by any failure, and
// outcomes of another generation dropped.
type refBreaker struct {
	c        *BreakerConfig
	st       BreakerState
	gen      uint32
	outcomes []refOutcome
	until    time.Time
	openFor  time.Duration
	probing  int
	passed   int
}

type refOutcome struct {
	at time.Time
	o  breakerOutcome
}

func (r *refBreaker) state(now time.Time) BreakerState {
	if r.st == BreakerOpen && !now.Before(r.until) {
		return BreakerHalfOpen
	}
	return r.st
}

func (r *refBreaker) counts(now time.Time) (calls, failures, slow uint64) {
	if r.st != BreakerClosed {
		return 0, 0, 0
	}
	for _, e := range r.outcomes {
		if e.at.After(now.Add(-r.c.Window)) {
			calls++
			switch e.o {
			case breakerFailure:
				failures++
			case breakerSlow:
				slow++
			}
		}
	}
	return calls, failures, slow
}

func (r *refBreaker) move(st BreakerState) {
	r.st = st
	r.gen++
	r.probing, r.passed = 0, 0
	r.outcomes = r.outcomes[:0]
}

func (r *refBreaker) admit(now time.Time) (bool, uint32, time.Time) {
	if r.st == BreakerOpen {
		if now.Before(r.until) {
			return false, 0, r.until
		}
		r.move(BreakerHalfOpen)
	}
	if r.st == BreakerHalfOpen {
		if r.probing+r.passed >= r.c.Probes {
			return false, 0, time.Time{}
		}
		r.probing++
	}
	return true, r.gen, time.Time{}
}

func (r *refBreaker) done(now time.Time, gen uint32, o breakerOutcome) (BreakerState, BreakerState) {
	from := r.state(now)
	if gen != r.gen {
		return from, from
	}
	slowOn := r.c.SlowCall > 0
	if o == breakerSlow && !slowOn {
		o = breakerSuccess
	}
	switch {
	case o == breakerIgnored:
		if r.st == BreakerHalfOpen {
			r.probing--
		}
	case r.st == BreakerClosed:
		r.outcomes = append(r.outcomes, refOutcome{now, o})
		calls, failures, slow := r.counts(now)
		if calls >= uint64(r.c.MinCalls) &&
			(float64(failures)/float64(calls) >= r.c.FailureRatio || slowOn && float64(slow)/float64(calls) >= r.c.SlowRatio) {
			r.move(BreakerOpen)
			r.openFor = r.c.OpenFor
			r.until = now.Add(r.openFor)
		}
	case o == breakerSuccess:
		r.probing--
		r.passed++
		if r.passed == r.c.Probes {
			r.move(BreakerClosed)
			r.openFor = 0
		}
	default:
		r.move(BreakerOpen)
		r.openFor = min(2*r.openFor, r.c.MaxOpenFor)
		r.until = now.Add(r.openFor)
	}
	return from, r.state(now)
}

// TestBreakerMatchesReference runs random configs and random sequences of
// admissions, outcomes and time steps on the breaker and on refBreaker, and
// checks that every result agrees. Outcomes are recorded at whole multiples of
// the bucket width, where the buckets hold exactly the calls of the last Window;
// admissions and state checks happen at any time.
func TestBreakerMatchesReference(t *testing.T) {
	type move struct{ from, to BreakerState }
	seen := map[move]int{}
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 17))
		pick := func(vs ...time.Duration) time.Duration { return vs[rng.IntN(len(vs))] }
		c := BreakerConfig{
			Window:       pick(sec, 2*sec, 10*sec),
			MinCalls:     1 + rng.IntN(6),
			FailureRatio: []float64{0.2, 0.5, 0.75, 1}[rng.IntN(4)],
			Probes:       1 + rng.IntN(3),
		}
		if rng.IntN(2) == 0 {
			c.SlowCall = sec
			c.SlowRatio = []float64{0.3, 0.5, 1}[rng.IntN(3)]
		}
		c.OpenFor = pick(700*msec, 3*c.Window/10, 2500*msec)
		c.MaxOpenFor = c.OpenFor * pick(1, 2, 5)
		if errs := c.validate("c"); errs != nil {
			t.Fatalf("seed %d: validate() = %v", seed, errors.Join(errs...))
		}
		c = c.withDefaults()
		b := newBreaker(&c, breakerBase)
		r := &refBreaker{c: &c, st: BreakerClosed, gen: 1}
		width := c.Window / BreakerBuckets

		type attempt struct{ gen uint32 }
		var inFlight []attempt
		aligned := breakerBase // the latest multiple of width at or before now
		now := breakerBase
		for step := range 300 {
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d step %d at %v (cfg %+v): "+format, append([]any{seed, step, now.Sub(breakerBase), c}, args...)...)
			}
			switch n := rng.IntN(100); {
			case n < 35:
				ok, gen, wake := b.admit(now)
				rok, rgen, rwake := r.admit(now)
				if ok != rok || gen != rgen || !wake.Equal(rwake) {
					fail("admit() = %v, %d, %v, want %v, %d, %v", ok, gen, wake, rok, rgen, rwake)
				}
				if ok {
					inFlight = append(inFlight, attempt{gen})
				}
			case n < 80:
				if len(inFlight) == 0 || !now.Equal(aligned) {
					continue
				}
				i := rng.IntN(len(inFlight))
				a := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				o := breakerOutcome(1 + rng.IntN(4))
				from, to := b.done(now, a.gen, o)
				rfrom, rto := r.done(now, a.gen, o)
				if from != rfrom || to != rto {
					fail("done(%d) = %v, %v, want %v, %v", o, from, to, rfrom, rto)
				}
				if a.gen != r.gen && from == to {
					seen[move{}]++
				} else {
					seen[move{from, to}]++
				}
			case n < 92:
				aligned = aligned.Add(width * pick(1, 1, 2, 5, 12))
				now = aligned
			default:
				now = aligned.Add(time.Duration(rng.Int64N(int64(width))))
			}
			if got, want := b.state(now), r.state(now); got != want {
				fail("state() = %v, want %v", got, want)
			}
			calls, failures, slow := b.window(now)
			rc, rf, rs := r.counts(now)
			if now.Equal(aligned) && (calls != rc || failures != rf || slow != rs) {
				fail("window() = %d, %d, %d, want %d, %d, %d", calls, failures, slow, rc, rf, rs)
			}
			if got, want := b.idle(now), r.st == BreakerClosed && rc == 0; now.Equal(aligned) && got != want {
				fail("idle() = %v, want %v", got, want)
			}
		}
	}
	for _, m := range []move{{}, {BreakerClosed, BreakerOpen}, {BreakerHalfOpen, BreakerOpen}, {BreakerHalfOpen, BreakerClosed}, {BreakerHalfOpen, BreakerHalfOpen}} {
		if seen[m] < 100 {
			t.Errorf("done() moved %v -> %v %d times in all runs, want >= 100 (zero states: an older generation)", m.from, m.to, seen[m])
		}
	}
	t.Logf("done() results: %v", seen)
}

// TestBreakerWindowBounds records outcomes at arbitrary times and checks that the
// window holds at least the outcomes of the last 9/10 of Window and at most those
// of the last Window.
func TestBreakerWindowBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := BreakerConfig{Window: 10 * sec, MinCalls: BreakerMinCallsMax}.withDefaults()
	b := newBreaker(&c, breakerBase)
	var at []time.Time
	now := breakerBase
	for range 5000 {
		now = now.Add(time.Duration(rng.Int64N(int64(1500 * msec))))
		if rng.IntN(3) > 0 {
			ok, gen, _ := b.admit(now)
			if !ok {
				t.Fatal("admit() = false with MinCalls out of reach")
			}
			b.done(now, gen, breakerSuccess)
			at = append(at, now)
		}
		count := func(span time.Duration) (n uint64) {
			for _, a := range at {
				if a.After(now.Add(-span)) {
					n++
				}
			}
			return n
		}
		lo, hi := count(c.Window-c.Window/BreakerBuckets), count(c.Window)
		if got, _, _ := b.window(now); got < lo || got > hi {
			t.Fatalf("at %v: window() = %d calls, want in [%d, %d]", now.Sub(breakerBase), got, lo, hi)
		}
	}
}

func TestBreakerBucketSaturates(t *testing.T) {
	h := newBreakerHarness(t, BreakerConfig{MinCalls: 1, FailureRatio: 1})
	h.b.ring[0] = breakerBucket{calls: math.MaxUint32 - 1}
	h.calls(0, 3, breakerFailure, BreakerClosed)
	h.window(0, math.MaxUint32, 1, 0)
}

func TestBreakerSize(t *testing.T) {
	if got := unsafe.Sizeof(breaker{}); got > 200 {
		t.Errorf("unsafe.Sizeof(breaker{}) = %d, want <= 200", got)
	}
}

func TestBreakerAllocs(t *testing.T) {
	c := BreakerConfig{MinCalls: 3, OpenFor: msec, Probes: 2, SlowCall: sec}.withDefaults()
	b := newBreaker(&c, breakerBase)
	now := breakerBase
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		i++
		now = now.Add(300 * time.Microsecond)
		ok, gen, _ := b.admit(now)
		if ok {
			b.done(now, gen, breakerOutcome(1+i%4))
		}
		b.state(now)
		b.idle(now)
	})
	if allocs != 0 {
		t.Errorf("admit and done: %v allocations per run, want 0", allocs)
	}
}

// TestBreakerLongestOpen runs a breaker at the largest accepted open periods
// through many failed probes: the period stays at MaxOpenFor and time moves on.
func TestBreakerLongestOpen(t *testing.T) {
	c := BreakerConfig{MinCalls: 1, OpenFor: BreakerOpenForMax, MaxOpenFor: BreakerOpenForMax}
	h := newBreakerHarness(t, c)
	h.trip(0)
	at := BreakerOpenForMax
	for range 100 {
		h.refuse(at-1, at)
		h.done(at, h.admit(at), breakerFailure, BreakerOpen)
		at += BreakerOpenForMax
	}
	c = BreakerConfig{MinCalls: 1, OpenFor: BreakerOpenForMin, MaxOpenFor: BreakerOpenForMax}
	h = newBreakerHarness(t, c)
	h.trip(0)
	at, period := time.Duration(0), BreakerOpenForMin
	for range 100 {
		at += period
		h.refuse(at-1, at)
		h.done(at, h.admit(at), breakerFailure, BreakerOpen)
		period = min(2*period, BreakerOpenForMax)
	}
	if h.b.openFor != BreakerOpenForMax {
		t.Errorf("open period = %v after 100 failed probes, want %v", h.b.openFor, BreakerOpenForMax)
	}
}

func TestBreakerConfigValidate(t *testing.T) {
	const prefix = `Config.Groups["x"].Breaker`
	tests := []struct {
		name  string
		cfg   BreakerConfig
		field string // "" when valid
	}{
		{"zero", BreakerConfig{}, ""},
		{"largest", BreakerConfig{
			Window: BreakerWindowMax, MinCalls: BreakerMinCallsMax, FailureRatio: 1, SlowCall: time.Duration(math.MaxInt64),
			SlowRatio: 1, OpenFor: BreakerOpenForMax, MaxOpenFor: BreakerOpenForMax, Probes: BreakerProbesMax,
		}, ""},
		{"smallest", BreakerConfig{
			Window: BreakerWindowMin, MinCalls: 1, FailureRatio: math.SmallestNonzeroFloat64, SlowCall: 1,
			SlowRatio: math.SmallestNonzeroFloat64, OpenFor: BreakerOpenForMin, MaxOpenFor: BreakerOpenForMin, Probes: 1,
		}, ""},
		{"OpenFor beyond MaxOpenForDefault", BreakerConfig{OpenFor: time.Hour}, ""},
		{"Window negative", BreakerConfig{Window: -1}, "Window"},
		{"Window below min", BreakerConfig{Window: BreakerWindowMin - 1}, "Window"},
		{"Window above max", BreakerConfig{Window: BreakerWindowMax + 1}, "Window"},
		{"MinCalls negative", BreakerConfig{MinCalls: -1}, "MinCalls"},
		{"MinCalls above max", BreakerConfig{MinCalls: BreakerMinCallsMax + 1}, "MinCalls"},
		{"FailureRatio negative", BreakerConfig{FailureRatio: -0.1}, "FailureRatio"},
		{"FailureRatio above 1", BreakerConfig{FailureRatio: 1.01}, "FailureRatio"},
		{"FailureRatio NaN", BreakerConfig{FailureRatio: math.NaN()}, "FailureRatio"},
		{"FailureRatio Inf", BreakerConfig{FailureRatio: math.Inf(1)}, "FailureRatio"},
		{"FailureRatio -Inf", BreakerConfig{FailureRatio: math.Inf(-1)}, "FailureRatio"},
		{"SlowCall negative", BreakerConfig{SlowCall: -1}, "SlowCall"},
		{"SlowRatio without SlowCall", BreakerConfig{SlowRatio: 0.5}, "SlowRatio"},
		{"SlowRatio NaN", BreakerConfig{SlowCall: sec, SlowRatio: math.NaN()}, "SlowRatio"},
		{"SlowRatio Inf", BreakerConfig{SlowCall: sec, SlowRatio: math.Inf(1)}, "SlowRatio"},
		{"SlowRatio above 1", BreakerConfig{SlowCall: sec, SlowRatio: 2}, "SlowRatio"},
		{"OpenFor negative", BreakerConfig{OpenFor: -1}, "OpenFor"},
		{"OpenFor below min", BreakerConfig{OpenFor: BreakerOpenForMin - 1}, "OpenFor"},
		{"OpenFor above max", BreakerConfig{OpenFor: BreakerOpenForMax + 1}, "OpenFor"},
		{"MaxOpenFor negative", BreakerConfig{MaxOpenFor: -1}, "MaxOpenFor"},
		{"MaxOpenFor above max", BreakerConfig{MaxOpenFor: BreakerOpenForMax + 1}, "MaxOpenFor"},
		{"MaxOpenFor overflow-prone", BreakerConfig{MaxOpenFor: time.Duration(math.MaxInt64)}, "MaxOpenFor"},
		{"MaxOpenFor below OpenFor", BreakerConfig{OpenFor: 2 * sec, MaxOpenFor: sec}, "MaxOpenFor"},
		{"MaxOpenFor below OpenForDefault", BreakerConfig{MaxOpenFor: sec}, "MaxOpenFor"},
		{"Probes negative", BreakerConfig{Probes: -1}, "Probes"},
		{"Probes above max", BreakerConfig{Probes: BreakerProbesMax + 1}, "Probes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.cfg.validate(prefix)
			if tt.field == "" {
				if errs != nil {
					t.Fatalf("validate() = %v, want none", errors.Join(errs...))
				}
				d := tt.cfg.withDefaults()
				if errs := d.validate(prefix); errs != nil {
					t.Fatalf("validate() of withDefaults() = %v, want none", errors.Join(errs...))
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("validate() = %v, want one error", errors.Join(errs...))
			}
			var ce *ConfigError
			if !errors.As(errs[0], &ce) {
				t.Fatalf("validate() = %T, want *ConfigError", errs[0])
			}
			want := prefix + "." + tt.field
			if ce.Field != want || ce.Reason == "" {
				t.Errorf("validate() = %+v, want Field %q and a reason", ce, want)
			}
			if msg := ce.Error(); !strings.HasPrefix(msg, "kernel: "+want+" = ") {
				t.Errorf("Error() = %q, want it to start with %q", msg, "kernel: "+want+" = ")
			}
		})
	}
}

func TestBreakerConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   BreakerConfig
		want BreakerConfig
	}{
		{"zero", BreakerConfig{}, BreakerConfig{
			Window: BreakerWindowDefault, MinCalls: BreakerMinCallsDefault, FailureRatio: BreakerFailureRatioDefault,
			OpenFor: BreakerOpenForDefault, MaxOpenFor: BreakerMaxOpenForDefault, Probes: BreakerProbesDefault,
		}},
		{"slow on", BreakerConfig{SlowCall: sec}, BreakerConfig{
			Window: BreakerWindowDefault, MinCalls: BreakerMinCallsDefault, FailureRatio: BreakerFailureRatioDefault,
			SlowCall: sec, SlowRatio: BreakerSlowRatioDefault,
			OpenFor: BreakerOpenForDefault, MaxOpenFor: BreakerMaxOpenForDefault, Probes: BreakerProbesDefault,
		}},
		{"long OpenFor", BreakerConfig{OpenFor: time.Hour}, BreakerConfig{
			Window: BreakerWindowDefault, MinCalls: BreakerMinCallsDefault, FailureRatio: BreakerFailureRatioDefault,
			OpenFor: time.Hour, MaxOpenFor: time.Hour, Probes: BreakerProbesDefault,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.withDefaults(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("withDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func BenchmarkBreaker(b *testing.B) {
	for _, bm := range []struct {
		name string
		o    breakerOutcome
	}{{"success", breakerSuccess}, {"failure", breakerFailure}} {
		b.Run(bm.name, func(b *testing.B) {
			c := BreakerConfig{OpenFor: BreakerOpenForMin}.withDefaults()
			br := newBreaker(&c, breakerBase)
			now := breakerBase
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(10 * time.Microsecond)
				if ok, gen, _ := br.admit(now); ok {
					br.done(now, gen, bm.o)
				}
			}
		})
	}
}
