package store

import (
	"context"
	"errors"
	"time"
)

// SharedStore is a [Store] that several kernels share, in one process or many: every
// kernel on it is an owner with a lease, every live task belongs to one owner, and a
// kernel takes over the tasks of owners whose lease expired. The database is the
// coordinator: no broker, no leader.
//
// # Owners and leases
//
// [SharedStore.Join] makes a kernel an owner: a name (stable across restarts if the
// user chose it) and an epoch, a number the store never hands out twice, larger than
// every epoch and fence it handed out before. The owner's lease runs on the store's
// clock: it is renewed by every [SharedStore.CommitAs] (the heartbeat rides on the group
// commits; an idle kernel commits no changes to renew) and ends Lease after the last
// renewal. A commit whose owner's lease has ended is refused whole with [ErrLeaseLost]:
// nothing of it applies, and the owner never renews again — its kernel must stop
// starting attempts and join again with a new epoch. Joining under a name whose earlier
// epochs are still members ends those at once (a restarted process takes its own tasks
// back without waiting for their lease).
//
// # Rescue
//
// [SharedStore.Rescue] moves the live tasks of owners whose lease ended (and of tasks with
// no owner: rows written by [Store.Commit], or by a store without owners) to the caller,
// in one transaction that locks each ended owner before its tasks, so that it never
// overwrites a change the ended owner committed: either that commit renewed the lease
// first, or it was refused. Each rescued task gets a new fence, greater than any its
// earlier owners could have written, so their late writes are refused with
// [ErrStaleFence]. Rescue changes no state: a task that was Running comes back Running
// with the attempt it had, and the caller decides to run it again (a new attempt: the
// interrupted one is spent) or dead-letter it.
//
// # The pool
//
// A task that no owner holds is in the pool: inserted by [Store.Commit], or by
// [SharedStore.CommitAs] with [Change.Pool]. [SharedStore.Claim] takes due pool tasks for
// an owner with free slots and starts them in the same write: any kernel on the store may
// run them, so work submitted to a busy process runs where slots are free. The kernel
// that put a task in the pool may instead start it by ID in one of its commits: an
// [OpStart] with [Change.Adopt], which applies only while the task is still in the
// pool, so that a claim and an adopt never both take it.
// [SharedStore.Rescue] leaves waiting pool tasks where they are.
//
// # Named leases
//
// [SharedStore.AcquireLease], [SharedStore.RenewLease] and [SharedStore.ReleaseLease]
// hold a lease on a name for one holder at a time, on the store's clock, fenced: each
// grant has a fence greater than every earlier grant of that name, so a holder that
// lost the lease can tell (its renewal is refused) and writes it guards with the fence
// are refused too. They do not depend on owners.
//
// The kernel uses a Store as a SharedStore whenever it implements the interface, and
// then writes through CommitAs, never Commit: a wrapper that embeds a SharedStore and
// changes only Commit (to time, fault or log the writes) must change CommitAs too, or
// embed the Store interface instead, which hides SharedStore and makes the kernel the
// store's only owner.
type SharedStore interface {
	Store

	// Join registers a new owner named name with a lease of the given length and
	// returns it. name is 1 to [OwnerNameMax] bytes; lease is at least [LeaseMin].
	// Earlier epochs of the same name end at once (their tasks become rescuable).
	Join(ctx context.Context, name string, lease time.Duration) (Owner, error)

	// CommitAs is [Store.Commit] by owner o: in the same transaction it first renews o's
	// lease (o.Lease from the store's clock now), and inserted tasks belong to o. When
	// o's lease has ended, or o left, it applies nothing and returns an error wrapping
	// [ErrLeaseLost]. A CommitAs of no changes only renews the lease: the heartbeat of
	// an idle owner.
	CommitAs(ctx context.Context, o Owner, changes []Change) (results []error, err error)

	// Rescue takes over, for the live owner o, the live tasks of ended owners and the
	// Running tasks of no owner (rows a store without owners left running), at most
	// limit of them (limit <= 0: no limit), and returns them in the order of
	// [Store.Recover]. Each gets o as owner and a new fence (see "Rescue" above). Waiting
	// tasks of no owner are the pool's and stay there (see [SharedStore.Claim]). An
	// ended owner whose tasks were all taken is forgotten. It returns an error wrapping
	// [ErrLeaseLost] when o's own lease has ended.
	Rescue(ctx context.Context, o Owner, limit int) ([]StoredTask, error)

	// Claim takes due tasks from the pool for the live owner o and starts them, in one
	// transaction: waiting tasks (Queued, Delayed or Retrying) with no owner, RunAt at or
	// before req.Now and a kind in req.Kinds, at most req.Want of each priority, each
	// priority's in RunAt then ID order. Each claimed task gets o as owner, State
	// Running, Attempt one more and a fence of a new epoch, and UpdatedAt req.Now; they
	// are returned as stored, High first. Tasks another transaction is claiming are
	// skipped, not waited for. It also returns the earliest RunAt of the waiting pool
	// tasks of those kinds left unclaimed (the zero time if none), so the caller knows
	// when to claim next. It returns an error wrapping [ErrLeaseLost] when o's lease
	// has ended, and [ErrInvalidChange] for a negative Want or Max or a zero Now. With
	// req.Max > 0 it claims at most Max tasks, each priority its Want first, then
	// more of those that have more, High first (see [ClaimRequest]).
	Claim(ctx context.Context, o Owner, req ClaimRequest) (claimed []StoredTask, next time.Time, err error)

	// States returns the tasks among ids that the store holds, without their payloads
	// (unknown IDs are left out), in no particular order: how a kernel follows the tasks
	// it put in the pool, wherever they run. At most [StatesMax] IDs per call.
	States(ctx context.Context, ids []string) ([]StoredTask, error)

	// RequeueAs is [Store.Requeue] by owner o: the requeued tasks belong to o.

	// RunNow makes the waiting task id due at now: when it is Queued, Delayed or
	// Retrying, in the pool or held by the live owner o, and its RunAt is after now,
	// RunAt and UpdatedAt become now; its State, Attempt, fence and owner do not
	// change. A pool task made due is taken by the next [SharedStore.Claim] of a
	// kernel with room; a task of o is due for a recovery. It reports whether it
	// found id waiting there (due already or made due): false for an unknown ID, a
	// running or terminal task, or a task of another owner, which it leaves alone. It
	// returns an error wrapping [ErrLeaseLost] when o's lease has ended.
	RunNow(ctx context.Context, o Owner, now time.Time, id string) (bool, error)
	RequeueAs(ctx context.Context, o Owner, now time.Time, ids ...string) ([]StoredTask, error)

	// Leave ends o's membership now: its live tasks become rescuable at once. It is
	// idempotent.
	Leave(ctx context.Context, o Owner) error

	// Owners returns the owners the store knows, live and ended ones not yet forgotten.
	Owners(ctx context.Context) ([]OwnerInfo, error)

	// AcquireLease grants the lease on name to holder for ttl, when nobody holds it, its
	// holder's lease ended, or holder holds it already, and returns the grant's fence.
	// Otherwise it returns an error wrapping [ErrLeaseHeld]. name is 1 to
	// [LeaseNameMax] bytes, holder 1 to [OwnerNameMax] bytes, ttl at least [LeaseMin].
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (fence uint64, err error)

	// RenewLease extends the grant fence of name to ttl from now. It returns an error
	// wrapping [ErrLeaseLost] when that grant ended or another replaced it.
	RenewLease(ctx context.Context, name string, fence uint64, ttl time.Duration) error

	// ReleaseLease ends the grant fence of name now. Releasing a grant that ended
	// already is not an error.
	ReleaseLease(ctx context.Context, name string, fence uint64) error
}

