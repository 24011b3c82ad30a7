// Package spin provides a mutex that spins a while before it sleeps, for locks
// held for tens of nanoseconds by many goroutines at once.
package spin

import (
	"runtime"
	"sync"
)

// Mutex is a sync.Mutex that tries a while before it sleeps. The intake's and
// the run queue's locks are held for tens of nanoseconds per task, by the
// submitters, the loop and the executors at once. A sync.Mutex that finds one
// taken sleeps almost at once, and the wake-up costs far more than the wait would
// have: the waiters park on a futex while the holder has long let go. Trying
// again, and yielding the P now and then so that a holder waiting for it can
// finish, keeps the goroutines running.
type Mutex struct {
	sync.Mutex
}

const (
	// spinLockTries is how many times Lock tries before it sleeps.
	spinLockTries = 100
	// spinLockYield is how often, in tries, Lock yields the P meanwhile.
	spinLockYield = 20
)

// Lock locks m, trying spinLockTries times before it blocks like sync.Mutex.
func (m *Mutex) Lock() {
	for i := 1; i <= spinLockTries; i++ {
		if m.TryLock() {
			return
		}
		if i%spinLockYield == 0 {
			runtime.Gosched()
		}
	}
	m.Mutex.Lock()
}
