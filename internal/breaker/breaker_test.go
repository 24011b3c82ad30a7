package breaker

import (
	"cmp"
	"math"
	"math/rand/v2"
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
	b *Breaker
}

func newBreakerHarness(t *testing.T, c Config) *breakerHarness {
	t.Helper()
	c = withDefaults(c)
	return &breakerHarness{t: t, b: New(&c, breakerBase)}
}

// admit admits an attempt at d and returns its generation.
func (h *breakerHarness) admit(d time.Duration) uint32 {
	h.t.Helper()
	ok, gen, wake := h.b.Admit(breakerBase.Add(d))
	if !ok || !wake.IsZero() {
		h.t.Fatalf("at %v: Admit() = %v, _, %v, want true, _, zero", d, ok, wake)
	}
	return gen
}

// refuse checks that admit at d refuses, with wake at offset wake (or zero if
// wake < 0).
func (h *breakerHarness) refuse(d, wake time.Duration) {
	h.t.Helper()
	ok, _, got := h.b.Admit(breakerBase.Add(d))
	want := time.Time{}
	if wake >= 0 {
		want = breakerBase.Add(wake)
	}
	if ok || !got.Equal(want) {
		h.t.Fatalf("at %v: Admit() = %v, _, %v, want false, _, %v", d, ok, got, want)
	}
}

// done reports outcome o of the attempt of gen at d and checks that the state
// moves from what it was to want (or stays, if want is the state before).
func (h *breakerHarness) done(d time.Duration, gen uint32, o Outcome, want State) {
	h.t.Helper()
	now := breakerBase.Add(d)
	before := h.b.State(now)
	from, to := h.b.Done(now, gen, o)
	if from != before || to != want {
		h.t.Fatalf("at %v: Done(%d) = %v, %v, want %v, %v", d, o, from, to, before, want)
	}
	if got := h.b.State(now); got != want {
		h.t.Fatalf("at %v: State() = %v after Done, want %v", d, got, want)
	}
}

// calls runs n attempts admitted and ended at d with outcome o; the last one must
// leave the state at want, the others unchanged.
func (h *breakerHarness) calls(d time.Duration, n int, o Outcome, want State) {
	h.t.Helper()
	for i := range n {
		gen := h.admit(d)
		if i == n-1 {
			h.done(d, gen, o, want)
		} else {
			h.done(d, gen, o, h.b.State(breakerBase.Add(d)))
		}
	}
}

func (h *breakerHarness) state(d time.Duration, want State) {
	h.t.Helper()
	if got := h.b.State(breakerBase.Add(d)); got != want {
		h.t.Fatalf("at %v: State() = %v, want %v", d, got, want)
	}
}

func (h *breakerHarness) window(d time.Duration, calls, failures, slow uint64) {
	h.t.Helper()
	c, f, sl := h.b.Window(breakerBase.Add(d))
	if c != calls || f != failures || sl != slow {
		h.t.Fatalf("at %v: Window() = %d, %d, %d, want %d, %d, %d", d, c, f, sl, calls, failures, slow)
	}
}

// trip opens h's breaker at d with MinCalls failures.
func (h *breakerHarness) trip(d time.Duration) {
	h.t.Helper()
	h.calls(d, h.b.cfg.MinCalls, Failure, Open)
}

const (
	msec = time.Millisecond
	sec  = time.Second

	// The kernel's defaults and limits (kernel.BreakerConfig), so that the
	// configs below read as the kernel's.
	windowDefault = 10 * sec
	minCallsMax   = 1 << 24
	openForMin    = msec
	openForMax    = 24 * time.Hour
)

// withDefaults fills the zero fields of c with the kernel's defaults
// (kernel.BreakerConfig).
func withDefaults(c Config) Config {
	c.Window = cmp.Or(c.Window, windowDefault)
	c.MinCalls = cmp.Or(c.MinCalls, 10)
	c.FailureRatio = cmp.Or(c.FailureRatio, 0.5)
	if c.SlowCall > 0 {
		c.SlowRatio = cmp.Or(c.SlowRatio, 0.5)
	}
	c.OpenFor = cmp.Or(c.OpenFor, 60*sec)
	c.MaxOpenFor = cmp.Or(c.MaxOpenFor, max(10*time.Minute, c.OpenFor))
	c.Probes = cmp.Or(c.Probes, 1)
	return c
}

