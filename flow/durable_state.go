package flow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// snap is what the store holds of one run: its tasks, found by their keys.
type snap struct {
	run    string
	head   *store.StoredTask
	hp     headPayload
	mark   *store.StoredTask   // the cancel marker, nil when not cancelled
	stage  []*store.StoredTask // by stage: its task, or its count task
	count  []int               // by stage: the shard count once counted, else 0
	shards [][]*store.StoredTask
}

// read reads run's tasks from the store. It returns an error wrapping
// ErrUnknownRun when the store holds no head for run.
func (d *durable) read(ctx context.Context, run string) (*snap, error) {
	s := &snap{run: run, stage: make([]*store.StoredTask, len(d.f.stages)), count: make([]int, len(d.f.stages)), shards: make([][]*store.StoredTask, len(d.f.stages))}
	keys := []string{headKey(run), markKey(run)}
	for _, st := range d.f.stages {
		keys = append(keys, stageKey(run, st.name))
	}
	byKey, err := d.byKeys(ctx, run, keys)
	if err != nil {
		return nil, err
	}
	s.head, s.mark = byKey[keys[0]], byKey[keys[1]]
	if s.head == nil || s.head.Kind != d.headKind {
		return nil, fmt.Errorf("flow %q: run %q: %w", d.f.name, run, ErrUnknownRun)
	}
	if s.hp, err = decodeHead(s.head.Payload); err != nil {
		return nil, fmt.Errorf("flow %q: run %q: %w", d.f.name, run, err)
	}
	if s.head.State.Live() {
		d.done.putHead(run, s.hp)
	}
	var more []string
	for i, st := range d.f.stages {
		t := byKey[keys[2+i]]
		s.stage[i] = t
		if st.run == nil && t != nil && t.State == store.Succeeded {
			n, err := strconv.Atoi(string(t.Result))
			if err != nil || n < 1 {
				continue // never stored so: the count task fails on a bad count
			}
			s.count[i] = n
			s.shards[i] = make([]*store.StoredTask, n)
			for j := range n {
				more = append(more, shardKey(run, st.name, j))
			}
		}
	}
	if len(more) == 0 {
		return s, nil
	}
	byKey, err = d.byKeys(ctx, run, more)
	if err != nil {
		return nil, err
	}
	for i, st := range d.f.stages {
		for j := range s.shards[i] {
			s.shards[i][j] = byKey[shardKey(run, st.name, j)]
		}
	}
	return s, nil
}

// byKeys reads the tasks of run that keep keys, store.StatesMax keys per call;
// the succeeded stages and shards it read before come from d.done.
func (d *durable) byKeys(ctx context.Context, run string, keys []string) (map[string]*store.StoredTask, error) {
	out := make(map[string]*store.StoredTask, len(keys))
	ask := make([]string, 0, len(keys))
	for _, key := range keys {
		if t, ok := d.done.get(run, key); ok {
			out[key] = t
		} else {
			ask = append(ask, key)
		}
	}
	for len(ask) > 0 {
		n := min(len(ask), store.StatesMax)
		ts, err := d.kr.TasksByKey(ctx, ask[:n])
		if err != nil {
			return nil, fmt.Errorf("flow %q: %w", d.f.name, err)
		}
		for i := range ts {
			t := &ts[i]
			out[t.UniqueKey] = t
			d.done.put(run, t.UniqueKey, t)
		}
		ask = ask[n:]
	}
	return out, nil
}

// verdict is what a run's stored tasks say: the state of the run and of each
// stage, and what to do to carry the run forward.
type verdict struct {
	state  State
	stages []StageStatus
	errs   []error
	ended  time.Time // the latest end among the run's tasks, once the run ended
	submit []job     // tasks to submit: a stage's (shard -1) or shards
	live   []string  // stored IDs of the run's live tasks
}

// storedError is the error of a task as its store keeps it: its LastError.
type storedError struct {
	msg    string
	target error // ErrShardCount, or kernel.ErrCanceled for a cancelled task
}

func (e *storedError) Error() string { return e.msg }
func (e *storedError) Unwrap() error { return e.target }

func taskErr(t *store.StoredTask) error {
	msg := t.LastError
	if msg == "" {
		msg = "task ended " + t.State.String()
	}
	e := &storedError{msg: msg}
	switch {
	case strings.Contains(msg, ErrShardCount.Error()):
		e.target = ErrShardCount
	case t.State == store.Canceled:
		e.target = kernel.ErrCanceled
	}
	return e
}

