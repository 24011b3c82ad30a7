package store

import "strconv"

// Priority orders tasks between the kernel's three buckets. The zero value means
// [Normal].
type Priority uint8

// The priorities. [High] is picked most, [Low] least but never starved.
const (
	// PriorityDefault is the zero value; it is treated as [Normal].
	PriorityDefault Priority = iota
	// High: urgent work.
	High
	// Normal: the default.
	Normal
	// Low: bulk work, guaranteed a minimum share.
	Low
)

// String returns "high", "normal" or "low" (the zero value is "normal").
func (p Priority) String() string {
	switch p {
	case High:
		return "high"
	case Normal, PriorityDefault:
		return "normal"
	case Low:
		return "low"
	default:
		return "priority(" + strconv.Itoa(int(p)) + ")"
	}
}

// Valid reports whether p is one of the defined priorities (or the zero value).
func (p Priority) Valid() bool { return p <= Low }

// ByPriority holds one value per priority.
type ByPriority[T any] struct {
	High, Normal, Low T
}

// Get returns the value for p (the zero Priority reads Normal).
func (b *ByPriority[T]) Get(p Priority) T {
	switch p {
	case High:
		return b.High
	case Low:
		return b.Low
	default:
		return b.Normal
	}
}

// At returns a pointer to the value for p (the zero Priority points at Normal).
func (b *ByPriority[T]) At(p Priority) *T {
	switch p {
	case High:
		return &b.High
	case Low:
		return &b.Low
	default:
		return &b.Normal
	}
}

// State is where a task is in its life. The zero value is not a valid state.
//
//	Delayed ──▶ Queued ──▶ Running ──▶ Succeeded | Failed | TimedOut | Canceled
//	   ▲          ▲           │
//	   │          └─ Retrying ◀┘ (a failed attempt that will be tried again)
//
// Queued, Delayed and Retrying tasks may also end Canceled, Evicted or Abandoned.
// Live states are Delayed, Queued, Running and Retrying; the others are terminal.
type State uint8

// The states of a task.
const (
	// Delayed: accepted with a due time in the future.
	Delayed State = iota + 1
	// Queued: waiting for a slot.
	Queued
	// Running: an attempt runs or is about to.
	Running
	// Retrying: an attempt failed and the next one waits for its backoff.
	Retrying
	// Succeeded: the last attempt returned nil. Terminal.
	Succeeded
	// Failed: the last attempt returned an error (or panicked) and no retry is left. Terminal.
	Failed
	// TimedOut: the last attempt outlived its timeout. Terminal.
	TimedOut
	// Canceled: the task was canceled. Terminal.
	Canceled
	// Evicted: a High arrival took its place in a full kernel. Terminal.
	Evicted
	// Abandoned: the task was given up before it ran, or another owner holds it now.
	// Terminal.
	Abandoned
)

var stateNames = [...]string{
	Delayed:   "delayed",
	Queued:    "queued",
	Running:   "running",
	Retrying:  "retrying",
	Succeeded: "succeeded",
	Failed:    "failed",
	TimedOut:  "timed_out",
	Canceled:  "canceled",
	Evicted:   "evicted",
	Abandoned: "abandoned",
}

// String returns the state's lowercase name, as used in metrics and logs.
func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether s is an end state: no transition leaves it.
func (s State) Terminal() bool { return s >= Succeeded && s <= Abandoned }

// Live reports whether s is a live state, one that [Store.Recover] returns: Delayed,
// Queued, Running or Retrying.
func (s State) Live() bool { return s >= Delayed && s <= Retrying }

// DeadLetter reports whether s is a dead-letter state: Failed, TimedOut, Evicted or
// Abandoned (work that was not done).
func (s State) DeadLetter() bool {
	return s == Failed || s == TimedOut || s == Evicted || s == Abandoned
}

// Completed reports whether s is a completed state: Succeeded or Canceled.
func (s State) Completed() bool { return s == Succeeded || s == Canceled }
