package store

import (
	"context"
	"time"
)

// ReplicaStore is a [SharedStore] that keeps, beside its owners, the figures each
// owner's kernel last published of itself, so that any kernel's console can list every
// live replica with its queues and rates. A kernel on a ReplicaStore publishes on a
// schedule of its own, in a write of its own: never inside a [SharedStore.CommitAs],
// and without touching the owner rows the commits lock.
//
// It is an interface of its own, which the kernel detects as it detects [SharedStore],
// so that stores written for the other contracts stay valid. storekit.MemoryStore and
// mysqlstore.Store implement it.
type ReplicaStore interface {
	SharedStore

	// PublishReplica stores f as the figures of owner o, replacing those o published
	// before, stamped with the store's clock now. It reads and renews no lease: figures
	// of an owner that is not live are kept but never listed, and a store may forget
	// them once they are older than [ReplicaKeep]. It returns an error wrapping
	// [ErrInvalidChange] (nothing written) when f.Version is longer than
	// [ReplicaVersionMax] bytes or o.Name is not 1 to [OwnerNameMax] bytes.
	PublishReplica(ctx context.Context, o Owner, f ReplicaFigures) error

	// Replicas returns the live owners (their lease not ended, not left), by epoch, each
	// with the figures it published last (none yet: zero Published and Figures), and
	// the store's clock when it read them.
	Replicas(ctx context.Context) (replicas []Replica, now time.Time, err error)
}

// Replica is a live owner as [ReplicaStore.Replicas] lists it.
type Replica struct {
	Owner
	// Expires is when the owner's lease ends unless renewed, on the store's clock.
	Expires time.Time
	// Published is when the owner last published Figures, on the store's clock; zero
	// if it published none.
	Published time.Time
	// Figures are what the owner published last.
	Figures ReplicaFigures
}

// ReplicaFigures are what a kernel publishes of itself (see [ReplicaStore]).
type ReplicaFigures struct {
	// Version names the software the kernel runs, such as the version of ax it
	// was built with; at most [ReplicaVersionMax] bytes.
	Version string
	// Queued, Running and Delayed count the tasks that wait to start, run, and wait
	// to be due (delayed or retrying), by priority.
	Queued, Running, Delayed ByPriority[int]
	// Zombies counts the timed-out task functions still running.
	Zombies int
	// Degraded reports whether the kernel admitted only High tasks when it published.
	Degraded bool
	// Totals are the kernel's counters since it started.
	Totals ByPriority[ReplicaCounts]
	// Rates are per second over RateSpan, the time since the kernel's previous
	// publication (zero in its first).
	Rates    ByPriority[ReplicaRates]
	RateSpan time.Duration
	// WaitP50 and WaitP99 are percentiles of the submit-to-start time of the
	// attempts started over the kernel's recent window (kernel.Stats.RecentSpan).
	WaitP50, WaitP99 ByPriority[time.Duration]
}

// ReplicaCounts are counters of one priority since a kernel started.
type ReplicaCounts struct {
	Submitted, Succeeded, Failed, TimedOut, Retried, Rejected uint64
}

// ReplicaRates are the changes of [ReplicaCounts] per second.
type ReplicaRates struct {
	Submitted, Succeeded, Failed, TimedOut, Retried, Rejected float64
}

// Limits of a [ReplicaStore].
const (
	// ReplicaVersionMax is the longest ReplicaFigures.Version, in bytes.
	ReplicaVersionMax = 128
	// ReplicaKeep is how long a store keeps the figures of an owner that published no
	// more: at least this long, then it may forget them.
	ReplicaKeep = time.Hour
)
