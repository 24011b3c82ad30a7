package check

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Errs collects the errors of one value's bad fields. Not safe for concurrent use.
type Errs struct {
	// Prefix goes before every field name: "Config.", "DurableTask[3].".
	Prefix string
	// New makes the error of a bad field: its whole name, the rejected value (nil
	// for none to show) and the reason.
	New func(field string, value any, reason string) error

	errs []error
}

// Bad records that field (named after Prefix) holds v, which breaks reason.
func (e *Errs) Bad(field string, v any, reason string) {
	e.errs = append(e.errs, e.New(e.Prefix+field, v, reason))
}

// Add records errors found elsewhere (a nested value's).
func (e *Errs) Add(errs ...error) { e.errs = append(e.errs, errs...) }

// List returns the errors recorded, in order; nil if none.
func (e *Errs) List() []error { return e.errs }

// Err returns the errors recorded joined with [errors.Join]; nil if none.
func (e *Errs) Err() error { return errors.Join(e.errs...) }

// Number is what the bounds compare: counts, durations, ratios.
type Number interface {
	~int | ~int64 | ~float64
}

// NonNeg records field when v is below zero (or NaN): "must be >= 0".
func NonNeg[T Number](e *Errs, field string, v T) {
	if v < 0 || math.IsNaN(float64(v)) {
		e.Bad(field, v, "must be >= 0")
	}
}

// Upto records field when v is below zero ("must be >= 0") or above hi ("must be
// <= hi").
func Upto[T Number](e *Errs, field string, v, hi T) {
	switch {
	case v < 0:
		e.Bad(field, v, "must be >= 0")
	case v > hi:
		e.Bad(field, v, "must be <= "+fmt.Sprint(hi))
	}
}

// In records field when v is outside [0, hi] (or NaN): "must be in [0, hi]". It
// reports whether v is in.
func In[T Number](e *Errs, field string, v, hi T) bool {
	if v < 0 || v > hi || math.IsNaN(float64(v)) {
		e.Bad(field, v, "must be in [0, "+fmt.Sprint(hi)+"]")
		return false
	}
	return true
}

// ZeroOrIn records field when v is neither zero (the default) nor in [lo, hi]:
// "must be 0 or in [lo, hi]". It reports whether v is either.
func ZeroOrIn[T Number](e *Errs, field string, v, lo, hi T) bool {
	if v != 0 && (v < lo || v > hi) {
		e.Bad(field, v, "must be 0 or in ["+fmt.Sprint(lo)+", "+fmt.Sprint(hi)+"]")
		return false
	}
	return true
}

// Bytes records field when s is longer than max bytes, with no value (s may be
// long) and the limit's name: "70 bytes: must be at most 64 bytes (KindMax)".
func Bytes(e *Errs, field, s string, max int, name string) {
	if len(s) > max {
		e.Bad(field, nil, strconv.Itoa(len(s))+" bytes: must be at most "+strconv.Itoa(max)+" bytes ("+name+")")
	}
}

// UniqueWindow records the fields of a unique key's window that break its rules:
// UniqueFor below zero ("must be >= 0"), or a window (UniqueFor or UniqueUntil) without
// a key, which records UniqueKey.
func UniqueWindow(e *Errs, key string, until time.Time, window time.Duration) {
	NonNeg(e, "UniqueFor", window)
	if key == "" && (window != 0 || !until.IsZero()) {
		e.Bad("UniqueKey", key, "must be set with UniqueFor or UniqueUntil")
	}
}
