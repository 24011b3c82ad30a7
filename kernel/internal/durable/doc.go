// Package durable holds the goroutines of a kernel on a [store.SharedStore] that talk
// to the store rather than run tasks: the owner's membership (join, lease renewal
// bookkeeping, rejoin after a lost lease, leave), the lease watcher, the rescuer of
// ended owners' tasks, and the claimer of pool tasks with the reader of the states
// of the pool tasks the kernel follows.
//
// It never decides scheduler state. It hands what the store said to the kernel's
// loop through one interface, [Loop], one call per batch of tasks, and the loop
// judges: it reserves the slots of a claim, starts the claimed tasks, ends the
// handles of pool tasks that ended elsewhere, schedules rescued tasks and cancels
// the running durable attempts when the lease may lapse.
//
// Lease times run on the real clock: they are about the database, not about task
// times. Claim requests carry the kernel's clock ([Config.Clock]), as the store's
// due times do.
package durable
