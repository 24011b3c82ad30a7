// Package registry holds what a kernel knows of its durable kinds apart from any
// task it runs: the function registered for each kind, the unique keys of its live
// durable tasks, and the stored tasks it holds until their kind is registered or
// their group is configured.
//
// A [Registry] guards all of it with its own mutex: submitters, Register, Update,
// the durable goroutines and the loop call it, and none of it is scheduler state.
// It knows stored tasks ([store.StoredTask]) but no handle, gate or queue; the
// kernel decides what becomes of the tasks it hands back (kernel/durable.go,
// kernel/durable_recover.go).
package registry
