package flow

import "strconv"

// State is the state of a flow run. A run starts Running and ends in exactly one
// of the other states.
type State uint8

// The states of a flow run.
const (
	// Running: some stage has not ended.
	Running State = iota + 1
	// Succeeded: every stage succeeded.
	Succeeded
	// Failed: a stage failed (see [Policy] for what happened to the others).
	Failed
	// Canceled: [Handle.Cancel] or [Durable.Cancel] ended the run before every
	// stage succeeded.
	Canceled
)

// String returns the state's name in lower case.
func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	case Canceled:
		return "canceled"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether s is a final state.
func (s State) Terminal() bool { return s == Succeeded || s == Failed || s == Canceled }

// StageState is the state of one stage of a run. A stage moves from Waiting to
// Running to one terminal state, or from Waiting straight to Canceled or Skipped.
type StageState uint8

// The states of a stage.
const (
	// StageWaiting: a stage it depends on has not succeeded yet.
	StageWaiting StageState = iota + 1
	// StageRunning: its task (or its count or shard tasks) is in the kernel.
	StageRunning
	// StageSucceeded: its task, or every shard, succeeded.
	StageSucceeded
	// StageFailed: its task, its count, or a shard failed after its retries.
	StageFailed
	// StageCanceled: the run was cancelled, or another stage failed under
	// FailFast, before this one succeeded.
	StageCanceled
	// StageSkipped: a stage it depends on failed (under ContinueIndependent); it
	// never ran.
	StageSkipped
)

// String returns the state's name in lower case.
func (s StageState) String() string {
	switch s {
	case StageWaiting:
		return "waiting"
	case StageRunning:
		return "running"
	case StageSucceeded:
		return "succeeded"
	case StageFailed:
		return "failed"
	case StageCanceled:
		return "canceled"
	case StageSkipped:
		return "skipped"
	}
	return "stage-state(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether s is a final state.
func (s StageState) Terminal() bool { return s >= StageSucceeded && s <= StageSkipped }

// StageStatus is a snapshot of one stage of a run ([Handle.Stage],
// [RunInfo].Stages).
type StageStatus struct {
	Name  string
	State StageState
	// Err is the stage's [*StageError] when it failed; nil otherwise.
	Err error
	// Shards is the shard count of a sharded stage once its CountFunc returned
	// (0 before, and for a plain stage); ShardsDone counts the shards that
	// succeeded.
	Shards, ShardsDone int
}
