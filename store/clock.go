package store

import (
	"context"
	"time"
)

// Clock is a [Store] that tells the time of its clock, so that the kernels on it keep
// due times on that one clock, whatever their own clocks say.
//
// A kernel reads [Clock.Now] when it starts and, on a [SharedStore], again about
// every quarter lease, and keeps the offset between the store's clock and its own:
// of the last few measures, the one of the shortest round trip, which bounds the
// offset (a slow answer moves nothing). Clocks that agree within that round trip get
// no offset, so a due time never moves by a measure's noise. It then writes every
// RunAt on the store's clock (its own due time plus the offset), claims with
// [ClaimRequest.Now] on the store's clock, and turns the RunAt of the tasks it reads
// back (recovered, rescued, requeued) into its own clock's time; a durable
// schedule's targets are on the store's clock too. Of the offset's bounds, each
// conversion takes the one that makes a task later: a due time is written and read
// back at its latest, a claim's now is the store's earliest. So a kernel whose
// clock is off neither runs a task early nor leaves a rescued one late by more than
// the round trips measured: the due times, like the leases, follow the store's
// clock, and the kernels' clocks need not agree. (CreatedAt and UpdatedAt stay the
// writer's; they are for people.)
//
// It is an interface of its own, which the kernel detects as it detects
// [SharedStore]; with a store that is no Clock, the kernel's clock is the store's.
// storekit.MemoryStore (its clock: storekit.MemoryStore.SetClock, else the real one)
// and mysqlstore.Store (the database's UTC_TIMESTAMP) implement it.
type Clock interface {
	Store

	// Now returns the time of the store's clock, the one its leases run on. It
	// returns an error wrapping [ErrStoreUnavailable] when the store could not be
	// reached, and [ErrStoreClosed] after Close.
	Now(ctx context.Context) (time.Time, error)
}