func TestBreakerTransitions(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		run  func(h *breakerHarness)
	}{
		{
			name: "trips at the ratio once MinCalls are in",
			cfg:  Config{MinCalls: 4, FailureRatio: 0.5, OpenFor: 5 * sec},
			run: func(h *breakerHarness) {
				h.calls(0, 2, Success, Closed)
				h.calls(0, 1, Failure, Closed)
				h.calls(1*sec, 1, Failure, Open) // 2/4 = 0.5
				h.refuse(1*sec, 6*sec)
				h.refuse(6*sec-1, 6*sec)
			},
		},
		{
			name: "no trip below MinCalls",
			cfg:  Config{MinCalls: 5, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 4, Failure, Closed)
				h.window(0, 4, 4, 0)
				h.calls(0, 1, Failure, Open)
			},
		},
		{
			name: "a success that reaches MinCalls trips when the ratio is met",
			cfg:  Config{MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 3, Failure, Closed)
				h.calls(0, 1, Success, Open)
			},
		},
		{
			name: "no trip below the ratio",
			cfg:  Config{MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 6, Success, Closed)
				h.calls(0, 5, Failure, Closed) // 5/11
				h.window(0, 11, 5, 0)
			},
		},
		{
			name: "FailureRatio 1 trips only when every call failed",
			cfg:  Config{MinCalls: 2, FailureRatio: 1},
			run: func(h *breakerHarness) {
				h.calls(0, 1, Success, Closed)
				h.calls(0, 20, Failure, Closed)
				h.calls(10*sec, 2, Failure, Open) // the success has left
			},
		},
		{
			name: "the window forgets calls older than Window",
			cfg:  Config{Window: 10 * sec, MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 3, Failure, Closed)
				h.window(10*sec-1, 3, 3, 0)
				h.window(10*sec, 0, 0, 0)
				h.calls(10*sec, 1, Failure, Closed)
				h.window(10*sec, 1, 1, 0)
			},
		},
		{
			name: "the window keeps calls younger than Window",
			cfg:  Config{Window: 10 * sec, MinCalls: 4, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 3, Failure, Closed)
				h.calls(10*sec-1, 1, Failure, Open)
			},
		},
		{
			name: "the window slides a bucket at a time",
			cfg:  Config{Window: 10 * sec, MinCalls: 100},
			run: func(h *breakerHarness) {
				for i := range 15 {
					h.calls(time.Duration(i)*sec+500*msec, i+1, Success, Closed)
				}
				// At 14.5 sec the buckets of 5 sec to 14 sec hold 6+...+15 calls.
				h.window(14*sec+500*msec, 105, 0, 0)
				h.window(20*sec, 54, 0, 0) // 12+13+14+15
				h.window(24*sec-1, 15, 0, 0)
				h.window(24*sec, 0, 0, 0)
				// A gap longer than the window clears every bucket.
				h.calls(100*sec, 1, Failure, Closed)
				h.window(100*sec, 1, 1, 0)
			},
		},
		{
			name: "open turns half-open at OpenFor",
			cfg:  Config{MinCalls: 1, OpenFor: 5 * sec},
			run: func(h *breakerHarness) {
				h.trip(1 * sec)
				h.state(6*sec-1, Open)
				h.refuse(6*sec-1, 6*sec)
				h.state(6*sec, HalfOpen)
				h.admit(6 * sec)
				h.state(6*sec, HalfOpen)
			},
		},
		{
			name: "half-open admits at most Probes",
			cfg:  Config{MinCalls: 1, OpenFor: sec, Probes: 2},
			run: func(h *breakerHarness) {
				h.trip(0)
				g1 := h.admit(sec)
				g2 := h.admit(sec)
				h.refuse(sec, -1)
				h.done(2*sec, g1, Success, HalfOpen)
				h.refuse(2*sec, -1) // one passed, one pending: both places taken
				h.done(3*sec, g2, Success, Closed)
				h.admit(3 * sec)
			},
		},
		{
			name: "a probe success closes with an empty window",
			cfg:  Config{MinCalls: 3, OpenFor: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.done(sec, h.admit(sec), Success, Closed)
				h.window(sec, 0, 0, 0)
				if !h.b.Idle(breakerBase.Add(sec)) {
					h.t.Fatal("Idle() = false after closing, want true")
				}
				h.calls(sec, 2, Failure, Closed)
				h.calls(sec, 1, Failure, Open)
				h.refuse(sec, 2*sec) // OpenFor again, not doubled
			},
		},
		{
			name: "a probe failure reopens for twice as long, up to MaxOpenFor",
			cfg:  Config{MinCalls: 1, OpenFor: sec, MaxOpenFor: 3 * sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.refuse(0, sec)
				h.done(1500*msec, h.admit(sec), Failure, Open)
				h.refuse(1500*msec, 3500*msec) // 2 sec
				h.done(3500*msec, h.admit(3500*msec), Failure, Open)
				h.refuse(3500*msec, 6500*msec) // 4 sec capped to 3 sec
				h.done(7*sec, h.admit(7*sec), Failure, Open)
				h.refuse(7*sec, 10*sec) // still 3 sec
				h.done(10*sec, h.admit(10*sec), Success, Closed)
				h.trip(11 * sec)
				h.refuse(11*sec, 12*sec) // reset to OpenFor
			},
		},
		{
			name: "a slow probe reopens when SlowCall is set",
			cfg:  Config{MinCalls: 1, OpenFor: sec, SlowCall: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.done(sec, h.admit(sec), Slow, Open)
				h.refuse(sec, 3*sec)
			},
		},
		{
			name: "a slow probe succeeds when SlowCall is 0",
			cfg:  Config{MinCalls: 1, OpenFor: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				h.done(sec, h.admit(sec), Slow, Closed)
			},
		},
		{
			name: "outcomes of an older generation change nothing",
			cfg:  Config{MinCalls: 2, OpenFor: sec, Probes: 1},
			run: func(h *breakerHarness) {
				closed1 := h.admit(0)
				closed2 := h.admit(0)
				h.trip(0)
				h.done(0, closed1, Success, Open)
				h.refuse(0, sec)
				probe := h.admit(sec)
				h.done(sec, closed2, Success, HalfOpen) // not the probe's success
				h.refuse(sec, -1)
				h.done(sec, probe, Success, Closed)
				h.done(sec, closed2, Failure, Closed) // not counted
				h.window(sec, 0, 0, 0)
				h.done(sec, probe, Failure, Closed)
				h.window(sec, 0, 0, 0)
			},
		},
		{
			name: "a probe ending after its half-open reopened changes nothing",
			cfg:  Config{MinCalls: 1, OpenFor: sec, Probes: 2},
			run: func(h *breakerHarness) {
				h.trip(0)
				p1 := h.admit(sec)
				p2 := h.admit(sec)
				h.done(sec, p1, Failure, Open)
				h.done(2*sec, p2, Success, Open)
				h.state(3*sec, HalfOpen)
				h.done(3*sec, p2, Success, HalfOpen)
				h.admit(3 * sec)
				h.admit(3 * sec)
				h.refuse(3*sec, -1)
			},
		},
		{
			name: "an ignored probe frees its place",
			cfg:  Config{MinCalls: 1, OpenFor: sec, Probes: 1},
			run: func(h *breakerHarness) {
				h.trip(0)
				p := h.admit(sec)
				h.refuse(sec, -1)
				h.done(sec, p, Ignored, HalfOpen)
				h.done(sec, h.admit(sec), Success, Closed)
			},
		},
		{
			name: "ignored outcomes are not counted while closed",
			cfg:  Config{MinCalls: 2, FailureRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 5, Ignored, Closed)
				h.calls(0, 1, Failure, Closed)
				h.window(0, 1, 1, 0)
				if h.b.Idle(breakerBase) {
					h.t.Fatal("Idle() = true with a failure in the window, want false")
				}
				if !h.b.Idle(breakerBase.Add(windowDefault)) {
					h.t.Fatal("Idle() = false once the window is empty, want true")
				}
			},
		},
		{
			name: "slow calls trip at SlowRatio",
			cfg:  Config{MinCalls: 4, SlowCall: sec, SlowRatio: 0.5},
			run: func(h *breakerHarness) {
				h.calls(0, 2, Success, Closed)
				h.calls(0, 1, Slow, Closed)
				h.calls(0, 1, Failure, Closed) // 1/4 failed, 1/4 slow
				h.window(0, 4, 1, 1)
				h.calls(0, 1, Slow, Closed) // 2/5 slow
				h.calls(0, 1, Slow, Open)   // 3/6 slow
			},
		},
		{
			name: "slow calls are successes when SlowCall is 0",
			cfg:  Config{MinCalls: 2},
			run: func(h *breakerHarness) {
				h.calls(0, 10, Slow, Closed)
				h.window(0, 10, 0, 0)
			},
		},
		{
			name: "idle only when closed",
			cfg:  Config{MinCalls: 1, OpenFor: sec},
			run: func(h *breakerHarness) {
				h.trip(0)
				for _, d := range []time.Duration{0, sec, time.Hour} {
					if h.b.Idle(breakerBase.Add(d)) {
						h.t.Fatalf("at %v: Idle() = true while not closed, want false", d)
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

func TestTrips(t *testing.T) {
	fail := Config{MinCalls: 4, FailureRatio: 0.5}
	slow := Config{MinCalls: 4, FailureRatio: 0.5, SlowCall: sec, SlowRatio: 0.25}
	tests := []struct {
		name                  string
		c                     Config
		calls, failures, slow uint64
		want                  bool
	}{
		{"empty", Config{FailureRatio: 0.5}, 0, 0, 0, false},
		{"below MinCalls", fail, 3, 3, 0, false},
		{"at MinCalls, at the ratio", fail, 4, 2, 0, true},
		{"below the ratio", fail, 5, 2, 0, false},
		{"MinCalls 0 trips from the first call", Config{FailureRatio: 1}, 1, 1, 0, true},
		{"ratio 1 needs every call failed", Config{MinCalls: 1, FailureRatio: 1}, 10, 9, 0, false},
		{"slow calls need SlowCall", fail, 4, 0, 4, false},
		{"slow at SlowRatio", slow, 4, 0, 1, true},
		{"slow below SlowRatio", slow, 5, 1, 1, false},
		{"slow below MinCalls", slow, 3, 0, 3, false},
		{"large counts", fail, 1 << 40, 1 << 39, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := trips(&tt.c, tt.calls, tt.failures, tt.slow); got != tt.want {
				t.Errorf("trips(%d, %d, %d) = %v, want %v", tt.calls, tt.failures, tt.slow, got, tt.want)
			}
		})
	}
}

func TestStateString(t *testing.T) {
	for _, tt := range []struct {
		s    State
		want string
	}{{Closed, "closed"}, {Open, "open"}, {HalfOpen, "half-open"}, {0, "State(0)"}} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(tt.s), got, tt.want)
		}
	}
}

