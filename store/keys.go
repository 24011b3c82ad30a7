package store

import "context"

// KeyReader is a [Store] that finds tasks by their unique key (see "Unique keys" in
// [Store]): how a client that names its tasks by key (package flow's durable runs)
// finds them again after a restart, in any process on the store. It is optional: the
// kernel never calls it. storekit.MemoryStore and mysqlstore.Store implement it.
type KeyReader interface {
	Store

	// TasksByKey returns, for each of keys that a task keeps, that task, with its
	// payload and result (History may be nil), in no particular order; keys no task
	// keeps are left out. A task keeps its key from its insert while it is live, and
	// after its end when it has a window ([StoredTask.KeyHeldUntil] not zero), until
	// another task takes the key over or the task is deleted ([Store.Purge],
	// [Store.PurgeCompleted]), whether or not its window has run out (compare with
	// [StoredTask.HoldsKeyAt]). A task without a window stops keeping its key when it
	// ends. At most [StatesMax] keys per call: more return an error wrapping
	// [ErrInvalidChange]. It only reads, and is safe for concurrent use.
	TasksByKey(ctx context.Context, keys []string) ([]StoredTask, error)
}
