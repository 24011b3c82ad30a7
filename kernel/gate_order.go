package kernel

import "github.com/axsched/ax/queue"

// orderedHead returns the level of the next task of ks, a key of an Ordered
// group (GroupConfig.Ordered): the task that holds the key (keyState.owner, given
// by grant) if it waits in the key's queue, at its level's head (gateIn,
// gatePushFront), else the first to come of those waiting (taskExt.order). It
// reports false when there is none, or its priority is paused. Loop only.
func (k *Kernel) orderedHead(ks *keyState) (queue.Level, bool) {
	l := -1
	if o := ks.owner; o != nil {
		if !o.ext.inGate {
			return 0, false // running, or waiting for its retry
		}
		l = int(o.bucket)
	} else {
		for i := range queue.NumLevels {
			if ks.q[i].Len() > 0 && (l < 0 || ks.q[i].Peek().ext.order < ks.q[l].Peek().ext.order) {
				l = i
			}
		}
	}
	return queue.Level(l), l >= 0 && k.ls.gate.pausedLevels&(1<<l) == 0
}

// gateFreeKey frees the key that h, ending, held (GroupConfig.Ordered), and
// offers it to its next task. Loop only.
func (k *Kernel) gateFreeKey(h *Handle) {
	if ks := h.ext.ks; ks != nil && ks.owner == h {
		ks.owner = nil
		k.touchKey(ks)
	}
}
