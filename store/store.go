package store

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Store keeps durable tasks for the kernel. It is a journal, not a work queue: the kernel
// runs durable tasks from memory, records their lifecycle with [Store.Commit] in group
// commits (many changes per transaction), and reads the store back only at start, with
// [Store.Recover]. Nothing polls it for work.
//
// # Fences
//
// Every task has a fence, a number that changes with every attempt start ([OpStart] sets
// it to a new, larger value). Every non-insert [Change] carries the fence the writer expects
// the task to have ([Change.Fence]); a store applies it only when the stored fence matches
// and the task is live (not terminal). Otherwise the change is refused with [ErrStaleFence]
// and the stored task is left untouched, so a writer that lost a task (a stale attempt, a
// zombie, a second process) can never overwrite a newer attempt. A SQL store checks the
// fence in the UPDATE's WHERE clause and verifies the rows it affected.
//
// # Unique keys
//
// A task may carry a [StoredTask.UniqueKey]. At most one task holds a given key: a task
// inserted live (Delayed, Queued, Running or Retrying) holds its key while it is live, and,
// when it has a window ([StoredTask.UniqueUntil] or [StoredTask.UniqueFor]), after its end
// until [StoredTask.KeyHeldUntil]. An [OpInsert] of a live task whose key another task
// holds is refused with [ErrDuplicateKey], as a [*DuplicateKeyError] that names the
// holder. A window counts against the time of the insert, its Task.UpdatedAt (the
// writer's clock, as the end's UpdatedAt is): an insert at or after the holder's
// KeyHeldUntil takes the key, which the ended holder then no longer holds. Without a
// window the key is free again once the holder is terminal. A task inserted terminal
// holds no key. The empty key is no key.
//
// # Idempotence and lost answers
//
// Task IDs are made by the client (the kernel), never by the store. An [OpInsert] whose ID
// the store already holds reports nil and changes nothing: it is the retry of a commit whose
// answer was lost. Every other change is idempotent too: a change that finds the task
// exactly where the change, or a later change of the same batch, would leave it (same fence
// and state) reports nil without writing. (For that, a change that comes before its task's
// OpInsert in the same batch is refused with [ErrInvalidChange].) So a batch whose Commit returned an error can be
// committed again as it is: whether or not the first attempt landed, the second returns
// the results the first would have returned and never duplicates a task. This holds as long
// as the batch's tasks were not changed in between and completed rows are kept longer than
// the caller keeps retrying (see [Store.PurgeCompleted]).
//
// # Dead letters and completed tasks
//
// Terminal tasks stay in the store. Dead letters (states Failed, TimedOut, Evicted and
// Abandoned: work that was not done) are kept until [Store.Purge] deletes them or
// [Store.Requeue] gives them another life. Completed tasks (Succeeded, Canceled) are kept
// until [Store.PurgeCompleted] deletes them; a store may do that by itself after a
// retention period.
//
// # Times
//
// Times are kept with millisecond precision: a store truncates them to the millisecond
// and may return them in another location (compare them with [time.Time.Equal]). A store
// never reads a clock for task fields: the caller supplies every time it records. A
// kernel writes RunAt on the store's clock when the store is a [Clock] (see there), and
// on its own otherwise; CreatedAt and UpdatedAt are always the writer's.
//
// Implementations must be safe for concurrent use. store/storetest holds the conformance
// suite every implementation must pass; store/storekit holds the in-memory reference,
// storekit.MemoryStore, and helpers for writing one.
type Store interface {
	// Commit applies changes, in order, in one transaction (a group commit) and returns
	// once that transaction is durable. It blocks; it does not retain changes, their
	// tasks or payloads after it returns, and never modifies them.
	//
	// When err is nil, len(results) == len(changes) and results[i] is the outcome of
	// changes[i]: nil when it was applied (or had already been, see "Idempotence" in
	// [Store]), or an error wrapping [ErrDuplicateKey], [ErrStaleFence], [ErrUnknownTask],
	// [ErrInvalidChange] or [ErrPayloadTooLarge]. A refused change changes nothing, and the
	// other changes of the batch are applied all the same.
	//
	// When err is not nil, the batch may or may not have been applied when err wraps
	// [ErrOutcomeUnknown] (a connection lost after COMMIT was sent, or ctx ending while
	// its answer was awaited); with any other error nothing of it was applied. Committing
	// the same batch again is safe either way and returns what the first attempt would
	// have; so is committing it as the start of a longer batch, whose further changes then
	// apply as if committed after it. err wraps [ErrStoreUnavailable] when the store could
	// not be reached, ctx.Err() when ctx ended first, and [ErrStoreClosed] after Close.
	// Commit of no changes returns (nil, nil) at once.
	Commit(ctx context.Context, changes []Change) (results []error, err error)

	// Recover returns every live task (Delayed, Queued, Running and Retrying) ordered by
	// priority (High first), then RunAt, then ID. It changes nothing: a task that was
	// Running when its process died comes back Running, with the Attempt and Fence of that
	// attempt; the caller decides to run it again (an [OpStart] with a new fence, which
	// counts a new attempt) or, if it used up MaxAttempts, to dead-letter it ([OpFail]).
	// Delayed and Retrying tasks come back with their RunAt, which may have passed.
	Recover(ctx context.Context) ([]StoredTask, error)

	// Get returns the task with the given ID in whatever state it is, or an error wrapping
	// [ErrUnknownTask] when the store does not hold it (never inserted, or purged).
	Get(ctx context.Context, id string) (StoredTask, error)

	// DeadLetters returns up to limit dead letters (Failed, TimedOut, Evicted or Abandoned
	// tasks) with an ID greater than afterID, ordered by ID: pass the last ID of a page to
	// get the next one, "" for the first. A limit <= 0 means [DeadLettersLimitDefault].
	DeadLetters(ctx context.Context, limit int, afterID string) ([]StoredTask, error)

	// CountDeadLetters returns how many dead letters the store holds.
	CountDeadLetters(ctx context.Context) (int, error)

	// Requeue gives the named dead letters another life: each becomes Queued with RunAt and
	// UpdatedAt set to now, Attempt 0, a new (larger) fence and its LastError kept. IDs that
	// are unknown, not dead letters, or whose unique key is now held by another task
	// (live, or in its window at now) are skipped. It returns the requeued tasks, so a running kernel can schedule them;
	// a store never runs anything by itself.
	Requeue(ctx context.Context, now time.Time, ids ...string) ([]StoredTask, error)

	// Purge deletes the named dead letters and returns how many it deleted. IDs that are
	// unknown or not dead letters are skipped.
	Purge(ctx context.Context, ids ...string) (int, error)

	// PurgeCompleted deletes completed tasks (Succeeded and Canceled) whose UpdatedAt is
	// before olderThan and returns how many it deleted. Dead letters and live tasks are
	// never deleted by it, nor a task whose unique key's window
	// ([StoredTask.KeyHeldUntil]) ends after olderThan. [Store.Purge] deletes what it
	// names, windows or not, and frees their keys. A batch retried after its tasks were purged may insert them
	// again: purge only what no caller may still retry.
	PurgeCompleted(ctx context.Context, olderThan time.Time) (int, error)

	// Close releases the store's resources. Calls after Close return an error wrapping
	// [ErrStoreClosed]. Close is idempotent.
	Close() error
}

