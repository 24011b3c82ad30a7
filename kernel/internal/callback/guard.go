package callback

import (
	"fmt"
	"sync"

	"github.com/axsched/ax/internal/goid"
)

// Guarded calls f on a goroutine of its own and waits for it. It returns normally
// when f returned; otherwise r is the value f panicked with, or nil when f called
// runtime.Goexit, which then ended only that goroutine. The kernel calls user code
// that its own goroutines wait for (a BackoffFunc on the loop, a Store's methods)
// this way, since a deferred recover cannot stop a Goexit. The goroutine's ID is a
// key of own while f runs, so that the kernel can tell it is one of its own (a
// Shutdown or Close called from f must not wait for the goroutine that waits for f).
func Guarded(own *sync.Map, f func()) (r any, normal bool) {
	type result struct {
		r      any
		normal bool
	}
	done := make(chan result, 1)
	go func() {
		var res result
		gid := goid.ID()
		own.Store(gid, struct{}{})
		defer func() {
			own.Delete(gid)
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

// StoreCall runs f with [Guarded] and returns what it returned, turning a panic or a
// runtime.Goexit into an error naming the store's method op.
func StoreCall[T any](own *sync.Map, op string, f func() (T, error)) (v T, err error) {
	r, ok := Guarded(own, func() { v, err = f() })
	switch {
	case ok:
		return v, err
	case r != nil:
		return v, fmt.Errorf("kernel: Store.%s panicked: %v", op, r)
	default:
		return v, fmt.Errorf("kernel: Store.%s called runtime.Goexit", op)
	}
}
