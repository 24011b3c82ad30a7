package kernel

import (
	"math"
	"math/rand/v2"
	"time"
)

// DefaultBackoff is the delay before retry number n (1 for the first retry) under
// policy p: Base × Multiplier^(n-1), capped at Max, then jittered per p.Jitter.
// p's zero fields take their defaults.
func DefaultBackoff(p RetryPolicy, n int) time.Duration {
	p = p.withDefaults()
	d := float64(p.Base) * math.Pow(p.Multiplier, float64(max(n-1, 0)))
	if d > float64(p.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(p.Max)
	}
	dd := time.Duration(d)
	switch p.Jitter {
	case JitterFull:
		return time.Duration(rand.Int64N(int64(dd) + 1))
	case JitterEqual:
		return dd/2 + time.Duration(rand.Int64N(int64(dd/2)+1))
	default:
		return dd
	}
}

// backoff is the delay before the retry that follows attempt n.
func backoff(p *RetryPolicy, n int, err error) time.Duration {
	if p.BackoffFunc != nil {
		return max(p.BackoffFunc(n, err), 0)
	}
	return DefaultBackoff(*p, n)
}

// retryBudget admits retries while, over a sliding window of one-second slots,
// retries stay below ratio × first attempts + minPerSecond × window. Loop-owned.
type retryBudget struct {
	cfg   RetryBudget
	slots []budgetSlot
}

type budgetSlot struct {
	sec            int64 // unix second the slot holds
	first, retries int64
}

func (b *retryBudget) init(c RetryBudget) { b.setConfig(c) }

func (b *retryBudget) setConfig(c RetryBudget) {
	b.cfg = c
	n := int(max(c.Window/time.Second, 1))
	if len(b.slots) != n {
		b.slots = make([]budgetSlot, n)
	}
}

func (b *retryBudget) slot(now time.Time) *budgetSlot {
	sec := now.Unix()
	s := &b.slots[int(uint64(sec)%uint64(len(b.slots)))]
	if s.sec != sec {
		*s = budgetSlot{sec: sec}
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
	lo := now.Unix() - int64(len(b.slots)) + 1
	var first, retries int64
	for i := range b.slots {
		if s := &b.slots[i]; s.sec >= lo {
			first += s.first
			retries += s.retries
		}
	}
	limit := b.cfg.Ratio*float64(first) + float64(b.cfg.MinPerSecond*len(b.slots))
	if float64(retries) >= limit {
		return false
	}
	b.slot(now).retries++
	return true
}
