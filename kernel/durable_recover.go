package kernel

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/axsched/ax/kernel/internal/registry"
	"github.com/axsched/ax/store"
)

// recover schedules tasks read back from the store, each in its group's gate with
// its key. A task whose group this kernel does not have (Config.Groups) is held
// until an Update adds it (releaseGroups).
func (k *Kernel) recover(tasks []store.StoredTask, fn DurableFunc) {
	// The check and the hold are made under the registry's lock, which Update's
	// releaseGroups takes after the new config is in force: a task is never held
	// for a group that is there.
	tasks, groups := registry.HoldGroupless(k.dur.reg, tasks, func() map[string]*groupDef { return k.rc.Load().groups },
		func(t *store.StoredTask) {
			k.log.Warn("kernel: a recovered durable task names a group not in Config.Groups; it is held until an Update adds it", "task", t.ID, "group", t.Group)
		})
	rc := k.rc.Load()
	now := k.clk.Now()
	var hs []*Handle
	var dead []jentry
	for i := range tasks {
		t := &tasks[i]
		prio := normPriority(t.Priority)
		maxAttempts := t.MaxAttempts
		if maxAttempts <= 0 {
			maxAttempts = rc.retry[levelOf(prio)].MaxAttempts
		}
		var lost *store.Attempt // the attempt a stop interrupted: its record goes with the next change
		if t.State == Running {
			lost = &store.Attempt{Number: t.Attempt, Start: t.UpdatedAt, End: now, Outcome: Abandoned, Error: "kernel: interrupted: its process stopped or lost the task while it ran"}
		}
		if t.State == Running && t.Attempt >= maxAttempts {
			msg := "kernel: attempt " + strconv.Itoa(t.Attempt) + " of " + strconv.Itoa(maxAttempts) + " was interrupted (the process stopped) and it was the last"
			dead = append(dead, jentry{C: store.Change{Op: store.OpFail, Fence: t.Fence, Attempt: *lost, Task: store.StoredTask{ID: t.ID, State: Failed, LastError: msg, UpdatedAt: now}}})
			k.dur.reg.DropKeys(t.UniqueKey)
			continue
		}
		task := Task{ID: t.ID, Priority: prio, Timeout: t.Timeout}
		if at := k.dur.skew.DueFromStore(t.RunAt); at.After(now) {
			task.At = at // on this kernel's clock
		}
		var gd *groupDef
		if t.Group != "" {
			gd = groups[t.Group] // holdGroupless kept only the tasks of these groups
		}
		h := k.newDurableHandle(&task, rc, fn, t.Kind, t.Payload, t.UniqueKey, maxAttempts, t.Timeout, gd, t.Key)
		h.dur.fence, h.dur.headers, h.dur.lost = t.Fence, t.Headers, lost
		// The next attempt: after one interrupted by the stop (Running), after a failed
		// one waiting for its retry, or the first.
		h.first.n = int32(t.Attempt) + 1
		hs = append(hs, h)
	}
	if len(dead) > 0 {
		k.dur.j.Add(dead)
	}
	if len(hs) > 0 {
		k.control(ctrlMsg{kind: ctrlDurable, dur: &durMsg{kind: durRecover, hs: hs}})
	}
}

// releaseGroups schedules the held tasks of the groups rc has (an Update added
// them).
func (k *Kernel) releaseGroups(rc *resolved) {
	d := k.dur
	if d == nil {
		return
	}
	ts := d.reg.ReleaseGroups(func(g string) bool { _, ok := rc.groups[g]; return ok })
	if len(ts) > 0 {
		k.recoverStored(ts)
	}
}

// Requeue gives the named dead letters another life (see [store.Store.Requeue]: Queued,
// attempts counted from zero, a new fence) and schedules them in this kernel, each
// in its group's gate (see [DurableTask.Group]) — or holds them until their kind is
// registered or their group is in Config.Groups. With a [store.SharedStore] they belong to
// this kernel's owner ([store.SharedStore.RequeueAs]). It returns how many it requeued; IDs
// that are unknown or not dead letters are skipped. List dead letters with the
// store's [store.Store.DeadLetters]. ctx bounds the store's call; a nil ctx is
// context.Background().
func (k *Kernel) Requeue(ctx context.Context, ids ...string) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d := k.dur
	if d == nil {
		return 0, errors.New("kernel: Requeue: Config.Store is nil")
	}
	if k.isClosed() {
		return 0, ErrClosed
	}
	ts, err := storeCall(k, "Requeue", func() ([]store.StoredTask, error) {
		if d.own != nil {
			return d.own.Store().RequeueAs(ctx, d.own.Current(), d.skew.NowToStore(k.clk.Now()), ids...)
		}
		return d.j.Store().Requeue(ctx, d.skew.NowToStore(k.clk.Now()), ids...)
	})
	if err != nil {
		return 0, fmt.Errorf("kernel: requeue: %w", err)
	}
	k.recoverStored(ts)
	return len(ts), nil
}

// recoverStored schedules tasks read back from the store (rescued ones): those of a
// registered kind now, the others once their kind is registered.
func (k *Kernel) recoverStored(ts []store.StoredTask) {
	for _, b := range k.dur.reg.Sort(ts) {
		k.recover(b.Tasks, b.Fn)
	}
}
