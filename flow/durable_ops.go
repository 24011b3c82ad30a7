package flow

import (
	"context"
	"errors"
	"fmt"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

func (d *durable) inspect(ctx context.Context, run string) (RunInfo, error) {
	s, err := d.read(ctx, run)
	if err != nil {
		return RunInfo{}, err
	}
	return d.info(s, d.eval(s)), nil
}

func (d *durable) list(ctx context.Context, after string, limit int) ([]RunInfo, string, error) {
	if limit <= 0 {
		limit = store.TaskListLimitDefault
	}
	page, err := d.tl.ListTasks(ctx, store.TaskQuery{Kind: d.headKind, After: after, Limit: min(limit, store.TaskListLimitMax)})
	if err != nil {
		return nil, "", fmt.Errorf("flow %q: List: %w", d.f.name, err)
	}
	runs := make([]RunInfo, 0, len(page.Tasks))
	for _, t := range page.Tasks {
		run, ok := cutKey(t.UniqueKey)
		if !ok {
			continue
		}
		s, err := d.read(ctx, run)
		if errors.Is(err, ErrUnknownRun) {
			continue // its key was taken over: a run past its retention
		}
		if err != nil {
			return nil, "", err
		}
		runs = append(runs, d.info(s, d.eval(s)))
	}
	return runs, page.Next, nil
}

// cutKey returns the run of a head's unique key.
func cutKey(key string) (string, bool) {
	if len(key) != len(keyPrefix)+runIDLen || key[:len(keyPrefix)] != keyPrefix {
		return "", false
	}
	return key[len(keyPrefix):], true
}

func (d *durable) wait(ctx context.Context, run string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	for full := true; ; {
		pass := d.passed()
		if !full {
			// The head alone says whether the run may have ended: it stays
			// parked, Delayed far ahead, until a reconciler made it due for the
			// run's end (Kernel.RunNow).
			byKey, err := d.byKeys(ctx, run, []string{headKey(run)})
			if err != nil {
				return err
			}
			h := byKey[headKey(run)]
			full = h == nil || h.State != store.Delayed || h.RunAt.Before(d.k.Clock().Now().Add(headAhead/2))
		}
		if full {
			s, err := d.read(ctx, run)
			if err != nil {
				return err
			}
			v := d.eval(s)
			if v.state.Terminal() {
				return d.runErr(v)
			}
			full = false
		}
		timer := d.k.Clock().Timer(d.poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-pass:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (d *durable) cancel(ctx context.Context, run string) error {
	s, err := d.read(ctx, run)
	if err != nil {
		return err
	}
	if s.mark != nil || d.eval(s).state.Terminal() {
		return nil
	}
	_, err = d.k.SubmitDurable(ctx, kernel.DurableTask{
		Kind:      d.markKind,
		Payload:   []byte(run),
		Priority:  kernel.High,
		UniqueKey: markKey(run),
		UniqueFor: d.retention,
	})
	if err != nil && !errors.Is(err, store.ErrDuplicateKey) {
		return fmt.Errorf("flow %q: Cancel %s: %w", d.f.name, run, err)
	}
	d.poke(run)
	return nil
}

func (d *durable) retryStage(ctx context.Context, run, stage string) error {
	i, ok := d.index[stage]
	if !ok {
		return fmt.Errorf("flow %q: RetryStage: no stage %q", d.f.name, stage)
	}
	s, err := d.read(ctx, run)
	if err != nil {
		return err
	}
	if s.mark != nil {
		return fmt.Errorf("flow %q: RetryStage %s %q: the run was cancelled", d.f.name, run, stage)
	}
	v := d.eval(s)
	if st := v.stages[i].State; st != StageFailed {
		return fmt.Errorf("flow %q: RetryStage %s %q: the stage is %s, not failed", d.f.name, run, stage, st)
	}
	var ids []string
	if t := s.stage[i]; t.State.DeadLetter() {
		ids = append(ids, t.ID)
	}
	for _, t := range s.shards[i] {
		if t != nil && t.State.DeadLetter() {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("flow %q: RetryStage %s %q: its failed tasks were cancelled, not dead-lettered: nothing to requeue", d.f.name, run, stage)
	}
	n, err := d.k.Requeue(ctx, ids...)
	if err != nil {
		return fmt.Errorf("flow %q: RetryStage %s %q: %w", d.f.name, run, stage, err)
	}
	if n != len(ids) {
		return fmt.Errorf("flow %q: RetryStage %s %q: requeued %d of %d tasks (others were requeued or purged meanwhile)", d.f.name, run, stage, n, len(ids))
	}
	if err := d.revive(ctx, run); err != nil {
		return fmt.Errorf("flow %q: RetryStage %s %q: %w", d.f.name, run, stage, err)
	}
	d.poke(run)
	return nil
}

// revive makes sure that the head of run, which a retried stage made live
// again, waits where the reconcilers look for live runs: a head that ended
// the run (a dead letter) is requeued, and one that is deciding the run's end
// is waited for, as it may end it from what it read before the retry.
func (d *durable) revive(ctx context.Context, run string) error {
	for {
		byKey, err := d.byKeys(ctx, run, []string{headKey(run)})
		if err != nil {
			return err
		}
		h := byKey[headKey(run)]
		switch {
		case h == nil:
			return ErrUnknownRun
		case h.State.DeadLetter():
			if _, err := d.k.Requeue(ctx, h.ID); err != nil {
				return err
			}
			continue // requeued (or requeued by another): look again
		case h.State != store.Running:
			return nil
		}
		timer := d.k.Clock().Timer(d.poll / 4)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

func (d *durable) close() error {
	d.stopOnce.Do(func() { close(d.stop) })
	d.wg.Wait()
	return nil
}
