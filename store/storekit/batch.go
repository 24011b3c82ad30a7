package storekit

import (
	"fmt"

	"github.com/axsched/ax/store"
)

// RefuseBeforeInsert sets results[i] to an error wrapping [store.ErrInvalidChange] for
// every change i that comes before the first insert of its task in changes, as the
// [store.Store] contract requires: such a change would apply or not depending on whether
// an earlier batch had inserted the task, so a retried batch could not report what the
// first attempt reported.
//
// results has one entry per change and holds the refusals decided so far (nil for a change
// still valid). Changes already refused are skipped, and a refused insert does not count
// as the task's insert, so call it after every per-change check ([store.Change.Validate],
// a payload limit) and before looking at stored rows. It only reads changes.
func RefuseBeforeInsert(changes []store.Change, results []error) {
	var pending map[string][]int // task ID → valid non-insert changes seen before any insert
	seen := make(map[string]bool, len(changes))
	for i := range changes {
		c := &changes[i]
		if results[i] != nil || seen[c.Task.ID] {
			continue
		}
		if c.Op == store.OpInsert {
			seen[c.Task.ID] = true
			for _, j := range pending[c.Task.ID] {
				results[j] = fmt.Errorf("storekit: %s %q: comes before the task's insert in the batch: %w",
					changes[j].Op, changes[j].Task.ID, store.ErrInvalidChange)
			}
			delete(pending, c.Task.ID)
			continue
		}
		if pending == nil {
			pending = make(map[string][]int)
		}
		pending[c.Task.ID] = append(pending[c.Task.ID], i)
	}
}

// NextOfTask returns, for each change, the index in changes of the next change with the
// same task ID, or -1 when there is none: the index [AlreadyApplied] walks. It only reads
// changes.
func NextOfTask(changes []store.Change) []int {
	next := make([]int, len(changes))
	last := make(map[string]int, len(changes))
	for i := len(changes) - 1; i >= 0; i-- {
		id := changes[i].Task.ID
		if j, ok := last[id]; ok {
			next[i] = j
		} else {
			next[i] = -1
		}
		last[id] = i
	}
	return next
}

// AlreadyApplied reports whether changes[i], which cannot apply to its stored task (its
// fence differs from the stored fence, or the task is terminal), is done nonetheless, so
// that Commit reports nil for it instead of [store.ErrStaleFence]. That is the case when
// the task is where changes[i] leaves it, or where the later changes of the same task in
// the batch leave it once changes[i] applied: the batch is the retry of one that landed.
// See "Idempotence and lost answers" in [store.Store].
//
// fence, state and attempt describe the stored task as the store reads it before the
// batch, or as earlier changes of the batch left it. attempt is compared only once the
// simulation has passed an [store.OpStart]; a store that does not know it passes -1,
// which matches no start. results holds the outcomes decided so far: the later changes are simulated from
// the state changes[i] leaves, and one of them applies when that state is live and it
// expects that fence; refused changes (results[j] != nil) and inserts (no-ops on a task
// that exists) are skipped. next is [NextOfTask] of changes. It only reads its arguments.
func AlreadyApplied(changes []store.Change, results []error, next []int, i int, fence uint64, state store.State, attempt int) bool {
	c := &changes[i]
	simFence, simState, simAttempt := c.ResultFence(), c.ResultState(), -1
	if c.Op == store.OpStart {
		simAttempt = c.Task.Attempt
	}
	for {
		if fence == simFence && state == simState && (simAttempt < 0 || attempt == simAttempt) {
			return true
		}
		if !simState.Live() {
			return false
		}
		j := next[i]
		for ; j >= 0; j = next[j] {
			if results[j] == nil && changes[j].Op != store.OpInsert && changes[j].Fence == simFence {
				break
			}
		}
		if j < 0 {
			return false
		}
		c, i = &changes[j], j
		simFence, simState = c.ResultFence(), c.ResultState()
		if c.Op == store.OpStart {
			simAttempt = c.Task.Attempt
		}
	}
}