func TestBreakerUnknownOutcomePanics(t *testing.T) {
	h := newBreakerHarness(t, Config{})
	gen := h.admit(0)
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "breaker: ") {
			t.Errorf("Done(0) panicked with %v, want a breaker: message", r)
		}
	}()
	h.b.Done(breakerBase, gen, 0)
}

// refBreaker is an exact, unbucketed model of the breaker: it keeps every outcome
// of the closed state and counts those in (now - Window, now]. Its half-open rules
// are sony/gobreaker v2's with MaxRequests = Probes: at most MaxRequests requests
// not excluded, closed after MaxRequests successes, reopened by any failure, and
// outcomes of another generation dropped.
type refBreaker struct {
	c        *Config
	st       State
	gen      uint32
	outcomes []refOutcome
	until    time.Time
	openFor  time.Duration
	probing  int
	passed   int
}

type refOutcome struct {
	at time.Time
	o  Outcome
}

func (r *refBreaker) state(now time.Time) State {
	if r.st == Open && !now.Before(r.until) {
		return HalfOpen
	}
	return r.st
}

func (r *refBreaker) counts(now time.Time) (calls, failures, slow uint64) {
	if r.st != Closed {
		return 0, 0, 0
	}
	for _, e := range r.outcomes {
		if e.at.After(now.Add(-r.c.Window)) {
			calls++
			switch e.o {
			case Failure:
				failures++
			case Slow:
				slow++
			}
		}
	}
	return calls, failures, slow
}

