package kernel

import "github.com/axsched/ax/kernel/internal/callback"

// callGuarded is [callback.Guarded] for k: the goroutine that runs f counts as
// k's own while f runs (Kernel.onOwnGoroutine).
func callGuarded(k *Kernel, f func()) (r any, normal bool) { return callback.Guarded(&k.guarded, f) }