// eval computes the verdict of s. The same stored tasks give the same verdict
// in every process.
func (d *durable) eval(s *snap) *verdict {
	n := len(d.f.stages)
	v := &verdict{stages: make([]StageStatus, n)}
	canceled := s.mark != nil
	live := 0
	note := func(t *store.StoredTask) {
		if t == nil {
			return
		}
		if t.State.Live() {
			live++
			v.live = append(v.live, t.ID)
		} else if t.UpdatedAt.After(v.ended) {
			v.ended = t.UpdatedAt
		}
	}
	// The states the stages' tasks give, before the policy.
	failed := false
	for i := range d.f.stages {
		st := &v.stages[i]
		st.Name = d.f.stages[i].name
		t := s.stage[i]
		note(t)
		switch {
		case t == nil:
			st.State = StageWaiting
		case t.State.Live():
			st.State = StageRunning
		case t.State == store.Canceled && canceled:
			st.State = StageCanceled
		case t.State != store.Succeeded: // a dead letter, or cancelled by other means than Cancel
			st.State = StageFailed
			st.Err = &StageError{Flow: d.f.name, Stage: st.Name, Shard: -1, Err: taskErr(t)}
		case d.f.stages[i].run != nil:
			st.State = StageSucceeded
		default:
			st.State = d.evalShards(s, i, st, canceled, note)
		}
		if st.State == StageFailed {
			failed = true
		}
	}
	halted := canceled || failed && s.hp.Policy == FailFast
	// The policy, in an order where each stage follows its dependencies.
	for _, i := range d.topo {
		st := &v.stages[i]
		switch st.State {
		case StageWaiting:
			ready, skip := true, false
			for _, p := range d.prev[i] {
				switch v.stages[p].State {
				case StageSucceeded:
				case StageFailed, StageSkipped:
					ready, skip = false, true
				default:
					ready = false
				}
			}
			switch {
			case halted:
				st.State = StageCanceled
			case skip && s.hp.Policy == ContinueIndependent:
				st.State = StageSkipped
			case ready:
				v.submit = append(v.submit, job{i, -1})
			}
		case StageRunning:
			if s.count[i] == 0 {
				break // its task or count runs
			}
			d.fillShards(s, i, st, halted, v)
		}
	}
	for i := range v.stages {
		if st := &v.stages[i]; st.State == StageFailed {
			v.errs = append(v.errs, st.Err)
		}
	}
	all, pending := true, false
	for i := range v.stages {
		switch v.stages[i].State {
		case StageWaiting, StageRunning:
			pending = true
		case StageSucceeded:
		default:
			all = false
		}
	}
	switch {
	case pending || live > 0:
		v.state, v.ended = Running, time.Time{}
	case all:
		v.state = Succeeded
	case canceled:
		v.state = Canceled
	default:
		v.state = Failed
	}
	if v.state.Terminal() && !s.head.State.Live() && s.head.UpdatedAt.After(v.ended) {
		v.ended = s.head.UpdatedAt
	}
	if v.state.Terminal() && !s.head.State.Live() {
		d.done.forget(s.run) // its head ended: read no more by the reconcilers
	}
	return v
}

// evalShards returns the state of the counted sharded stage i from its shards'
// tasks, and fills st's shard figures. A shard cancelled while the run is not
// (canceled false) fails the stage, as in a run in memory.
func (d *durable) evalShards(s *snap, i int, st *StageStatus, canceled bool, note func(*store.StoredTask)) StageState {
	st.Shards = s.count[i]
	if st.Shards == 0 {
		st.State = StageFailed
		st.Err = &StageError{Flow: d.f.name, Stage: st.Name, Shard: -1, Err: fmt.Errorf("%w: stored count %q", ErrShardCount, s.stage[i].Result)}
		return StageFailed
	}
	state := StageSucceeded
	for j, t := range s.shards[i] {
		note(t)
		switch {
		case t == nil || t.State.Live():
			if state == StageSucceeded {
				state = StageRunning
			}
		case t.State == store.Succeeded:
			st.ShardsDone++
		case t.State == store.Canceled && canceled:
			if state != StageFailed {
				state = StageCanceled
			}
		default:
			if state != StageFailed {
				state = StageFailed
				st.Err = &StageError{Flow: d.f.name, Stage: st.Name, Shard: j, Err: taskErr(t)}
			}
		}
	}
	if state == StageCanceled {
		// A cancelled shard ends the stage once no other shard runs.
		for _, t := range s.shards[i] {
			if t != nil && t.State.Live() {
				return StageRunning
			}
		}
	}
	return state
}

// fillShards decides what the running sharded stage i does next: submit its
// missing shards (within MaxParallel), or, when the run halted, end once none of
// its shards runs.
func (d *durable) fillShards(s *snap, i int, st *StageStatus, halted bool, v *verdict) {
	running := 0
	for _, t := range s.shards[i] {
		if t != nil && t.State.Live() {
			running++
		}
	}
	if halted {
		if running == 0 {
			st.State = StageCanceled
		}
		return
	}
	par := d.f.stages[i].par
	for j, t := range s.shards[i] {
		if t == nil && (par == 0 || running < par) {
			v.submit = append(v.submit, job{i, j})
			running++
		}
	}
}

// runErr returns the error of a run in state state, as [Handle.Err] does.
func (d *durable) runErr(v *verdict) error {
	switch v.state {
	case Failed:
		if len(v.errs) == 1 {
			return v.errs[0]
		}
		return errors.Join(v.errs...)
	case Canceled:
		return fmt.Errorf("flow %q: %w", d.f.name, kernel.ErrCanceled)
	}
	return nil
}

// info returns the RunInfo of s and its verdict.
func (d *durable) info(s *snap, v *verdict) RunInfo {
	ri := RunInfo{ID: s.run, Flow: d.f.name, State: v.state, Created: s.head.CreatedAt, Ended: v.ended, Stages: v.stages}
	if err := d.runErr(v); err != nil {
		ri.Err = err.Error()
	}
	return ri
}
