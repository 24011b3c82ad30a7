package kernel

import "github.com/axsched/ax/store"

// replicaFigures is what the kernel publishes of itself on a store.ReplicaStore
// (durable.Config.Figures), read from Stats.
func (k *Kernel) replicaFigures() store.ReplicaFigures {
	s := k.Stats()
	f := store.ReplicaFigures{Zombies: s.Zombies, Degraded: s.Degraded}
	for _, p := range []Priority{High, Normal, Low} {
		ps := s.ByPriority.At(p)
		*f.Queued.At(p), *f.Running.At(p), *f.Delayed.At(p) = ps.Queued, ps.Running, ps.Delayed
		*f.WaitP50.At(p), *f.WaitP99.At(p) = ps.WaitRecent.P50, ps.WaitRecent.P99
		*f.Totals.At(p) = store.ReplicaCounts{
			Submitted: ps.Submitted, Succeeded: ps.Succeeded, Failed: ps.Failed,
			TimedOut: ps.TimedOut, Retried: ps.Retried, Rejected: ps.Rejected,
		}
	}
	return f
}
