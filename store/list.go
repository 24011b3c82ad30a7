package store

import (
	"context"
	"errors"
	"strconv"
)

// TaskLister is a [Store] that lists its tasks for operators: a console, a command line.
// It is optional: a store that does not implement it can still be used by the kernel,
// only not browsed. Both methods only read, and are safe for concurrent use with every
// other method.
//
// # Pages
//
// [TaskLister.ListTasks] returns the tasks that match a [TaskQuery] one page at a time,
// in an order of the store's choosing that may depend on the filter but is the same for
// every page of one filter. Pages are walked with cursors (keyset paging), never with
// offsets: [TaskPage.Next] and [TaskPage.Prev] are opaque strings to pass back as
// [TaskQuery.After] or [TaskQuery.Before] with the same filter. Following Next from the
// first page until it is empty visits every task that matched throughout the walk and
// did not change in between exactly once; a task that changed state, was purged or was
// requeued meanwhile may be missed or met twice.
//
// A store bounds the work of one call, so that listing never scans the task table: a
// page may hold fewer than [TaskQuery.Limit] tasks, even none, while Next is not empty
// (the store read as many rows as it allows itself in one call without filling the
// page). Keep following Next until it is empty to see every match.
type TaskLister interface {
	// ListTasks returns the page of tasks q asks for, without their payloads
	// (TaskInfo.Payload is nil; PayloadSize says how large it is). It returns an error
	// wrapping [ErrInvalidQuery] for a query that [TaskQuery.Validate] refuses or a
	// cursor the store did not make for this filter.
	ListTasks(ctx context.Context, q TaskQuery) (TaskPage, error)

	// LookupTask returns the task id in whatever state it is, with its payload when
	// payload is true (nil otherwise), its result and its attempt records, or an
	// error wrapping [ErrUnknownTask] when the store does not hold it. (ListTasks
	// may leave Result and History nil.)
	LookupTask(ctx context.Context, id string, payload bool) (TaskInfo, error)
}

// TaskQuery is what [TaskLister.ListTasks] lists: the tasks that match every filter
// that is set, one page of them. The zero TaskQuery lists every task, first page.
type TaskQuery struct {
	// State, when not zero, keeps the tasks in that state.
	State State
	// Kind, when not empty, keeps the tasks of that kind.
	Kind string
	// Group, when not empty, keeps the tasks of that group (StoredTask.Group).
	Group string
	// Key, when not empty, keeps the tasks of that key within Group; it needs Group.
	Key string
	// Owner, when not zero, keeps the tasks held by the owner of that epoch
	// ([Owner.Epoch]). A store may report a terminal task's last owner or none (see
	// [TaskInfo.Owner]): filter by owner to see the live tasks an owner holds.
	Owner uint64
	// Pool, when true, keeps the tasks that no owner holds. It excludes Owner.
	Pool bool
	// After, when not empty, asks for the page after the one whose [TaskPage.Next] it
	// is. Before, when not empty, asks for the page before the one whose
	// [TaskPage.Prev] it is. At most one of them is set; neither: the first page.
	After, Before string
	// Limit bounds the tasks of the page, at most [TaskListLimitMax]. If zero,
	// [TaskListLimitDefault].
	Limit int
}

// Limits of [TaskQuery].
const (
	// TaskListLimitDefault is the page size of a [TaskQuery] whose Limit is zero.
	TaskListLimitDefault = 50
	// TaskListLimitMax is the largest [TaskQuery.Limit].
	TaskListLimitMax = 1000
	// TaskCursorMax is the longest cursor a store makes ([TaskPage.Next], Prev), in
	// bytes: a cursor fits in a URL.
	TaskCursorMax = 1024
)

// ErrInvalidQuery: a [TaskQuery] breaks a rule of its fields, or carries a cursor
// the store did not make for its filter. The wrapping error names the field.
// Returned (wrapped) by [TaskLister.ListTasks].
var ErrInvalidQuery = errors.New("store: invalid query")

