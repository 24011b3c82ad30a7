package kernel

import (
	"sync"
	"time"

	"github.com/axsched/ax/internal/goid"
)

// zombie is a timed-out attempt whose function still runs after its slot was
// given to another task.
type zombie struct {
	taskID  string
	attempt int
	since   time.Time // when it timed out
	gid     uint64

	pastGrace bool // it outlived ZombieGrace (and was logged); loop-owned

	mu    sync.Mutex
	stack []byte // captured after ZombieGrace; guarded by mu
}

// ZombieInfo describes one zombie: a task function that ignored its context past
// its timeout and still runs. Stack is filled once it outlived Config.ZombieGrace.
type ZombieInfo struct {
	TaskID  string
	Attempt int
	Since   time.Time
	Stack   []byte
}

// Zombies lists the zombies running now. Safe for concurrent use.
func (k *Kernel) Zombies() []ZombieInfo {
	k.zmu.Lock()
	defer k.zmu.Unlock()
	out := make([]ZombieInfo, 0, len(k.zset))
	for z := range k.zset {
		z.mu.Lock()
		out = append(out, ZombieInfo{TaskID: z.taskID, Attempt: z.attempt, Since: z.since, Stack: z.stack})
		z.mu.Unlock()
	}
	return out
}

// zombieStarted registers a detached attempt. Loop only.
func (k *Kernel) zombieStarted(a *attempt) {
	z := &zombie{taskID: a.h.ID(), attempt: int(a.n), since: k.ls.now}
	if a.exec != nil {
		z.gid = a.exec.gid.Load()
	}
	a.zombie = z
	k.zmu.Lock()
	if k.zset == nil {
		k.zset = make(map[*zombie]struct{})
	}
	k.zset[z] = struct{}{}
	k.zmu.Unlock()
	k.schedule(a, timerGrace, k.ls.now.Add(k.ls.rcl.cfg.ZombieGrace))
}

// zombieReturned forgets a zombie whose function returned. Loop only.
func (k *Kernel) zombieReturned(a *attempt) {
	z := a.zombie
	a.zombie = nil
	if a.tkind == timerGrace {
		k.ls.wheel.Cancel(a.timer)
		a.tkind = timerNone
	}
	k.zmu.Lock()
	delete(k.zset, z)
	k.zmu.Unlock()
	// A function that returned within ZombieGrace of its timeout is no news; one
	// logged as still running is logged as returned too.
	if k.log != nil && z.pastGrace {
		k.log.Info("kernel: zombie task returned", "task", z.taskID, "attempt", z.attempt, "after", k.ls.now.Sub(z.since))
	}
}

// onGrace logs a zombie that outlived ZombieGrace, with its stack, off the loop.
func (k *Kernel) onGrace(a *attempt) {
	z := a.zombie
	if z == nil {
		return
	}
	z.pastGrace = true
	k.sidePool.Submit(func() {
		st := goid.Stack(z.gid)
		z.mu.Lock()
		z.stack = st
		z.mu.Unlock()
		if k.log != nil {
			k.log.Warn("kernel: zombie task still running past its timeout", "task", z.taskID,
				"attempt", z.attempt, "since", z.since, "stack", string(st))
		}
	})
}
