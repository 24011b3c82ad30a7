// Package breaker is the arithmetic of a circuit breaker: a sliding window of
// outcomes, the failure and slow-call ratios that trip it, the closed, open and
// half-open states, the half-open probe count and the open periods.
//
// A [Breaker] is a state machine driven by the times and outcomes its caller
// gives it, with no clock, lock or goroutine of its own; its caller owns it and
// serializes its use. Each admitted attempt carries the generation [Breaker.Admit]
// returned back to [Breaker.Done], so that an outcome meets the state it was
// admitted in:
//
//	b := breaker.New(&cfg, now)
//	ok, gen, wake := b.Admit(now)
//	if !ok {
//		// wait until wake (zero: until a probe's outcome)
//	}
//	// ... the attempt runs ...
//	from, to := b.Done(later, gen, breaker.Failure)
//
// # Rules
//
// A breaker is closed at first: attempts run, and their outcomes are counted over
// a sliding Window. It opens (trips) when the window holds at least MinCalls
// calls and failures/calls >= FailureRatio, or, with SlowCall set,
// slow/calls >= SlowRatio. While open it admits nothing. After OpenFor it is
// half-open and admits at most Probes attempts (an ignored outcome gives its
// place back); once Probes of them have succeeded it closes with an empty window,
// and as soon as one fails (or is slow, with SlowCall set) it opens again for
// twice its last open period, up to MaxOpenFor. Closing resets the open period to
// OpenFor. Outcomes of attempts admitted before the breaker's last change of
// state are dropped: they neither change the state nor count in the window.
//
// The window is cut into [Buckets] buckets of Window/Buckets, and a bucket leaves
// it whole, so an outcome counts for at least 9/10 of Window and at most Window
// after it was recorded.
package breaker