// InsertStore is a [SharedStore] that stores an owner's new tasks apart from its
// commits. The kernel, on a store that implements it, sends acknowledged inserts
// through InsertAs while its journal's commit is in flight, so that they commit
// beside the starts and ends of running tasks rather than ahead of them.
type InsertStore interface {
	SharedStore

	// InsertAs is [SharedStore.CommitAs] for a batch of inserts ([OpInsert]) that
	// need not renew o's lease, so that it need not wait for a CommitAs of o in
	// flight. It applies the inserts only while o is live (its lease has not ended and
	// it has not left), and otherwise applies nothing and returns an error wrapping
	// [ErrLeaseLost]; an inserted task of o is never left where no rescue of o finds
	// it. The tasks belong to o (those of a Change with Pool to the pool). Its results
	// and errors are CommitAs's, and it may apply a batch it cannot store so (or any
	// batch) as CommitAs does, renewal and wait included.
	InsertAs(ctx context.Context, o Owner, changes []Change) (results []error, err error)
}

// PoolWaker is a [SharedStore] that can wake the kernels of its process when tasks
// entered its pool by another way than their commits (a task inserted in a caller's
// own transaction, such as mysqlstore's Store.SubmitTx), so that they claim at once
// rather than at their next poll. The kernel's claimer, on a store that implements
// it, waits on PoolWake beside its poll timer. Kernels of other processes claim the
// tasks within their claim poll.
type PoolWaker interface {
	SharedStore

	// PoolWake returns a channel that is closed at the next wake-up of the store's
	// pool (each wake-up closes the channel the calls before it returned; calls after
	// it return a new one). It never blocks and is safe for concurrent use.
	PoolWake() <-chan struct{}
}

