// Package store is the contract between the ax kernel and the stores that keep its
// durable tasks: the interfaces a store implements ([Store], [SharedStore],
// [ScheduleStore], [ReplicaStore], and [TaskLister] for operators' consoles), the
// records they exchange ([StoredTask], [Change], [Owner], [StoredSchedule],
// [ReplicaFigures]), their limits and errors, and the task vocabulary that both sides
// share ([Priority], [State]).
//
// Users of the kernel rarely need this package: they pass a store (such as
// mysqlstore.Store, or storekit.MemoryStore in tests) to kernel.Config.Store and read
// its errors ([ErrStoreUnavailable]) with [errors.Is]. It is for authors of a store,
// who import it and never the kernel, as a database driver imports a driver contract:
//
//   - store/storekit holds MemoryStore, the in-memory reference implementation, and
//     helpers that every implementation needs to keep the contract the same way;
//   - store/storetest holds the conformance suite every implementation must pass
//     (storetest.Exercise).
//
// Every interface here must be safe for concurrent use.
package store