// StoredTask is one durable task as a [Store] keeps it.
type StoredTask struct {
	// ID identifies the task. The kernel makes it; it is unique, at most [StoredIDMax]
	// bytes and never empty. Inserts are idempotent on it.
	ID string
	// Kind is the registered task kind that runs the payload; 1 to [KindMax] bytes.
	Kind string
	// Payload is the kind's input, opaque to the store. Nil and empty are the same: a
	// store may return either for a task inserted with either.
	Payload []byte
	// Priority is the task's bucket. The zero value is stored as [Normal].
	Priority Priority
	// RunAt is when the task is due: its delay on insert, its backoff after [OpRetry].
	// The zero time means at once.
	RunAt time.Time
	// Timeout bounds each attempt; zero means the kernel's default.
	Timeout time.Duration
	// MaxAttempts bounds the attempts; zero means the kernel's default.
	MaxAttempts int
	// Attempt counts the attempts started so far (an [OpStart] sets it).
	Attempt int
	// Fence identifies the current attempt; see "Fences" in [Store].
	Fence uint64
	// UniqueKey, when not empty, is held by at most one live task; at most
	// [UniqueKeyMax] bytes. See "Unique keys" in [Store].
	UniqueKey string
	// Group names the task's group (DurableTask.Group), at most [GroupNameMax] bytes;
	// empty for a task of no group. Key is its key within the group, at most
	// [GroupKeyMax] bytes, empty without a Group. Both are set by [OpInsert] and
	// never change; a store returns them with the task wherever it returns tasks.
	Group string
	Key   string
	// State is where the task is; see [State]. Live states are Delayed, Queued, Running
	// and Retrying.
	State State
	// LastError is the message of the last failure, at most [LastErrorMax] bytes (a store
	// truncates longer ones at a UTF-8 boundary).
	LastError string
	// CreatedAt is when the task was accepted, as given by its [OpInsert].
	CreatedAt time.Time
	// UpdatedAt is the time of the last change applied to the task (Task.UpdatedAt of
	// that [Change]); [Store.PurgeCompleted] compares it.
	UpdatedAt time.Time
	// UniqueUntil and UniqueFor are the window of UniqueKey: after the task ends, the
	// key stays held until UniqueUntil, or for UniqueFor after the end, whichever is
	// later (see [StoredTask.KeyHeldUntil] and "Unique keys" in [Store]). Both zero:
	// the key is freed at the end. Both are set by [OpInsert], need a UniqueKey, and
	// never change; UniqueFor is >= 0 and kept to the millisecond.
	UniqueUntil time.Time
	UniqueFor   time.Duration
	// Headers are opaque key-value pairs the submitter attached (a trace context, see
	// kernel.Hooks), its keys and values together at most [HeadersMax] bytes. Set by
	// [OpInsert] and never changed; a store returns them with the task wherever it
	// returns tasks, nil (or empty) for a task inserted with none. A store keeps a copy:
	// it neither retains nor modifies the caller's map.
	Headers map[string]string
	// Result is what the attempt that ended the task left for its caller (set by
	// [OpSucceed] or [OpFail]), at most [ResultMax] bytes, or a store's own limit (see
	// [ResultLimiter]); nil when it left none. Nil and empty are the same. Kept until
	// the task is deleted ([Store.PurgeCompleted], [Store.Purge]); [Store.Requeue]
	// clears it. Returned by [Store.Get]; other reads may leave it nil.
	Result []byte
	// History holds the records of the task's most recent ended attempts, oldest
	// first (see [Attempt]); an [OpInsert] does not set it. Returned by [Store.Get];
	// other reads may leave it nil.
	History []Attempt
}

