package mysqlstore

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/store"
)

// Defaults and limits of [Options].
const (
	// TableDefault is the table used when Options.Table is empty.
	TableDefault = "ax_tasks"
	// TableMax is the longest table name, in bytes: the server's limit of 64 less the
	// longest suffix of the tables beside it (see "Schema" in the package docs).
	TableMax = 64 - len(ownersSuffix)
	// MaxPayloadDefault is the payload cap when Options.MaxPayload is zero: 1 MiB.
	MaxPayloadDefault = 1 << 20
	// MaxPayloadMax is the largest payload cap: 64 MiB (the server's max_allowed_packet
	// must hold twice the cap; see [Store.Migrate]).
	MaxPayloadMax = 64 << 20
	// MaxResultDefault is the result cap when Options.MaxResult is zero: 64 KiB.
	MaxResultDefault = 64 << 10
	// AttemptsKeptMax is the most attempt records per task Options.AttemptsKept may
	// keep.
	AttemptsKeptMax = 100
	// RetentionDefault is how long completed tasks are kept when Options.Retention is zero.
	RetentionDefault = 24 * time.Hour
	// PurgeIntervalDefault is how often completed tasks are purged when
	// Options.PurgeInterval is zero.
	PurgeIntervalDefault = time.Minute
	// RetriesDefault is how many times a call is retried when Options.Retries is zero.
	RetriesDefault = 4
	// LockWaitDefault bounds a statement's wait for a row lock when Options.LockWait is
	// zero.
	LockWaitDefault = 2 * time.Second
)

// Options configure a [Store]. The zero value is valid.
type Options struct {
	// Table names the task table; the owner, lease, epoch and schedule tables are named
	// after it with the suffixes _owners, _leases, _epochs, _sched, _starts and _stats. It must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,56}$ (at most TableMax bytes); it is checked before any SQL
	// runs and used as is (in backquotes), never escaped. If empty, TableDefault.
	Table string

	// MaxPayload caps the payload of a task, in bytes: an insert above it is refused with
	// [store.ErrPayloadTooLarge] and writes nothing. At most MaxPayloadMax. If zero,
	// MaxPayloadDefault.
	MaxPayload int

	// Retention is how long completed tasks (succeeded, canceled) are kept after their
	// last change and their due time (RunAt) before the store deletes them, checked every
	// PurgeInterval against the wall clock: a task that ended before it was due (one
	// canceled while it waited, one run early) is kept until Retention after its due
	// time. Dead letters and live tasks are never deleted by it. A batch retried after
	// its tasks were deleted could insert them again, so keep it well above the time a
	// caller retries a commit. If zero, RetentionDefault; if negative, completed tasks
	// are kept until [Store.PurgeCompleted] deletes them.
	Retention time.Duration

	// DropCompleted, when true, keeps no trace of a task that completes (succeeds or is
	// canceled) in the batch that inserts it, unless it holds a unique key: such a task
	// is never written, so [Store.Get] reports it unknown, and a batch of nothing else
	// costs one read of the primary key (to find replays). It suits periodic snapshots,
	// where most tasks start and end between two commits. Tasks that complete in a later
	// batch are kept for Retention like any other. If false, every task is written.
	DropCompleted bool

	// PurgeInterval is how often the store deletes completed tasks older than Retention,
	// from a goroutine that [Store.Close] stops. If zero, PurgeIntervalDefault.
	PurgeInterval time.Duration

	// Retries is how many times a call is retried, with exponential backoff from 2 ms,
	// after a deadlock, a lock wait timeout or a lost connection, before it returns an
	// error wrapping [store.ErrStoreUnavailable] (or [store.ErrOutcomeUnknown], when a
	// try may have applied). If zero, RetriesDefault; if negative, never.
	Retries int

	// ListIndexes, when true, makes [Store.Migrate] add two indexes to the task
	// table, (kind) and (grp, gkey), on which [Store.ListTasks] lists the tasks of a
	// kind, a group or a group's key directly. Their columns never change after the
	// insert, so they cost each insert (and each purge) two more index entries and no
	// other write anything. Without them, those filters are checked on the primary
	// key's range, at most 1,000 rows per call, and pages of a rare kind come back
	// short, with a cursor to go on. Migrate never drops them. If false, the table
	// keeps the indexes it has.
	ListIndexes bool

	// LockWait bounds how long a statement of a store made by [Open] waits for a row
	// lock: the session's innodb_lock_wait_timeout, in whole seconds (rounded up), set
	// when each connection opens, unless the DSN sets innodb_lock_wait_timeout itself.
	// A statement that waits longer fails and is retried ([Options.Retries]). Every
	// transaction of an owner renews its lease first and holds the owner's row while
	// it waits for task rows, so the owner's next renewal may wait as long: keep it
	// well below the owners' leases, so that a transaction stuck in another process
	// (see "Stuck transactions" in the package docs) never costs this one its lease. A
	// store made by [New] keeps its pool's setting (set it in that DSN). If zero,
	// LockWaitDefault.
	LockWait time.Duration

	// MaxResult caps a task's result (store.StoredTask.Result), in bytes, at most
	// store.ResultMax (1 MiB): a kernel on the store refuses a larger one when the
	// task's function sets it (the store is a [store.ResultLimiter]), and a change
	// that carries one is refused with [store.ErrPayloadTooLarge]. If zero,
	// MaxResultDefault.
	MaxResult int

	// AttemptsKept is how many attempt records per task the store keeps
	// (store.StoredTask.History): the most recent ones, at most AttemptsKeptMax.
	// Each record makes the write of an end larger (see "Schema" in the package
	// docs); -1 keeps none, and writes none. If zero, store.AttemptsKeptDefault (5).
	AttemptsKept int

	// Logger receives the store's warnings (retries, purge errors, connections killed
	// to free the locks of a stuck transaction) and the driver's messages, passwords
	// removed. If nil, nothing is logged.
	Logger *slog.Logger
}

