package rate

import (
	"math"
	"time"
)

// Limit is a rate as GCRA uses it: a token every Interval, taken up to Tolerance
// ahead of its time (burst - 1 intervals), and counted at its due time when
// taken at most Late after it, by a caller that waited for it. The zero Limit
// is no limit.
type Limit struct {
	Interval  int64 // nanoseconds between tokens; 0: no limit
	Tolerance int64 // nanoseconds a token may be taken ahead of its time
	Late      int64 // nanoseconds after its due time a waited-for token still counts at that time
}

// NewLimit returns the limit of n tokens per per, in a bucket of burst tokens
// (0 means 1), with lateness late (see [Bucket.Take]). n 0 returns the zero
// Limit. The caller validates: n >= 0, per/n at least a nanosecond when n > 0,
// burst >= 0. A tolerance too large to add to a time without overflow is
// capped at math.MaxInt64/4 nanoseconds.
func NewLimit(n int, per time.Duration, burst int, late time.Duration) Limit {
	if n == 0 {
		return Limit{}
	}
	iv := int64(per / time.Duration(n))
	b := int64(max(burst, 1)) - 1
	tol := int64(math.MaxInt64 / 4)
	if b == 0 || iv <= tol/b {
		tol = iv * b
	}
	return Limit{Interval: iv, Tolerance: tol, Late: int64(late)}
}

// Bucket is one token bucket's state: the theoretical arrival time of its next
// token, and whether a start has waited for it. The zero Bucket is full. A
// Bucket is not safe for concurrent use.
type Bucket struct {
	tat  int64
	owed bool // a start was refused for want of a token since the last Take
}

// Next returns when a token of b under l is available: a start at now may go
// when the result is <= now. Without a limit it returns math.MinInt64.
func (b *Bucket) Next(l Limit) int64 {
	if l.Interval == 0 {
		return math.MinInt64
	}
	return b.tat - l.Tolerance
}

// Refuse notes that a start waits for the token [Bucket.Next] returned, which is
// after now.
func (b *Bucket) Refuse(l Limit) {
	if l.Interval != 0 {
		b.owed = true
	}
}

// Take spends a token at now, which [Bucket.Next] allowed. When a start waited
// for this token (Refuse) and takes it at most l.Late after it came due, the
// token counts as taken when it came due; otherwise it counts as taken at now.
func (b *Bucket) Take(l Limit, now int64) {
	if l.Interval == 0 {
		return
	}
	if b.owed && now-(b.tat-l.Tolerance) <= l.Late {
		b.tat += l.Interval // b.tat >= now - l.Late: the token was due no earlier
	} else {
		b.tat = max(b.tat, now) + l.Interval
	}
	b.owed = false
}

// Full reports whether b is full at now, so that it may be forgotten: a zero
// Bucket would decide the same.
func (b *Bucket) Full(now int64) bool { return b.tat <= now }