// KeyHeldUntil returns when t's window ends if t is terminal and its last change (its
// end) was at t.UpdatedAt: the later of UniqueUntil and UpdatedAt plus UniqueFor. It
// returns the zero time for a task without a window or a UniqueKey.
func (t *StoredTask) KeyHeldUntil() time.Time {
	if t.UniqueKey == "" || t.UniqueFor <= 0 && t.UniqueUntil.IsZero() {
		return time.Time{}
	}
	end := t.UniqueUntil
	if t.UniqueFor > 0 {
		if e := t.UpdatedAt.Add(t.UniqueFor); e.After(end) {
			end = e
		}
	}
	return end
}

// HoldsKeyAt reports whether t holds its UniqueKey at now: while it is live, and while
// its window ([StoredTask.KeyHeldUntil]) runs after it ended. A store calls it on a
// task that took the key (was inserted live); it reports false for a task without a
// key.
func (t *StoredTask) HoldsKeyAt(now time.Time) bool {
	if t.UniqueKey == "" {
		return false
	}
	return t.State.Live() || t.KeyHeldUntil().After(now)
}

// ChangeOp says what a [Change] does to a stored task.
type ChangeOp uint8

// The changes a [Store] records. Every op records Change.Task.UpdatedAt as the task's
// UpdatedAt (it must not be zero). Except for [OpInsert], every op needs the task to exist
// ([ErrUnknownTask] otherwise), to be live and to have the fence Change.Fence
// ([ErrStaleFence] otherwise), and touches only the fields it names.
const (
	// OpInsert creates the task Change.Task with all its fields (Change.Fence is unused).
	// Task.State may be any state, usually Queued or Delayed (Running for a task inserted
	// and started in one batch). Refused with [ErrDuplicateKey] when Task.UniqueKey is held
	// by another task (see "Unique keys" in [Store]). When the ID exists already, it reports nil and changes nothing.
	OpInsert ChangeOp = iota + 1
	// OpStart records the start of an attempt: State becomes Running, Attempt becomes
	// Task.Attempt and Fence becomes Task.Fence, which must be greater than Change.Fence
	// ([ErrInvalidChange] otherwise). Writes for the new attempt carry Task.Fence.
	OpStart
	// OpRetry records an attempt that failed and will be tried again: State becomes
	// Retrying, RunAt becomes Task.RunAt (when the next attempt is due) and LastError
	// becomes Task.LastError. The fence does not change.
	OpRetry
	// OpSucceed records success: State becomes Succeeded, terminal; a unique key is
	// freed, or held for its window. LastError is kept; Result becomes Task.Result.
	OpSucceed
	// OpFail dead-letters the task: State becomes Task.State, which must be Failed,
	// TimedOut, Evicted or Abandoned (zero means Failed), LastError becomes
	// Task.LastError and Result becomes Task.Result. Terminal; a unique key is freed,
	// or held for its window.
	OpFail
	// OpCancel records a cancellation: State becomes Canceled, LastError becomes
	// Task.LastError when it is not empty. Terminal; a unique key is freed, or held
	// for its window.
	OpCancel
)

