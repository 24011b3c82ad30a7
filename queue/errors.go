package queue

import (
	"errors"
	"strconv"
)

// ErrFull is returned by [Ring.Push] and [Buckets.Push] when the ring (or the level's
// bucket) already holds as many elements as its capacity. The push changed nothing;
// the caller decides whether to reject, wait or evict. Test for it with [errors.Is].
var ErrFull = errors.New("queue: full")

// QuotaError reports one invalid field of a [Quotas] value. [Quotas.Validate] returns
// one QuotaError per bad field, combined with [errors.Join]; find them with
// [errors.As].
type QuotaError struct {
	// Field is the name of the Quotas field: "High", "Normal" or "LowGuaranteed".
	Field string
	// Value is the rejected value.
	Value int
	// Reason says what a valid value looks like, e.g. "must be >= 1".
	Reason string
}

// Error returns a message such as "queue: Quotas.High = 0: must be >= 1".
func (e *QuotaError) Error() string {
	return "queue: Quotas." + e.Field + " = " + strconv.Itoa(e.Value) + ": " + e.Reason
}

// capacityError is the error of [NewRing], [Ring.Resize] and [NewBuckets] for a bad
// capacity; name says which one ("capacity", "capacity of low").
func capacityError(name string, capacity int, reason string) error {
	return errors.New("queue: " + name + " = " + strconv.Itoa(capacity) + ": " + reason)
}
