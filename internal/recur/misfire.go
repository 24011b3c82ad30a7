package recur

import "time"

// Policy says what a schedule does with the occurrences it missed: targets that passed
// more than the schedule's grace before they could fire. A target that fires within
// the grace after its time is not misfired and fires normally under every policy.
type Policy uint8

// The misfire policies.
const (
	// Default is the zero value, treated as [Once].
	Default Policy = iota
	// Once fires the missed targets as one: the latest of them fires, and its
	// [Fire.Missed] counts the others. When a target within the grace is due as well,
	// that one fires instead and counts every missed one.
	Once
	// Skip fires none of the missed targets: the schedule resumes at its next target,
	// and the next [Fire.Missed] counts them.
	Skip
	// All fires every missed target, in order, at most the request's catch-up limit of
	// them (the latest ones); the first fire's [Fire.Missed] counts the earlier ones,
	// which do not fire.
	All
)

const (
	// CatchUpDefault is the most fires one catch-up makes when the request sets none.
	CatchUpDefault = 100
	// ScanMax bounds the targets of a schedule other than [Every] that one catch-up
	// enumerates from its first missed target; see [Fire.Missed].
	ScanMax = 10_000
)

// Fire is one occurrence of a schedule.
type Fire struct {
	// Scheduled is the occurrence's target time.
	Scheduled time.Time
	// Missed counts the targets between the previous fire and this one that did not fire
	// (misfired, skipped by the policy, or beyond the catch-up limit). For an [Every]
	// schedule it is exact. For other schedules, when more than [ScanMax] targets were
	// missed at once, it counts the first ScanMax and the latest ones, not those
	// between.
	Missed int
}

// Request is the state of a schedule whose next target may be due.
type Request struct {
	Schedule Schedule
	// Next is the first target not yet fired.
	Next time.Time
	// Now is the clock's time.
	Now time.Time
	// Policy is the misfire policy; the zero value is Once.
	Policy Policy
	// Grace is how late a target may fire and still be on time; negative means zero.
	Grace time.Duration
	// MaxCatchUp bounds the fires; <= 0 means CatchUpDefault.
	MaxCatchUp int
	// Carried counts missed targets that no fire has reported yet.
	Carried int
}

// Result is what to fire now and where the schedule resumes.
type Result struct {
	// Fires are the occurrences to fire now, in order; the first one's Missed includes
	// the request's Carried.
	Fires []Fire
	// Next is the first target after Now (the request's Next when it is after Now),
	// or the zero Time when the schedule has none.
	Next time.Time
	// Carried counts the missed targets no fire reported (all of them when Fires is
	// empty): the next request's Carried.
	Carried int
	// Missed counts the due targets of this request that do not fire.
	Missed int
}

// Missed computes which occurrences a schedule fires at r.Now, by r.Policy: of the due
// targets (from r.Next up to r.Now), those earlier than r.Now - r.Grace are late. At
// most r.MaxCatchUp fire, the latest ones; the others count as missed.
//
// The work is bounded whatever the gap between r.Next and r.Now: for an [Every]
// schedule it is arithmetic; for others it enumerates at most about 10,000 targets from
// r.Next and then jumps, by Schedule.Next from points before r.Now, to the latest ones
// (a Schedule's Next is a function of its argument only).
func Missed(r Request) Result {
	if r.Next.IsZero() || r.Next.After(r.Now) {
		return Result{Next: r.Next, Carried: r.Carried}
	}
	k := r.MaxCatchUp
	if k <= 0 {
		k = CatchUpDefault
	}
	grace := max(r.Grace, 0)
	cutoff := r.Now.Add(-grace) // targets before cutoff are late

	var d dueTargets
	if e, ok := r.Schedule.(Every); ok {
		d = dueEvery(time.Duration(e), r.Next, r.Now, k)
	} else {
		d = dueScan(r.Schedule, r.Next, r.Now, k)
	}

	// tail holds the latest due targets, at most k; before counts the earlier ones.
	tail, before := d.tail, d.count-len(d.tail)
	onTime := len(tail)
	for i, t := range tail {
		if !t.Before(cutoff) {
			onTime = i
			break
		}
	}
	lateInTail := onTime
	var fire []time.Time
	var skipped int
	switch r.Policy {
	case Skip:
		fire, skipped = tail[onTime:], before+lateInTail
	case All:
		fire, skipped = tail, before
	default: // Once
		if onTime < len(tail) {
			fire, skipped = tail[onTime:], before+lateInTail
		} else {
			fire, skipped = tail[len(tail)-1:], d.count-1
		}
	}
	res := Result{Next: d.next, Missed: skipped}
	if len(fire) == 0 {
		res.Carried = r.Carried + skipped
		return res
	}
	res.Fires = make([]Fire, len(fire))
	for i, t := range fire {
		res.Fires[i].Scheduled = t
	}
	res.Fires[0].Missed = r.Carried + skipped
	return res
}