var opNames = [...]string{
	OpInsert:  "insert",
	OpStart:   "start",
	OpRetry:   "retry",
	OpSucceed: "succeed",
	OpFail:    "fail",
	OpCancel:  "cancel",
}

// String returns the op's lowercase name.
func (op ChangeOp) String() string {
	if int(op) < len(opNames) && opNames[op] != "" {
		return opNames[op]
	}
	return "op(" + strconv.Itoa(int(op)) + ")"
}

// Change is one entry of a group commit; see [ChangeOp] for what each op reads.
type Change struct {
	// Op is what the change does.
	Op ChangeOp
	// Fence is the fence the writer expects the task to have now. Unused by [OpInsert].
	Fence uint64
	// Task holds the task's ID and the fields the op sets: all of them for [OpInsert].
	Task StoredTask
	// Pool, on an [OpInsert] committed with [SharedStore.CommitAs], puts the task in the
	// pool instead of giving it to the committing owner (see "The pool" in
	// [SharedStore]). Tasks inserted with [Store.Commit] are in the pool anyway.
	Pool bool
	// Adopt, on an [OpStart], starts a task of the pool by ID (see "The pool" in
	// [SharedStore]): it applies only when the task has no owner and waits (Queued,
	// Delayed or Retrying) at the fence Change.Fence, and the task becomes the
	// committing owner's ([SharedStore.CommitAs]; with [Store.Commit] it keeps no
	// owner). A task that an owner holds (another kernel claimed it first), that runs
	// or ended, or whose fence moved, is refused with [ErrStaleFence] and left as it
	// is. It is how a kernel starts, through its group commits, the tasks it put in
	// the pool itself, without a [SharedStore.Claim].
	Adopt bool
	// Attempt, when its Number is not 0, is the record of the attempt the change
	// ends, appended to the task's [StoredTask.History] when the change applies: see
	// [Attempt] for the ops that carry one.
	Attempt Attempt
}

// Limits every [Store] enforces; a change beyond them is refused with [ErrInvalidChange].
const (
	// StoredIDMax is the longest task ID, in bytes.
	StoredIDMax = 128
	// KindMax is the longest task kind, in bytes.
	KindMax = 255
	// UniqueKeyMax is the longest unique key, in bytes.
	UniqueKeyMax = 255
	// GroupNameMax is the longest group name of a durable task (StoredTask.Group), in
	// bytes.
	GroupNameMax = 64
	// GroupKeyMax is the longest key of a durable task's group (DurableTask.Key,
	// StoredTask.Key), in bytes. (A group's name is at most [GroupNameMax] bytes.)
	GroupKeyMax = 255
	// LastErrorMax is the longest LastError kept, in bytes; longer ones are truncated.
	LastErrorMax = 4096
	// HeadersMax is the most bytes the keys and values of a task's Headers take
	// together.
	HeadersMax = 4096
	// DeadLettersLimitDefault is the page size of [Store.DeadLetters] for a limit <= 0.
	DeadLettersLimitDefault = 100
)

