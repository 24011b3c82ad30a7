package kernel

import (
	"math"
	"math/rand/v2"
	"time"
)

// DefaultBackoff is the delay before retry number n (1 for the first retry) under
// policy p: Base × Multiplier^(n-1), capped at Max, then jittered per p.Jitter.
// p's zero fields take their defaults. The result is in [0, Max] for every policy
// that validates, however large its fields: the growth is computed in floating
// point and capped before it becomes a Duration.
func DefaultBackoff(p RetryPolicy, n int) time.Duration {
	p = p.withDefaults()
	dd := p.Max
	if d := float64(p.Base) * math.Pow(p.Multiplier, float64(max(n-1, 0))); d < float64(p.Max) {
		dd = time.Duration(d) // below Max, so it fits
	}
	dd = max(dd, 0)
	switch p.Jitter {
	case JitterFull:
		return time.Duration(rand.Uint64N(uint64(dd) + 1)) // <= dd: fits
	case JitterEqual:
		return dd - dd/2 + time.Duration(rand.Uint64N(uint64(dd/2)+1))
	default:
		return dd
	}
}

// backoff is the delay before the retry that follows attempt n. A BackoffFunc's
// negative answer means no delay. The loop waits for a BackoffFunc, which runs on
// a goroutine of its own (callGuarded) so that neither a panic nor a
// runtime.Goexit in it ends the loop; either one is counted in
// Stats.CallbackPanics and gets the default rule's delay instead.
func (k *Kernel) backoff(p *RetryPolicy, n int, err error) time.Duration {
	if p.BackoffFunc != nil {
		var d time.Duration
		if _, ok := callGuarded(k, func() { d = p.BackoffFunc(n, err) }); ok {
			return max(d, 0)
		}
		k.m.callbackPanics.Inc()
	}
	return DefaultBackoff(*p, n)
}

// retryBudget admits retries while, over a sliding window of slots, retries stay
// below ratio × first attempts + minPerSecond × window. The window is cut into at
// most budgetSlotsMax slots of a second or more each, so any Window costs a few
// kilobytes. Loop-owned.
type retryBudget struct {
	cfg   RetryBudget
	width int64 // ns per slot
	floor float64
	slots []budgetSlot
}

// budgetSlotsMax bounds the slots of a retry budget's window.
const budgetSlotsMax = 60

type budgetSlot struct {
	idx            int64 // the slot's number: unix time / width
	first, retries int64
}

func (b *retryBudget) init(c RetryBudget) { b.setConfig(c) }

func (b *retryBudget) setConfig(c RetryBudget) {
	b.cfg = c
	n := int(min(max(c.Window/time.Second, 1), budgetSlotsMax))
	width := max(int64(c.Window)/int64(n), int64(time.Second))
	if len(b.slots) != n || b.width != width {
		b.slots = make([]budgetSlot, n)
		b.width = width
	}
	b.floor = float64(c.MinPerSecond) * float64(width) * float64(n) / float64(time.Second)
}

func (b *retryBudget) slot(now time.Time) *budgetSlot {
	idx := now.UnixNano() / b.width
	s := &b.slots[int(uint64(idx)%uint64(len(b.slots)))]
	if s.idx != idx {
		*s = budgetSlot{idx: idx}
	}
	return s
}

// first records a first attempt.
func (b *retryBudget) first(now time.Time) { b.slot(now).first++ }

// firstN records n first attempts (those started on the fast lane since the last pass).
func (b *retryBudget) firstN(now time.Time, n int) { b.slot(now).first += int64(n) }

// allow reports whether a retry may happen now, and records it if so.
func (b *retryBudget) allow(now time.Time) bool {
	if b.cfg.Disabled {
		return true
	}
	lo := now.UnixNano()/b.width - int64(len(b.slots)) + 1
	var first, retries int64
	for i := range b.slots {
		if s := &b.slots[i]; s.idx >= lo {
			first += s.first
			retries += s.retries
		}
	}
	limit := b.cfg.Ratio*float64(first) + b.floor
	if float64(retries) >= limit {
		return false
	}
	b.slot(now).retries++
	return true
}