// DueOne reports whether next, due at now, is the only target of s due and is on
// time (grace), and returns the target after it. Then Missed, under every policy,
// fires next alone, with the request's Carried as its Missed, and resumes at that
// target: DueOne is its common case, without its allocations.
func DueOne(s Schedule, next, now time.Time, grace time.Duration) (time.Time, bool) {
	if next.After(now) || next.Before(now.Add(-max(grace, 0))) {
		return time.Time{}, false
	}
	after := s.Next(next)
	return after, after.IsZero() || after.After(now)
}

// dueTargets are the targets due at a time: how many, the latest of them, and the first
// target after the time.
type dueTargets struct {
	count int
	tail  []time.Time
	next  time.Time
}

// dueEvery returns the due targets of Every(step) whose first target is next, by
// arithmetic.
func dueEvery(step time.Duration, next, now time.Time, k int) dueTargets {
	n := int(now.Sub(next)/step) + 1 // targets next + i*step <= now
	m := min(n, k)
	tail := make([]time.Time, m)
	for i := range m {
		tail[i] = next.Add(time.Duration(n-m+i) * step)
	}
	return dueTargets{count: n, tail: tail, next: tail[m-1].Add(step)}
}

// dueScan returns the due targets of s whose first target is next, calling s.Next a
// bounded number of times.
func dueScan(s Schedule, next, now time.Time, k int) dueTargets {
	ring := newTimeRing(k)
	n := 0
	t := next
	for ; !t.IsZero() && !t.After(now); t = s.Next(t) {
		if n == ScanMax {
			return dueJump(s, ring, n, now, k)
		}
		ring.push(t)
		n++
	}
	return dueTargets{count: n, tail: ring.slice(), next: t}
}

// dueJump finds the latest k targets of s up to now, after dueScan counted n of them
// from the first one, the last of which the ring holds: it looks back from now over
// windows that double until one holds k targets or reaches the scanned ones.
func dueJump(s Schedule, scanned *timeRing, n int, now time.Time, k int) dueTargets {
	first, last := scanned.first(), scanned.last()
	// A window of the scanned targets' mean spacing times k to start with.
	w := max(last.Sub(first)/time.Duration(max(scanned.len()-1, 1))*time.Duration(k), time.Second)
	var win *timeRing
	var c int
	var t time.Time
	for probe := 0; probe < 64; probe++ {
		from := now.Add(-w)
		if !from.After(last) {
			from = last
		}
		win, c = newTimeRing(k), 0
		for t = s.Next(from); !t.IsZero() && !t.After(now) && c < ScanMax; t = s.Next(t) {
			win.push(t)
			c++
		}
		switch {
		case !t.IsZero() && !t.After(now) && c == ScanMax:
			w = max(w/4, time.Nanosecond) // too dense: a smaller window
			continue
		case c < k && from.After(last):
			w *= 2
			continue
		}
		break
	}
	if t.IsZero() || !t.After(now) {
		// A pathological schedule: resume at its first target after now.
		t = s.Next(now)
	}
	if c < k {
		// The window reached the scanned targets: keep the latest of both.
		merged := newTimeRing(k)
		for _, x := range scanned.slice() {
			merged.push(x)
		}
		for _, x := range win.slice() {
			merged.push(x)
		}
		win = merged
	}
	return dueTargets{count: n + c, tail: win.slice(), next: t}
}

// timeRing keeps the last cap times pushed.
type timeRing struct {
	buf  []time.Time
	head int // index of the oldest once full
}

func newTimeRing(n int) *timeRing { return &timeRing{buf: make([]time.Time, 0, n)} }

func (r *timeRing) push(t time.Time) {
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, t)
		return
	}
	r.buf[r.head] = t
	r.head = (r.head + 1) % len(r.buf)
}

func (r *timeRing) len() int { return len(r.buf) }

func (r *timeRing) first() time.Time { return r.buf[r.head] }

func (r *timeRing) last() time.Time {
	return r.buf[(r.head+len(r.buf)-1)%len(r.buf)]
}

// slice returns the times oldest first.
func (r *timeRing) slice() []time.Time {
	out := make([]time.Time, 0, len(r.buf))
	out = append(out, r.buf[r.head:]...)
	return append(out, r.buf[:r.head]...)
}
