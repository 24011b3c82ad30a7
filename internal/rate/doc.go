// Package rate is the token bucket arithmetic of a rate limit, in the form of
// the generic cell rate algorithm (GCRA): a bucket is one instant, the
// theoretical arrival time of its next token, and a start is allowed when that
// instant, less the burst's tolerance, has come.
//
// The package has no clock, lock or goroutine. Times are int64 nanoseconds on
// any monotonic scale the caller keeps, and must not go backwards. A [Limit] is
// immutable and may be shared; a [Bucket] belongs to its caller, who serializes
// its use:
//
//	l := rate.NewLimit(10, time.Second, 1, 2*time.Millisecond)
//	var b rate.Bucket
//	if at := b.Next(l); at > now {
//		b.Refuse(l) // wait until at, then ask again
//	} else {
//		b.Take(l, now)
//	}
//
// # Lateness
//
// A caller that waits for a token wakes up some time after it came due (a timer
// wheel rounds up to its tick, a busy loop adds its own delay). A start made at
// most [Limit.Late] after its token's due time, by a caller that waited for it
// ([Bucket.Refuse]), counts as made at that time, so that the lateness does not
// slow a backlogged caller, as the reservations of golang.org/x/time/rate keep
// their times however late the waiter wakes. A window of length w then holds at
// most burst + (w+Late)/Interval starts.
package rate
