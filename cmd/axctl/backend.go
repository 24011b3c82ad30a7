package main

import (
	"context"
	"strconv"
	"time"

	"github.com/axsched/ax/store"
)

// backend is what a command acts on: the database or a console.
type backend interface {
	// tasks returns a page of the tasks matching f (a page may hold fewer than
	// f.limit tasks while Next is not empty: the store bounds its reads).
	tasks(ctx context.Context, f taskFilter) (taskPage, error)
	// task returns one task, or an error wrapping store.ErrUnknownTask.
	task(ctx context.Context, id string) (taskRow, error)
	// deadLetters returns a page of dead letters, by ID, after after.
	deadLetters(ctx context.Context, limit int, after string) (taskPage, error)
	// requeue requeues the dead letters among ids and returns how many it requeued.
	requeue(ctx context.Context, ids []string) (int, error)
	// purge deletes the dead letters among ids and returns how many it deleted.
	purge(ctx context.Context, ids []string) (int, error)
	owners(ctx context.Context) ([]ownerRow, error)
	schedules(ctx context.Context) ([]scheduleRow, error)
	pauseSchedule(ctx context.Context, name string, paused bool) error
	triggerSchedule(ctx context.Context, name string) error
	close() error
}

// taskFilter selects the tasks of tasks list.
type taskFilter struct {
	state, kind, group, key string
	owner                   string // an owner's name or epoch, or "pool"
	after, before           string // cursors
	limit                   int
}

// taskPage is a page of tasks and the cursors to pass as --after for the next
// page and as --before for the previous one (empty when there is none).
type taskPage struct {
	Tasks []taskRow `json:"tasks"`
	Next  string    `json:"next,omitempty"`
	Prev  string    `json:"prev,omitempty"`

	hint string // printed on stderr after the table
}

// taskRow is a task as axctl prints it: a stored task without its payload (it may
// hold secrets), only the payload's size.
type taskRow struct {
	ID           string    `json:"id"`
	Kind         string    `json:"kind"`
	State        string    `json:"state"`
	Priority     string    `json:"priority"`
	Group        string    `json:"group,omitempty"`
	Key          string    `json:"key,omitempty"`
	UniqueKey    string    `json:"unique_key,omitempty"`
	Owner        string    `json:"owner,omitempty"`       // the owner's name (its epoch where the name is unknown)
	OwnerEpoch   uint64    `json:"owner_epoch,omitempty"` // the owner's epoch; 0: the pool, or none
	Attempt      int       `json:"attempt"`
	MaxAttempts  int       `json:"max_attempts"`
	Fence        uint64    `json:"fence"`
	RunAt        time.Time `json:"run_at,omitzero"`
	TimeoutMS    int64     `json:"timeout_ms"`
	PayloadBytes int       `json:"payload_bytes"`
	LastError    string    `json:"last_error,omitempty"`
	CreatedAt    time.Time `json:"created_at,omitzero"`
	UpdatedAt    time.Time `json:"updated_at,omitzero"`
}

func taskRowOf(t *store.StoredTask) taskRow {
	return taskRow{
		ID: t.ID, Kind: t.Kind, State: t.State.String(), Priority: t.Priority.String(),
		Group: t.Group, Key: t.Key, UniqueKey: t.UniqueKey, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
		Fence: t.Fence, RunAt: utc(t.RunAt), TimeoutMS: t.Timeout.Milliseconds(), PayloadBytes: len(t.Payload),
		LastError: t.LastError, CreatedAt: utc(t.CreatedAt), UpdatedAt: utc(t.UpdatedAt),
	}
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// ownerRow is an owner of the store: every one the store keeps (--dsn), or the
// live ones a console lists (--url), which does not count their tasks.
type ownerRow struct {
	Name    string    `json:"name"`
	Epoch   uint64    `json:"epoch"`
	LeaseMS int64     `json:"lease_ms"`
	Expires time.Time `json:"expires"`
	Live    bool      `json:"live"`
	Tasks   *int      `json:"tasks,omitempty"` // the live tasks it holds; nil through a console
}

// scheduleRow is a schedule: as the store keeps it (--dsn), or as a console's
// scheduler runs it (--url), which adds its counters and last outcome.
type scheduleRow struct {
	Name          string    `json:"name"`
	Spec          string    `json:"spec"`
	Next          time.Time `json:"next,omitzero"`
	Last          time.Time `json:"last,omitzero"`
	Paused        bool      `json:"paused"`
	Ended         bool      `json:"ended"`
	Version       uint64    `json:"version,omitempty"`
	UpdatedAt     time.Time `json:"updated_at,omitzero"`
	Fires         uint64    `json:"fires,omitempty"`
	Misfires      uint64    `json:"misfires,omitempty"`
	Skipped       uint64    `json:"skipped,omitempty"`
	Refused       uint64    `json:"refused,omitempty"`
	LastOutcome   string    `json:"last_outcome,omitempty"`
	LastOutcomeAt time.Time `json:"last_outcome_at,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
}

// taskRowOfInfo is taskRowOf for a task a store.TaskLister returned; names maps
// owners' epochs to their names.
func taskRowOfInfo(ti *store.TaskInfo, names map[uint64]string) taskRow {
	r := taskRowOf(&ti.StoredTask)
	r.PayloadBytes = ti.PayloadSize
	r.OwnerEpoch = ti.Owner
	if ti.Owner != 0 {
		r.Owner = names[ti.Owner]
		if r.Owner == "" {
			r.Owner = strconv.FormatUint(ti.Owner, 10)
		}
	}
	return r
}