// Validate checks q's fields, without looking at any store: nil, or an error wrapping
// [ErrInvalidQuery] that names the first bad field. It does not check what a cursor
// holds; the store that made it does.
func (q *TaskQuery) Validate() error {
	switch {
	case q.State != 0 && (q.State < Delayed || q.State > Abandoned):
		return invalidQuery("State", strconv.Itoa(int(q.State)), "unknown state")
	case len(q.Kind) > KindMax:
		return invalidQuery("Kind", strconv.Itoa(len(q.Kind))+" bytes", "longer than KindMax bytes")
	case len(q.Group) > GroupNameMax:
		return invalidQuery("Group", strconv.Itoa(len(q.Group))+" bytes", "longer than GroupNameMax bytes")
	case len(q.Key) > GroupKeyMax:
		return invalidQuery("Key", strconv.Itoa(len(q.Key))+" bytes", "longer than GroupKeyMax bytes")
	case q.Key != "" && q.Group == "":
		return invalidQuery("Key", strconv.Quote(q.Key), "needs a Group")
	case q.Pool && q.Owner != 0:
		return invalidQuery("Pool", "true", "excludes Owner")
	case q.After != "" && q.Before != "":
		return invalidQuery("Before", strconv.Quote(q.Before), "excludes After")
	case len(q.After) > TaskCursorMax:
		return invalidQuery("After", strconv.Itoa(len(q.After))+" bytes", "longer than TaskCursorMax bytes")
	case len(q.Before) > TaskCursorMax:
		return invalidQuery("Before", strconv.Itoa(len(q.Before))+" bytes", "longer than TaskCursorMax bytes")
	case q.Limit < 0 || q.Limit > TaskListLimitMax:
		return invalidQuery("Limit", strconv.Itoa(q.Limit), "must be 0 to TaskListLimitMax")
	}
	return nil
}

// PageSize returns q.Limit, or [TaskListLimitDefault] when it is zero.
func (q *TaskQuery) PageSize() int {
	if q.Limit == 0 {
		return TaskListLimitDefault
	}
	return q.Limit
}

// Matches reports whether t, held by the owner of epoch owner (0: none), passes q's
// filters (not its cursors): how a store that filters in memory applies them.
func (q *TaskQuery) Matches(t *StoredTask, owner uint64) bool {
	switch {
	case q.State != 0 && t.State != q.State,
		q.Kind != "" && t.Kind != q.Kind,
		q.Group != "" && t.Group != q.Group,
		q.Key != "" && t.Key != q.Key,
		q.Owner != 0 && owner != q.Owner,
		q.Pool && owner != 0:
		return false
	}
	return true
}

// InvalidCursor returns the error of a cursor that a store cannot read: it wraps
// [ErrInvalidQuery] and names field ("After" or "Before").
func InvalidCursor(field, cursor string) error {
	if len(cursor) > 64 {
		cursor = cursor[:64] + "..."
	}
	return invalidQuery(field, strconv.Quote(cursor), "is not a cursor of this store and filter")
}

func invalidQuery(field, value, reason string) error {
	return &queryError{field: field, value: value, reason: reason}
}

type queryError struct{ field, value, reason string }

func (e *queryError) Error() string {
	return "store: invalid query: TaskQuery." + e.field + " = " + e.value + ": " + e.reason
}

func (e *queryError) Unwrap() error { return ErrInvalidQuery }

// TaskInfo is a task as a [TaskLister] shows it: the stored task and what an operator
// needs beside it.
type TaskInfo struct {
	StoredTask
	// Owner is the epoch of the owner that holds the task ([Owner.Epoch]), 0 when it is
	// in the pool. For a terminal task a store may report the last owner or 0.
	Owner uint64
	// PayloadSize is the payload's length in bytes, whether or not Payload holds it.
	PayloadSize int
}

// TaskPage is one page of [TaskLister.ListTasks].
type TaskPage struct {
	// Tasks are the page's tasks, in the store's order for the filter.
	Tasks []TaskInfo
	// Next is the cursor of the page after this one ([TaskQuery.After]), empty when
	// the store found no more tasks after it.
	Next string
	// Prev is the cursor of the page before this one ([TaskQuery.Before]), empty when
	// the store found no task before it, and on an empty page.
	Prev string
}