// OptionError is one invalid field of [Options], as returned by [Options.Validate],
// [New] and [Open].
type OptionError struct {
	Field  string // "Options.Table"
	Value  any    // the rejected value
	Reason string // what is wrong with it
}

// Error implements error: `mysqlstore: Options.Table = "a-b": must match …`.
func (e *OptionError) Error() string {
	return fmt.Sprintf("mysqlstore: %s = %#v: %s", e.Field, e.Value, e.Reason)
}

// Validate reports every invalid field of o as an [*OptionError], joined with
// [errors.Join]. It returns nil for the zero Options. It runs no SQL.
func (o Options) Validate() error {
	var errs []error
	if o.Table != "" && !validTable(o.Table) {
		errs = append(errs, &OptionError{"Options.Table", o.Table, "must match ^[A-Za-z_][A-Za-z0-9_]{0,56}$"})
	}
	if o.MaxPayload < 0 || o.MaxPayload > MaxPayloadMax {
		errs = append(errs, &OptionError{"Options.MaxPayload", o.MaxPayload, "must be between 0 and MaxPayloadMax (64 MiB)"})
	}
	if o.MaxResult < 0 || o.MaxResult > store.ResultMax {
		errs = append(errs, &OptionError{"Options.MaxResult", o.MaxResult, "must be between 0 and store.ResultMax (1 MiB)"})
	}
	if o.AttemptsKept < -1 || o.AttemptsKept > AttemptsKeptMax {
		errs = append(errs, &OptionError{"Options.AttemptsKept", o.AttemptsKept, "must be between -1 and AttemptsKeptMax (100)"})
	}
	if o.PurgeInterval < 0 {
		errs = append(errs, &OptionError{"Options.PurgeInterval", o.PurgeInterval, "must be >= 0"})
	}
	if o.LockWait < 0 {
		errs = append(errs, &OptionError{"Options.LockWait", o.LockWait, "must be >= 0"})
	}
	return errors.Join(errs...)
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	o.Table = cmp.Or(o.Table, TableDefault)
	o.MaxPayload = cmp.Or(o.MaxPayload, MaxPayloadDefault)
	o.MaxResult = cmp.Or(o.MaxResult, MaxResultDefault)
	o.AttemptsKept = cmp.Or(o.AttemptsKept, store.AttemptsKeptDefault)
	o.Retention = cmp.Or(o.Retention, RetentionDefault)
	o.PurgeInterval = cmp.Or(o.PurgeInterval, PurgeIntervalDefault)
	o.Retries = cmp.Or(o.Retries, RetriesDefault)
	o.LockWait = cmp.Or(o.LockWait, LockWaitDefault)
	if o.Retries < 0 {
		o.Retries = 0
	}
	return o
}

// validTable reports whether name matches ^[A-Za-z_][A-Za-z0-9_]{0,56}$.
func validTable(name string) bool {
	if name == "" || len(name) > TableMax {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