func (r *refBreaker) move(st State) {
	r.st = st
	r.gen++
	r.probing, r.passed = 0, 0
	r.outcomes = r.outcomes[:0]
}

func (r *refBreaker) admit(now time.Time) (bool, uint32, time.Time) {
	if r.st == Open {
		if now.Before(r.until) {
			return false, 0, r.until
		}
		r.move(HalfOpen)
	}
	if r.st == HalfOpen {
		if r.probing+r.passed >= r.c.Probes {
			return false, 0, time.Time{}
		}
		r.probing++
	}
	return true, r.gen, time.Time{}
}

func (r *refBreaker) done(now time.Time, gen uint32, o Outcome) (State, State) {
	from := r.state(now)
	if gen != r.gen {
		return from, from
	}
	slowOn := r.c.SlowCall > 0
	if o == Slow && !slowOn {
		o = Success
	}
	switch {
	case o == Ignored:
		if r.st == HalfOpen {
			r.probing--
		}
	case r.st == Closed:
		r.outcomes = append(r.outcomes, refOutcome{now, o})
		calls, failures, slow := r.counts(now)
		if calls >= uint64(r.c.MinCalls) &&
			(float64(failures)/float64(calls) >= r.c.FailureRatio || slowOn && float64(slow)/float64(calls) >= r.c.SlowRatio) {
			r.move(Open)
			r.openFor = r.c.OpenFor
			r.until = now.Add(r.openFor)
		}
	case o == Success:
		r.probing--
		r.passed++
		if r.passed == r.c.Probes {
			r.move(Closed)
			r.openFor = 0
		}
	default:
		r.move(Open)
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
	type move struct{ from, to State }
	seen := map[move]int{}
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 17))
		pick := func(vs ...time.Duration) time.Duration { return vs[rng.IntN(len(vs))] }
		c := Config{
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
		c = withDefaults(c)
		b := New(&c, breakerBase)
		r := &refBreaker{c: &c, st: Closed, gen: 1}
		width := c.Window / Buckets

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
				ok, gen, wake := b.Admit(now)
				rok, rgen, rwake := r.admit(now)
				if ok != rok || gen != rgen || !wake.Equal(rwake) {
					fail("Admit() = %v, %d, %v, want %v, %d, %v", ok, gen, wake, rok, rgen, rwake)
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
				o := Outcome(1 + rng.IntN(4))
				from, to := b.Done(now, a.gen, o)
				rfrom, rto := r.done(now, a.gen, o)
				if from != rfrom || to != rto {
					fail("Done(%d) = %v, %v, want %v, %v", o, from, to, rfrom, rto)
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
			if got, want := b.State(now), r.state(now); got != want {
				fail("State() = %v, want %v", got, want)
			}
			calls, failures, slow := b.Window(now)
			rc, rf, rs := r.counts(now)
			if now.Equal(aligned) && (calls != rc || failures != rf || slow != rs) {
				fail("Window() = %d, %d, %d, want %d, %d, %d", calls, failures, slow, rc, rf, rs)
			}
			if got, want := b.Idle(now), r.st == Closed && rc == 0; now.Equal(aligned) && got != want {
				fail("Idle() = %v, want %v", got, want)
			}
		}
	}
	for _, m := range []move{{}, {Closed, Open}, {HalfOpen, Open}, {HalfOpen, Closed}, {HalfOpen, HalfOpen}} {
		if seen[m] < 100 {
			t.Errorf("Done() moved %v -> %v %d times in all runs, want >= 100 (zero states: an older generation)", m.from, m.to, seen[m])
		}
	}
	t.Logf("Done() results: %v", seen)
}