// ClaimRequest is what [SharedStore.Claim] takes.
type ClaimRequest struct {
	// Now is the caller's time, on the store's clock for a store that is a [Clock]
	// (the RunAt it compares are): tasks due at or before it are claimed, and their
	// UpdatedAt is set to it.
	Now time.Time
	// Want bounds the claimed tasks of each priority.
	Want ByPriority[int]
	// Max, when > 0, bounds the claimed tasks in all, and Want is then each
	// priority's share of them: the share a priority cannot fill (it has fewer due
	// tasks) goes to the others, High first, in the same claim. So one claim fills
	// the free slots whatever the mix of the pool. Zero: each priority takes at most
	// its Want, nothing more.
	Max int
	// Kinds are the task kinds the caller can run; tasks of other kinds stay.
	Kinds []string
}

// Owner is one membership of a kernel in a [SharedStore], made by [SharedStore.Join].
type Owner struct {
	// Name is the owner's name, as given to Join.
	Name string
	// Epoch identifies this membership; the store never hands it out twice.
	Epoch uint64
	// Lease is how long a renewal keeps the membership alive.
	Lease time.Duration
}

// OwnerInfo is an owner as [SharedStore.Owners] lists it.
type OwnerInfo struct {
	Owner
	// Expires is when the lease ends (or ended), on the store's clock.
	Expires time.Time
	// Live reports whether the lease had not ended when the store read it.
	Live bool
	// Tasks counts the owner's live tasks.
	Tasks int
}

// Limits of a [SharedStore].
const (
	// OwnerNameMax is the longest owner or lease-holder name, in bytes.
	OwnerNameMax = 64
	// LeaseNameMax is the longest name of a named lease, in bytes.
	LeaseNameMax = 255
	// StatesMax is the most IDs one [SharedStore.States] call takes.
	StatesMax = 1000
	// LeaseMin is the shortest lease a [SharedStore] grants.
	LeaseMin = 10 * time.Millisecond
)

// Errors of a [SharedStore].
var (
	// ErrLeaseLost: the owner's (or the grant's) lease ended, or another replaced it;
	// nothing was applied. An owner must join again.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrLeaseHeld: another holder's lease on the name is live. Returned (wrapped) by
	// [SharedStore.AcquireLease].
	ErrLeaseHeld = errors.New("store: lease held by another")
)

// FenceOfEpoch returns the first fence of epoch e: rescued tasks take the fence of a
// new epoch, and each start adds one to a task's fence, so the fences of every epoch lie
// above those of the epochs before it (as long as a task starts fewer than 2^32 times
// within one epoch).
func FenceOfEpoch(e uint64) uint64 { return e << 32 }
