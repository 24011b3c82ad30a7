package durable

import (
	"log/slog"

	"github.com/axsched/ax/store"
)

// Loop is the kernel's loop as the durable goroutines see it. Its methods are
// called from those goroutines (never from the loop) and must be safe for
// concurrent use. Each call carries a batch: the plain task's path gains no call.
type Loop interface {
	// ClaimBudget asks the loop how many pool tasks the kernel may claim now; the
	// loop reserves that many slots until Claimed returns them. When hungry (due
	// pool work is known) and there is no room, the loop wakes the claimer
	// ([Owner.ClaimNow]) once a slot frees. It blocks until the loop answers, and
	// returns a zero Budget once the loop has stopped.
	ClaimBudget(hungry bool) Budget
	// Claimed hands the loop the tasks a claim started in the store, and frees
	// the reserved slots of the Budget they were claimed with. It never blocks.
	Claimed(tasks []store.StoredTask, reserved int)
	// PoolEnded hands the loop followed pool tasks that ended in another kernel,
	// as the store says. It never blocks.
	PoolEnded(tasks []store.StoredTask)
	// Rescued hands the kernel tasks taken over from ended owners.
	Rescued(tasks []store.StoredTask)
	// LeaseLapse tells the loop the lease may end soon without a renewal: it
	// cancels the running durable attempts. It never blocks.
	LeaseLapse()
}

// Budget is the loop's answer to [Loop.ClaimBudget].
type Budget struct {
	Slots  int      // the slots reserved for the claim; 0: claim nothing
	Kinds  []string // the registered kinds, the only ones claimed
	Quotas [3]int   // the shares of High, Normal and Low (Config.Quotas)
}

// Logger logs the goroutines' news, as slog.Logger.Log does; the caller of Log is
// the record's source. It must not block for long.
type Logger interface {
	Log(level slog.Level, msg string, args ...any)
}