// Errors of a [Store]. Per-change results of [Store.Commit] wrap the first five; the
// error of a call wraps the last two. Branch on them with [errors.Is].
var (
	// ErrDuplicateKey: an [OpInsert] named a UniqueKey held by another task (a live one,
	// or one whose window runs; see "Unique keys" in [Store]). Stores refuse the change
	// with a [*DuplicateKeyError], which wraps it.
	ErrDuplicateKey = errors.New("store: unique key held by another task")
	// ErrStaleFence: the task's fence differs from [Change.Fence] or the task is terminal,
	// and the task is not already where the change would leave it. The change belongs to an
	// attempt that no longer owns the task; nothing was written.
	ErrStaleFence = errors.New("store: stale fence")
	// ErrUnknownTask: no task with that ID is stored (never inserted, refused, or purged).
	// Returned by Commit (per change) and [Store.Get].
	ErrUnknownTask = errors.New("store: unknown task")
	// ErrInvalidChange: the change breaks a rule of [ChangeOp], [StoredTask] or the
	// limits (an empty ID, an unknown op or state, a Start fence not increasing, a zero
	// UpdatedAt...). The wrapping error says which.
	ErrInvalidChange = errors.New("store: invalid change")
	// ErrPayloadTooLarge: the payload exceeds the store's limit; nothing was written.
	ErrPayloadTooLarge = errors.New("store: payload too large")
	// ErrStoreUnavailable: the store could not be reached, and nothing of the call was
	// applied. Returned (wrapped) by every [Store] method.
	ErrStoreUnavailable = errors.New("store: store unavailable")
	// ErrOutcomeUnknown: the store could not learn whether a write applied (its answer
	// was lost: a connection dropped after COMMIT was sent), so it may have. Returned
	// (wrapped) by [Store.Commit], [SharedStore.CommitAs] and the other writes instead of
	// [ErrStoreUnavailable], which it never wraps: a task whose insert ends with it may
	// be stored, and run.
	ErrOutcomeUnknown = errors.New("store: outcome unknown")
	// ErrStoreClosed: the store was closed. Returned (wrapped) by every [Store] method
	// but Close.
	ErrStoreClosed = errors.New("store: store closed")
)

