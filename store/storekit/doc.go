// Package storekit is for authors of a [store.Store]: it holds [MemoryStore], the
// in-memory reference implementation of the contract, and the helpers that every
// implementation needs to keep that contract the same way. Users of the kernel need it
// only for MemoryStore, a stand-in for a database in their tests; a service passes a
// database store (such as mysqlstore) to kernel.Config.Store.
//
// # Writing a store
//
// A store's Commit works on a batch in two passes: it decides which changes are refused
// before reading any stored task, then applies the rest in order against the stored
// tasks (or, for a SQL store, against the rows it read for the batch).
//
//	results := make([]error, len(changes))
//	for i := range changes {
//		results[i] = changes[i].Validate() // and the store's own limits
//	}
//	storekit.RefuseBeforeInsert(changes, results)
//	next := storekit.NextOfTask(changes)
//	for i, c := range changes {
//		if results[i] != nil || c.Op == store.OpInsert {
//			continue // inserts: see "Idempotence and lost answers" in store.Store
//		}
//		t := stored(c.Task.ID) // as earlier changes of the batch left it
//		switch {
//		case t == nil:
//			results[i] = unknownTask(c) // wraps store.ErrUnknownTask
//		case t.State.Live() && t.Fence == c.Fence:
//			apply(t, c) // LastError through storekit.TruncateLastError
//		case storekit.AlreadyApplied(changes, results, next, i, t.Fence, t.State, t.Attempt):
//			// A retry of a batch that landed: nil, as the first attempt reported.
//		default:
//			results[i] = staleFence(c) // wraps store.ErrStaleFence
//		}
//	}
//
// With these helpers a retried batch reports what its first attempt reported, whether
// or not that attempt landed, as [store.Store] requires. Every store then runs the
// conformance suite of package storetest (store/storetest) in its tests, and may
// compare its results with MemoryStore's on random batches.
//
// The helpers only read the changes they are given (RefuseBeforeInsert writes results)
// and keep no state, so calls for different batches may run concurrently.
package storekit
