package kernel

import "github.com/axsched/ax/store"

// Priority orders tasks between the three buckets. The zero value means [Normal].
// It is the task vocabulary that the kernel shares with its stores ([store.Priority]).
type Priority = store.Priority

// The priorities. [High] is picked most, [Low] least but never starved.
const (
	// PriorityDefault is the zero value; the kernel treats it as [Normal].
	PriorityDefault = store.PriorityDefault
	// High: urgent work; may use the reserved slots (Config.Reserve) and evict Low.
	High = store.High
	// Normal: the default.
	Normal = store.Normal
	// Low: bulk work; guaranteed a minimum share (Config.Quotas.LowGuaranteed).
	Low = store.Low
)

// ByPriority holds one value per priority.
type ByPriority[T any] = store.ByPriority[T]

// State is where a task is in its life ([store.State] has the diagram). The zero value
// is not a valid state.
//
// A task of a group whose attempt returned a [RateLimitedError] goes from Running
// back to Queued, at the head of its key's queue; one whose key's breaker is open
// under BreakerConfig.FailFast ends Failed from Queued, with [ErrCircuitOpen].
// Queued, Delayed and Retrying tasks may also end Canceled, Evicted or Abandoned;
// a durable task whose start a [store.SharedStore] refused ends Abandoned from Running,
// without running.
// Every accepted task reaches exactly one terminal state (see [store.State.Terminal]).
// A refused submission never becomes a task: its caller gets the error instead.
type State = store.State

// The states of a task.
const (
	// Delayed: accepted with a Delay or At in the future, waiting in the timing wheel.
	Delayed = store.Delayed
	// Queued: waiting in its priority's bucket for a slot (a task of a group: or in
	// its key's queue for a permit, see [GroupConfig]).
	Queued = store.Queued
	// Running: handed to an executor; its function runs or is about to.
	Running = store.Running
	// Retrying: an attempt failed and the next one waits for its backoff.
	Retrying = store.Retrying
	// Succeeded: the last attempt returned nil. Terminal.
	Succeeded = store.Succeeded
	// Failed: the last attempt returned an error (or panicked) and no retry is left. Terminal.
	Failed = store.Failed
	// TimedOut: the last attempt outlived its timeout. Terminal.
	TimedOut = store.TimedOut
	// Canceled: [Handle.Cancel], its batch's context, or [Kernel.Close] ended it. Terminal.
	Canceled = store.Canceled
	// Evicted: a High arrival took its place in a full kernel. Terminal.
	Evicted = store.Evicted
	// Abandoned: [Kernel.Shutdown] ended it before it ran (a delayed or retrying task
	// not yet due), or another owner of a [store.SharedStore] holds the durable task now
	// ([ErrTaskTaken]). Terminal.
	Abandoned = store.Abandoned
)

// normPriority maps the zero value to Normal.
func normPriority(p Priority) Priority {
	if p == PriorityDefault {
		return Normal
	}
	return p
}