// Validate checks c against the rules of its op and the limits above, without looking at
// any store. It returns nil or an error wrapping [ErrInvalidChange] that names the field.
// [Store.Commit] reports the same error for the change; the kernel may call Validate first
// to refuse a durable submit at once.
func (c *Change) Validate() error {
	t := &c.Task
	switch {
	case c.Op < OpInsert || c.Op > OpCancel:
		return invalidChange(c, "Op", "unknown op")
	case t.ID == "":
		return invalidChange(c, "Task.ID", "must not be empty")
	case len(t.ID) > StoredIDMax:
		return invalidChange(c, "Task.ID", "longer than StoredIDMax bytes")
	case t.UpdatedAt.IsZero():
		return invalidChange(c, "Task.UpdatedAt", "must not be zero")
	}
	switch c.Op {
	case OpInsert:
		switch {
		case t.Kind == "":
			return invalidChange(c, "Task.Kind", "must not be empty")
		case len(t.Kind) > KindMax:
			return invalidChange(c, "Task.Kind", "longer than KindMax bytes")
		case len(t.UniqueKey) > UniqueKeyMax:
			return invalidChange(c, "Task.UniqueKey", "longer than UniqueKeyMax bytes")
		case len(t.Group) > GroupNameMax:
			return invalidChange(c, "Task.Group", "longer than GroupNameMax bytes")
		case len(t.Key) > GroupKeyMax:
			return invalidChange(c, "Task.Key", "longer than GroupKeyMax bytes")
		case t.Key != "" && t.Group == "":
			return invalidChange(c, "Task.Key", "must be empty without a Task.Group")
		case !t.Priority.Valid():
			return invalidChange(c, "Task.Priority", "unknown priority")
		case t.State < Delayed || t.State > Abandoned:
			return invalidChange(c, "Task.State", "unknown state")
		case t.Attempt < 0:
			return invalidChange(c, "Task.Attempt", "must be >= 0")
		case t.MaxAttempts < 0:
			return invalidChange(c, "Task.MaxAttempts", "must be >= 0")
		case t.Timeout < 0:
			return invalidChange(c, "Task.Timeout", "must be >= 0")
		case t.UniqueFor < 0:
			return invalidChange(c, "Task.UniqueFor", "must be >= 0")
		case t.UniqueKey == "" && t.UniqueFor != 0:
			return invalidChange(c, "Task.UniqueFor", "must be zero without a Task.UniqueKey")
		case t.UniqueKey == "" && !t.UniqueUntil.IsZero():
			return invalidChange(c, "Task.UniqueUntil", "must be zero without a Task.UniqueKey")
		case headersBytes(t.Headers) > HeadersMax:
			return invalidChange(c, "Task.Headers", "longer than HeadersMax bytes")
		}
	case OpStart:
		switch {
		case t.Fence <= c.Fence:
			return invalidChange(c, "Task.Fence", "must be greater than Change.Fence")
		case t.Attempt < 1:
			return invalidChange(c, "Task.Attempt", "must be >= 1")
		}
	}
	if c.Adopt && c.Op != OpStart {
		return invalidChange(c, "Adopt", "is only for OpStart")
	}
	if len(t.Result) > 0 && c.Op != OpSucceed && c.Op != OpFail {
		return invalidChange(c, "Task.Result", "is only for OpSucceed and OpFail")
	}
	if len(t.Result) > ResultMax {
		return invalidChange(c, "Task.Result", "longer than ResultMax bytes")
	}
	if field, reason := validAttempt(c); field != "" {
		return invalidChange(c, field, reason)
	}
	if c.Op == OpFail && t.State != 0 && !t.State.DeadLetter() {
		return invalidChange(c, "Task.State", "must be Failed, TimedOut, Evicted or Abandoned")
	}
	return nil
}

// ResultState returns the state c leaves its task in when it applies.
func (c *Change) ResultState() State {
	switch c.Op {
	case OpInsert:
		return c.Task.State
	case OpStart:
		return Running
	case OpRetry:
		return Retrying
	case OpSucceed:
		return Succeeded
	case OpFail:
		if c.Task.State == 0 {
			return Failed
		}
		return c.Task.State
	case OpCancel:
		return Canceled
	}
	return 0
}

// ResultFence returns the fence c leaves its task with when it applies: Task.Fence for
// [OpInsert] and [OpStart], Change.Fence otherwise.
func (c *Change) ResultFence() uint64 {
	if c.Op == OpInsert || c.Op == OpStart {
		return c.Task.Fence
	}
	return c.Fence
}

func invalidChange(c *Change, field, reason string) error {
	return &invalidChangeError{op: c.Op, id: c.Task.ID, field: field, reason: reason}
}

type invalidChangeError struct {
	op     ChangeOp
	id     string
	field  string
	reason string
}

func (e *invalidChangeError) Error() string {
	id := e.id
	if len(id) > StoredIDMax {
		id = id[:StoredIDMax] + "..."
	}
	return "store: invalid change: " + e.op.String() + " " + strconv.Quote(id) + ": " + e.field + " " + e.reason
}

func (e *invalidChangeError) Unwrap() error { return ErrInvalidChange }

// DuplicateKeyError is the refusal of an [OpInsert] whose UniqueKey another task holds:
// errors.As finds it in a change's result, and it wraps [ErrDuplicateKey].
type DuplicateKeyError struct {
	// ID is the refused task's ID.
	ID string
	// Key is the unique key.
	Key string
	// Holder is the ID of the task that holds Key.
	Holder string
}

func (e *DuplicateKeyError) Error() string {
	return "store: insert " + strconv.Quote(e.ID) + ": key " + strconv.Quote(e.Key) + " held by " +
		strconv.Quote(e.Holder) + ": " + ErrDuplicateKey.Error()
}

// Unwrap returns [ErrDuplicateKey].
func (e *DuplicateKeyError) Unwrap() error { return ErrDuplicateKey }

// headersBytes returns how many bytes the keys and values of h take.
func headersBytes(h map[string]string) int {
	n := 0
	for k, v := range h {
		n += len(k) + len(v)
	}
	return n
}
