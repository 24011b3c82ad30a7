package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// poke asks the reconciler to advance run at once.
func (d *durable) poke(run string) {
	d.mu.Lock()
	d.todo[run] = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// passed returns a channel closed when the reconciler's next pass ended.
func (d *durable) passed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pass
}

// reconcile is the reconciler's goroutine: it advances the runs it is poked for
// at once, and the other live runs of the store every poll, until the kernel
// stops or Close.
func (d *durable) reconcile() {
	defer d.wg.Done()
	ctx := d.ctx
	timer := d.k.Clock().Timer(d.poll)
	defer timer.Stop()
	full := true
	fresh := make(map[string]bool) // the runs advanced since the last scan
	for {
		d.mu.Lock()
		todo := d.todo
		d.todo = make(map[string]bool)
		d.mu.Unlock()
		for run := range todo {
			d.advance(ctx, run)
			fresh[run] = true
		}
		if full {
			d.scan(ctx, fresh)
			fresh = make(map[string]bool)
		}
		d.mu.Lock()
		close(d.pass)
		d.pass = make(chan struct{})
		d.mu.Unlock()
		full = false
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
			full = true
			timer.Reset(d.poll)
		}
	}
}

// scan advances every live run of the flow the store holds (those whose head
// waits: parked, or checking the run's end again) but the fresh ones, which a
// poke advanced since the last scan: a run another process moved meanwhile is
// advanced here within two polls.
func (d *durable) scan(ctx context.Context, fresh map[string]bool) {
	for _, state := range []store.State{store.Delayed, store.Retrying} {
		q := store.TaskQuery{Kind: d.headKind, State: state, Limit: store.TaskListLimitMax}
		for {
			page, err := d.tl.ListTasks(ctx, q)
			if err != nil {
				return // the next poll tries again
			}
			for _, t := range page.Tasks {
				if run, ok := strings.CutPrefix(t.UniqueKey, keyPrefix); ok && !fresh[run] {
					d.advance(ctx, run)
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
	}
}

// advance carries run forward: it submits the tasks that are due, cancels the
// live tasks of a cancelled run, and makes the head due once the run ended. Any
// process may do it at any time: the tasks' unique keys refuse a second task
// for a stage or shard.
func (d *durable) advance(ctx context.Context, run string) {
	s, err := d.read(ctx, run)
	if err != nil {
		return
	}
	v := d.eval(s)
	if s.mark != nil {
		for _, id := range v.live {
			_, _ = d.k.Cancel(ctx, id)
		}
	}
	if len(v.submit) > 0 {
		d.submit(ctx, s, v.submit)
	}
	if v.state.Terminal() && (s.head.State == store.Delayed || s.head.State == store.Retrying) {
		if _, err := d.k.RunNow(ctx, s.head.ID); err == nil {
			d.k.Poll()
		}
	}
}

// submit stores the tasks of jobs. A key another task holds (another process
// submitted it) is no error; a task the kernel refuses for its options (a group
// it does not know) is stored without them, to fail with the refusal.
func (d *durable) submit(ctx context.Context, s *snap, jobs []job) {
	ts := make([]kernel.DurableTask, len(jobs))
	for i, j := range jobs {
		ts[i] = d.task(s, j, "")
	}
	for len(ts) > 0 {
		n := min(len(ts), 256)
		hs, err := d.k.SubmitDurableMany(ctx, ts[:n])
		if len(hs) != n {
			if errors.Is(err, kernel.ErrClosed) || ctx.Err() != nil {
				return
			}
			// Refused whole: one at a time, to learn each task's refusal (or
			// again the batch's: room, the store; the next pass tries again).
			for i := range n {
				if !d.submitOne(ctx, s, jobs[i], ts[i]) {
					return
				}
			}
		}
		for i, h := range hs {
			if h != nil {
				d.watch(s.run, ts[i].UniqueKey, h)
			} else if !d.submitOne(ctx, s, jobs[i], ts[i]) {
				return
			}
		}
		ts, jobs = ts[n:], jobs[n:]
	}
}

// submitOne submits t alone, to learn why the kernel refused it in a batch. It
// reports false when the refusal concerns every task (room, a closed kernel,
// the store), so that the pass stops submitting.
func (d *durable) submitOne(ctx context.Context, s *snap, j job, t kernel.DurableTask) bool {
	h, err := d.k.SubmitDurable(ctx, t)
	var ce *kernel.ConfigError
	switch {
	case err == nil:
		d.watch(s.run, t.UniqueKey, h)
	case errors.Is(err, store.ErrDuplicateKey):
	case errors.As(err, &ce):
		if h, err := d.k.SubmitDurable(ctx, d.task(s, j, err.Error())); err == nil {
			d.watch(s.run, t.UniqueKey, h)
		}
	default:
		return false
	}
	return true
}

// task returns the durable task of job j of run s; refused, when not empty, is
// the kernel's refusal of it, and the task fails with it.
func (d *durable) task(s *snap, j job, refused string) kernel.DurableTask {
	def := &d.f.stages[j.stage]
	p := taskPayload{Run: s.run, Stage: def.name, Shard: j.shard, Refused: refused}
	key := stageKey(s.run, def.name)
	if j.shard >= 0 {
		p.Total = s.count[j.stage]
		key = shardKey(s.run, def.name, j.shard)
	}
	b, _ := json.Marshal(p)
	t := kernel.DurableTask{
		Kind:      d.kinds[j.stage],
		Payload:   b,
		Priority:  def.opts.Priority,
		Timeout:   def.opts.Timeout,
		UniqueKey: key,
		UniqueFor: d.retention,
		Pool:      d.pool,
	}
	if def.opts.Retry != nil {
		t.MaxAttempts = def.opts.Retry.MaxAttempts
	}
	if refused == "" {
		t.Group, t.Key = def.opts.Group, def.opts.Key
	} else {
		t.MaxAttempts = 1
	}
	return t
}

// watch pokes the reconciler for run when h, the handle of the task that keeps
// key, ended and the store shows its end: the kernel ends a durable task in
// memory before the group commit that stores the end, so the task's key goes to
// the confirmer (see [durable.confirm]) once h is done.
func (d *durable) watch(run, key string, h *kernel.Handle) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		select {
		case <-h.Done():
		case <-d.ctx.Done():
			return
		}
		d.mu.Lock()
		d.ended[key] = run
		d.mu.Unlock()
		select {
		case d.endWake <- struct{}{}:
		default:
		}
	}()
}

// confirm is the confirmer's goroutine: it reads back the keys of the tasks
// that ended in memory, all of them in one read (store.StatesMax a call), and
// pokes the run of each whose end the store shows (or that the store no longer
// holds). While some are not stored yet it reads again at growing intervals, from
// 1 ms up to watchMax; so the ends of one group commit, such as a sharded
// stage's, advance their run once.
func (d *durable) confirm() {
	defer d.wg.Done()
	ctx := d.ctx
	wait := time.Millisecond
	for {
		d.mu.Lock()
		keys := make([]string, 0, len(d.ended))
		for key := range d.ended {
			keys = append(keys, key)
		}
		d.mu.Unlock()
		if len(keys) == 0 {
			select {
			case <-d.endWake:
				wait = time.Millisecond
				continue
			case <-ctx.Done():
				return
			}
		}
		seen := make(map[string]bool, len(keys)) // confirmed: stored ended or gone
		for len(keys) > 0 {
			n := min(len(keys), store.StatesMax)
			ts, err := d.kr.TasksByKey(ctx, keys[:n])
			if err != nil {
				break // read again after the wait
			}
			for _, key := range keys[:n] {
				seen[key] = true
			}
			d.mu.Lock()
			for i := range ts {
				if ts[i].State.Live() {
					seen[ts[i].UniqueKey] = false
				} else if run, ok := d.ended[ts[i].UniqueKey]; ok {
					d.done.put(run, ts[i].UniqueKey, &ts[i])
				}
			}
			d.mu.Unlock()
			keys = keys[n:]
		}
		runs := make(map[string]bool)
		d.mu.Lock()
		for key, ok := range seen {
			if ok {
				runs[d.ended[key]] = true
				delete(d.ended, key)
			}
		}
		left := len(d.ended)
		d.mu.Unlock()
		for run := range runs {
			d.poke(run)
		}
		if left == 0 {
			wait = time.Millisecond
			continue
		}
		timer := d.k.Clock().Timer(wait)
		select {
		case <-timer.C:
		case <-d.endWake:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return
		}
		wait = min(2*wait, watchMax, d.poll)
	}
}

// runHead is the function of a run's head: it runs once the run ended (the
// reconciler made it due), and ends with the run's outcome as its result:
// Succeeded for a run that succeeded, Failed otherwise. When it finds the run
// going on (a stage was retried meanwhile), it fails to be retried; the
// reconciler makes it due again when the run ends.
func (d *durable) runHead(ctx context.Context, payload []byte) error {
	hp, err := decodeHead(payload)
	if err != nil {
		return kernel.Permanent(err)
	}
	s, err := d.read(ctx, hp.Run)
	if err != nil {
		return err
	}
	v := d.eval(s)
	if !v.state.Terminal() {
		return fmt.Errorf("flow %q: run %s is still running", d.f.name, hp.Run)
	}
	d.done.forget(hp.Run) // the head ends with this: the reconcilers read the run no more
	out := v.state.String()
	if err := d.runErr(v); err != nil {
		out += ": " + err.Error()
	}
	_ = kernel.SetResult(ctx, []byte(store.Truncate(out, 4096)))
	if v.state == Succeeded {
		return nil
	}
	return kernel.Permanent(errors.New(store.Truncate(out, 4096)))
}

// runTask is the function of the tasks of stage i: its run, its count, or a
// shard. It reads the run's input and its dependencies' results from the store,
// and cancels itself when the run was cancelled.
func (d *durable) runTask(ctx context.Context, i int, payload []byte) (err error) {
	var p taskPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return kernel.Permanent(fmt.Errorf("flow %q: stage task payload: %w", d.f.name, err))
	}
	if p.Refused != "" {
		return kernel.Permanent(errors.New(p.Refused))
	}
	def := &d.f.stages[i]
	hp, known := d.done.head(p.Run) // the run's input, read once
	keys := []string{markKey(p.Run), headKey(p.Run)}
	if known {
		keys = keys[:1]
	}
	ups := len(keys)
	for _, u := range d.ups[i] {
		keys = append(keys, stageKey(p.Run, d.f.stages[u].name))
	}
	byKey, err := d.byKeys(ctx, p.Run, keys)
	if err != nil {
		return err
	}
	if byKey[keys[0]] != nil {
		// Cancel this task: it ends Canceled once it returns. Should the kernel not
		// find it, it fails instead, which a cancelled run ends Canceled with too.
		if info, ok := kernel.TaskInfo(ctx); ok {
			if n, err := d.k.Cancel(ctx, info.ID); err == nil && n > 0 {
				<-ctx.Done()
			}
		}
		return kernel.Permanent(fmt.Errorf("flow %q: run %s: %w", d.f.name, p.Run, kernel.ErrCanceled))
	}
	if !known {
		head := byKey[keys[1]]
		if head == nil {
			return kernel.Permanent(fmt.Errorf("flow %q: run %q: %w", d.f.name, p.Run, ErrUnknownRun))
		}
		if hp, err = decodeHead(head.Payload); err != nil {
			return kernel.Permanent(err)
		}
		d.done.putHead(p.Run, hp)
	}
	in := &durIn{run: p.Run, flow: d.f.name, input: hp.Input, results: make(map[string][]byte, len(d.ups[i]))}
	for j, u := range d.ups[i] {
		if t := byKey[keys[ups+j]]; t != nil && t.State == store.Succeeded && d.f.stages[u].run != nil {
			in.results[d.f.stages[u].name] = t.Result
		}
	}
	ins := Inputs{d: in}
	switch {
	case def.run != nil:
		b, err := def.run(ctx, ins)
		if err != nil {
			return err
		}
		if len(b) > resultMax {
			return kernel.Permanent(fmt.Errorf("flow: result of %d bytes: at most %d", len(b), resultMax))
		}
		if err := kernel.SetResult(ctx, b); err != nil {
			return kernel.Permanent(err)
		}
		return nil
	case p.Shard < 0:
		var n int
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = kernel.Permanent(fmt.Errorf("%w: CountFunc panicked: %v", ErrShardCount, v))
				}
			}()
			n, err = def.count(ctx, ins)
		}()
		if err != nil {
			return err
		}
		if n < 1 || n > def.max {
			return kernel.Permanent(fmt.Errorf("%w: CountFunc returned %d: must be in [1, %d] (ShardOptions.MaxShards)", ErrShardCount, n, def.max))
		}
		if err := kernel.SetResult(ctx, []byte(strconv.Itoa(n))); err != nil {
			return kernel.Permanent(err)
		}
		return nil
	default:
		return def.shard(ctx, Shard{Index: p.Shard, Total: p.Total}, ins)
	}
}
