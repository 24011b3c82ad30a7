// Package poolbook is the loop's book of the pool tasks of a [store.SharedStore]
// that one kernel put there itself: the tasks it follows until it claims or adopts
// them or the store says they ended, the queues of those it may adopt (start
// through its own journal rather than a claim), the tasks it claimed before their
// handles reached the loop, and the handles whose submit's outcome is unknown
// (orphans), kept until a claim takes their task. It also shares a number of
// adopts among the priority levels by the quotas ([SplitByQuotas]).
//
// It keeps records and does the arithmetic; the kernel's loop decides. A [Book] is
// loop state (kernel/pool.go and kernel/adopt.go call it directly, no interface
// but the owner it tells which IDs it follows), not safe for concurrent use, and
// generic over the kernel's handle so that it knows no task.
package poolbook
