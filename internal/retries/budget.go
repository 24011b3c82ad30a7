// Package retries is the arithmetic of retries: the delay of a backoff
// ([Backoff]), and a retry budget ([Budget]): over a sliding window, retries may
// be at most a ratio of the first attempts plus a floor per second.
//
// The package has no clock, lock or goroutine: the caller passes the time, and
// a [Budget] belongs to its caller, who serializes its use, and is set up by
// [Budget.SetConfig] before any other call.
package retries

import "time"

// Config is a budget's parameters. Window must be > 0.
type Config struct {
	Ratio        float64       // retries per first attempt
	MinPerSecond int           // retries per second allowed whatever the ratio
	Window       time.Duration // the accounting's window
	Disabled     bool          // every retry is allowed
}

// Budget admits retries while, over a sliding window of slots, retries stay
// below Ratio × first attempts + MinPerSecond × window. The window is cut into at
// most SlotsMax slots of a second or more each, so any window costs a few
// kilobytes, and it slides a slot at a time.
type Budget struct {
	cfg   Config
	width int64 // ns per slot
	floor float64
	slots []slot
}

// SlotsMax bounds the slots of a budget's window.
const SlotsMax = 60

type slot struct {
	idx            int64 // the slot's number: unix time / width
	first, retries int64
}

// SetConfig installs c, keeping the counts when the slots stay the same.
func (b *Budget) SetConfig(c Config) {
	b.cfg = c
	n := int(min(max(c.Window/time.Second, 1), SlotsMax))
	width := max(int64(c.Window)/int64(n), int64(time.Second))
	if len(b.slots) != n || b.width != width {
		b.slots = make([]slot, n)
		b.width = width
	}
	b.floor = float64(c.MinPerSecond) * float64(width) * float64(n) / float64(time.Second)
}

func (b *Budget) slot(now time.Time) *slot {
	idx := now.UnixNano() / b.width
	s := &b.slots[int(uint64(idx)%uint64(len(b.slots)))]
	if s.idx != idx {
		*s = slot{idx: idx}
	}
	return s
}

// First records a first attempt.
func (b *Budget) First(now time.Time) { b.slot(now).first++ }

// FirstN records n first attempts.
func (b *Budget) FirstN(now time.Time, n int) { b.slot(now).first += int64(n) }

// Allow reports whether a retry may happen now, and records it if so.
func (b *Budget) Allow(now time.Time) bool {
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
	if float64(retries) >= b.cfg.Ratio*float64(first)+b.floor {
		return false
	}
	b.slot(now).retries++
	return true
}

// Refill returns the later of at and when the window next slides after now (the
// start of the next slot, when the oldest slot's retries stop counting): a retry
// Allow refused may be allowed from then on.
func (b *Budget) Refill(now, at time.Time) time.Time {
	if r := time.Unix(0, (now.UnixNano()/b.width+1)*b.width); r.After(at) {
		return r
	}
	return at
}

// Use returns how much of a budget of config c the retries used over span, in
// which first attempts and retries started: the retries over those the budget
// allows in such a span (Ratio × first + MinPerSecond × span). 1 or more means the
// budget refuses retries. It returns 0 for a disabled budget or an empty span.
func Use(c Config, first, retries uint64, span time.Duration) float64 {
	allowed := c.Ratio*float64(first) + float64(c.MinPerSecond)*span.Seconds()
	if c.Disabled || allowed <= 0 {
		return 0
	}
	return float64(retries) / allowed
}
