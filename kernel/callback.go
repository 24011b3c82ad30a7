package kernel

import "github.com/axsched/ax/internal/goid"

// callGuarded calls f on a goroutine of its own and waits for it. It returns
// normally when f returned; otherwise r is the value f panicked with, or nil when
// f called runtime.Goexit, which then ended only that goroutine. The kernel calls
// user code that its own goroutines wait for (a BackoffFunc on the loop, a Store's
// methods) this way, since a deferred recover cannot stop a Goexit. The goroutine
// counts as k's own while f runs (Kernel.onOwnGoroutine), so that a Shutdown or
// Close called from f does not wait for the goroutine that waits for f.
func callGuarded(k *Kernel, f func()) (r any, normal bool) {
	type result struct {
		r      any
		normal bool
	}
	done := make(chan result, 1)
	go func() {
		var res result
		gid := goid.ID()
		k.guarded.Store(gid, struct{}{})
		defer func() {
			k.guarded.Delete(gid)
			if !res.normal {
				res.r = recover()
			}
			done <- res
		}()
		f()
		res.normal = true
	}()
	res := <-done
	return res.r, res.normal
}
