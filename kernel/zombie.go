package kernel

import (
	"sync"
	"time"

	"github.com/axsched/ax/internal/goid"
)

// zombie is a timed-out attempt whose function still runs after its slot was
// given to another task.
type zombie struct {
	ZombieInfo // but Stack; immutable
	gid        uint64

	pastGrace bool // it outlived ZombieGrace (and was logged); loop-owned

	mu    sync.Mutex
	stack []byte // captured after ZombieGrace; guarded by mu
}

// ZombieInfo describes one zombie: a task function that ignored its context past
// its timeout and still runs. Stack is filled once it outlived Config.ZombieGrace.
type ZombieInfo struct {
	TaskID   string
	Attempt  int
	Since    time.Time
	Priority Priority // the task's (normalized)
	// Group and Key are the task's group and key (Task.Group, DurableTask.Group),
	// and Kind its durable kind; empty for none.
	Group, Key, Kind string
	Stack            []byte
}

// Zombies lists the zombies running now. Safe for concurrent use.
func (k *Kernel) Zombies() []ZombieInfo {
	k.zmu.Lock()
	defer k.zmu.Unlock()
	out := make([]ZombieInfo, 0, len(k.zset))
	for z := range k.zset {
		z.mu.Lock()
		zi := z.ZombieInfo
		zi.Stack = z.stack
		out = append(out, zi)
		z.mu.Unlock()
	}
	return out
}

// zombieStarted registers a detached attempt. Loop only.
func (k *Kernel) zombieStarted(a *attempt) {
	h := a.h
	z := &zombie{ZombieInfo: ZombieInfo{TaskID: h.ID(), Attempt: int(a.n), Since: k.ls.now, Priority: normPriority(h.prio)}}
	if x := groupExt(h); x != nil && x.gd != nil {
		z.Group, z.Key = x.gd.name, x.key
	}
	if h.has(featDurable) {
		z.Kind = h.dur.kind
	}
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
		k.log.Info("kernel: zombie task returned", "task", z.TaskID, "attempt", z.Attempt, "after", k.ls.now.Sub(z.Since))
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
			k.log.Warn("kernel: zombie task still running past its timeout", "task", z.TaskID,
				"attempt", z.Attempt, "since", z.Since, "stack", string(st))
		}
	})
}
