package kernel

import (
	"math"
	"sync/atomic"

	"github.com/axsched/ax/kernel/internal/callback"
)

// endCall is one Task.OnEnd call waiting for its goroutine.
type endCall struct {
	fn    func(State, error)
	state State
	err   error
}

// endQueue delivers the Task.OnEnd calls, in the order the tasks ended, on a
// goroutine of their own started with the first of them: a kernel whose tasks
// have no OnEnd has none. Only the loop pushes (Kernel.end); any goroutine may
// read the queue (Kernel.onOwnGoroutine), and Shutdown and Close stop it after the
// loop returned, so that no end is pushed after the stop.
type endQueue struct {
	q atomic.Pointer[callback.Queue[endCall]] // nil until the first OnEnd
}

// endCalls returns the OnEnd queue, starting it if needed. Called on the loop.
func (k *Kernel) endCalls() *callback.Queue[endCall] {
	if q := k.ends.q.Load(); q != nil {
		return q
	}
	q := callback.NewQueue(func(c endCall) { c.fn(c.state, c.err) }, math.MaxInt, k.m.callbackPanics)
	k.ends.q.Store(q)
	return q
}