// TestBreakerWindowBounds records outcomes at arbitrary times and checks that the
// window holds at least the outcomes of the last 9/10 of Window and at most those
// of the last Window.
func TestBreakerWindowBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := withDefaults(Config{Window: 10 * sec, MinCalls: minCallsMax})
	b := New(&c, breakerBase)
	var at []time.Time
	now := breakerBase
	for range 5000 {
		now = now.Add(time.Duration(rng.Int64N(int64(1500 * msec))))
		if rng.IntN(3) > 0 {
			ok, gen, _ := b.Admit(now)
			if !ok {
				t.Fatal("Admit() = false with MinCalls out of reach")
			}
			b.Done(now, gen, Success)
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
		lo, hi := count(c.Window-c.Window/Buckets), count(c.Window)
		if got, _, _ := b.Window(now); got < lo || got > hi {
			t.Fatalf("at %v: Window() = %d calls, want in [%d, %d]", now.Sub(breakerBase), got, lo, hi)
		}
	}
}

func TestBreakerBucketSaturates(t *testing.T) {
	h := newBreakerHarness(t, Config{MinCalls: 1, FailureRatio: 1})
	h.b.ring[0] = bucket{calls: math.MaxUint32 - 1}
	h.calls(0, 3, Failure, Closed)
	h.window(0, math.MaxUint32, 1, 0)
}

