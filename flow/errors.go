package flow

import (
	"errors"
	"strconv"
)

// The definition errors [Run] and [Flow.Validate] return, each wrapped in a
// [*DefError] naming the flow and the stage; test with errors.Is.
var (
	// ErrEmpty: the flow has no stages.
	ErrEmpty = errors.New("flow: no stages")
	// ErrDuplicate: two stages share a name.
	ErrDuplicate = errors.New("flow: stage defined twice")
	// ErrUnknown: a stage depends on a stage the flow does not define.
	ErrUnknown = errors.New("flow: unknown stage")
	// ErrCycle: stages depend on one another in a cycle.
	ErrCycle = errors.New("flow: dependency cycle")
)

// ErrShardCount is wrapped by the error of a sharded stage whose CountFunc
// returned a count outside [1, MaxShards] or panicked: the stage failed and none
// of its shards ran.
var ErrShardCount = errors.New("flow: bad shard count")

// DefError reports a bad flow definition, naming the flow and the stage. Err is
// one of [ErrEmpty], [ErrDuplicate], [ErrUnknown], [ErrCycle] or a
// *kernel.ConfigError naming a bad option.
type DefError struct {
	Flow  string // the flow's name
	Stage string // the stage at fault; "" for ErrEmpty
	// Detail says more: the unknown dependency, or the stages on the cycle.
	Detail string
	Err    error
}

// Error returns a message such as
// `flow "etl": stage "clean": flow: unknown stage: depends on "fetch2"`.
func (e *DefError) Error() string {
	s := "flow " + strconv.Quote(e.Flow) + ": "
	if e.Stage != "" {
		s += "stage " + strconv.Quote(e.Stage) + ": "
	}
	s += e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns Err.
func (e *DefError) Unwrap() error { return e.Err }

// StageError is the error of a stage that failed: [Handle.Err] returns it
// (joined with the others under ContinueIndependent) and [StageStatus.Err]
// holds it. Err is the final error of the stage's task (after its retries), of
// the failed shard, of its CountFunc, or the kernel's refusal to take the task.
type StageError struct {
	Flow  string
	Stage string
	// Shard is the index of the shard that failed, -1 when the stage is not
	// sharded or the failure came before its shards (the count, a refusal).
	Shard int
	Err   error
}

// Error returns a message such as
// `flow "etl": stage "clean": shard 3: boom`.
func (e *StageError) Error() string {
	s := "flow " + strconv.Quote(e.Flow) + ": stage " + strconv.Quote(e.Stage) + ": "
	if e.Shard >= 0 {
		s += "shard " + strconv.Itoa(e.Shard) + ": "
	}
	return s + e.Err.Error()
}

// Unwrap returns Err.
func (e *StageError) Unwrap() error { return e.Err }