func TestBreakerSize(t *testing.T) {
	if got := unsafe.Sizeof(Breaker{}); got > 200 {
		t.Errorf("unsafe.Sizeof(Breaker{}) = %d, want <= 200", got)
	}
}

func TestBreakerAllocs(t *testing.T) {
	c := withDefaults(Config{MinCalls: 3, OpenFor: msec, Probes: 2, SlowCall: sec})
	b := New(&c, breakerBase)
	now := breakerBase
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		i++
		now = now.Add(300 * time.Microsecond)
		ok, gen, _ := b.Admit(now)
		if ok {
			b.Done(now, gen, Outcome(1+i%4))
		}
		b.State(now)
		b.Idle(now)
	})
	if allocs != 0 {
		t.Errorf("Admit and Done: %v allocations per run, want 0", allocs)
	}
}

// TestBreakerLongestOpen runs a breaker at the largest accepted open periods
// through many failed probes: the period stays at MaxOpenFor and time moves on.
func TestBreakerLongestOpen(t *testing.T) {
	c := Config{MinCalls: 1, OpenFor: openForMax, MaxOpenFor: openForMax}
	h := newBreakerHarness(t, c)
	h.trip(0)
	at := openForMax
	for range 100 {
		h.refuse(at-1, at)
		h.done(at, h.admit(at), Failure, Open)
		at += openForMax
	}
	c = Config{MinCalls: 1, OpenFor: openForMin, MaxOpenFor: openForMax}
	h = newBreakerHarness(t, c)
	h.trip(0)
	at, period := time.Duration(0), openForMin
	for range 100 {
		at += period
		h.refuse(at-1, at)
		h.done(at, h.admit(at), Failure, Open)
		period = min(2*period, openForMax)
	}
	if h.b.openFor != openForMax {
		t.Errorf("open period = %v after 100 failed probes, want %v", h.b.openFor, openForMax)
	}
}

func BenchmarkBreaker(b *testing.B) {
	for _, bm := range []struct {
		name string
		o    Outcome
	}{{"success", Success}, {"failure", Failure}} {
		b.Run(bm.name, func(b *testing.B) {
			c := withDefaults(Config{OpenFor: openForMin})
			br := New(&c, breakerBase)
			now := breakerBase
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(10 * time.Microsecond)
				if ok, gen, _ := br.Admit(now); ok {
					br.Done(now, gen, bm.o)
				}
			}
		})
	}
}
