package flow_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
)

// mStage is one stage of a random flow: its dependencies (lower indexes), its
// shards (0: a plain stage) and, per shard, how many attempts fail first.
type mStage struct {
	name   string
	deps   []int
	shards int
	fails  []int // per shard (one for a plain stage): attempts 1..fails[s] fail
	work   []time.Duration
	prio   kernel.Priority
}

type mFlow struct {
	stages      []mStage
	maxAttempts int
	policy      flow.Policy
	order       []int // the order the stages are defined in
}

// genFlow makes a random DAG of stages: each stage depends on some earlier ones,
// and the stages are defined in a shuffled order.
func genFlow(rng *rand.Rand) mFlow {
	m := mFlow{maxAttempts: 1 + rng.IntN(3), policy: flow.Policy(rng.IntN(2))}
	n := 1 + rng.IntN(10)
	for i := range n {
		s := mStage{name: fmt.Sprintf("s%d", i), prio: kernel.Priority(1 + rng.IntN(3))}
		for j := range i {
			if rng.IntN(3) == 0 {
				s.deps = append(s.deps, j)
			}
		}
		parts := 1
		if rng.IntN(3) == 0 {
			s.shards = 1 + rng.IntN(6)
			parts = s.shards
		}
		for range parts {
			f := 0
			if rng.IntN(6) == 0 {
				f = 1 + rng.IntN(3) // may exceed maxAttempts: the part fails for good
			}
			s.fails = append(s.fails, f)
			s.work = append(s.work, time.Duration(rng.IntN(5))*time.Millisecond)
		}
		m.stages = append(m.stages, s)
	}
	m.order = rng.Perm(n)
	return m
}

// expect returns, for each stage, whether it runs and whether it succeeds when
// failures only skip the stages that depend on them (ContinueIndependent).
func (m *mFlow) expect() (runs, ok []bool) {
	runs = make([]bool, len(m.stages))
	ok = make([]bool, len(m.stages))
	for i, s := range m.stages {
		runs[i] = true
		for _, d := range s.deps {
			runs[i] = runs[i] && ok[d]
		}
		ok[i] = runs[i]
		for _, f := range s.fails {
			ok[i] = ok[i] && f < m.maxAttempts
		}
	}
	return runs, ok
}

// recorder checks the runs of the stages' functions against the model.
type recorder struct {
	m        *mFlow
	mu       sync.Mutex
	okParts  []int            // parts of each stage that returned nil
	attempts map[[2]int][]int // (stage, part) -> attempts seen, in order
	inflight int
	started  chan struct{} // closed when the stage trigger starts
	proceed  chan struct{} // closed by the test after Cancel
	trigger  int
	once     sync.Once
	canceled bool
	allowed  map[string]bool // the stages running when Cancel returned
	bad      []string
}

func newRecorder(m *mFlow, trigger int) *recorder {
	return &recorder{m: m, okParts: make([]int, len(m.stages)), attempts: map[[2]int][]int{}, started: make(chan struct{}), proceed: make(chan struct{}), trigger: trigger}
}

func (r *recorder) badf(format string, args ...any) {
	r.bad = append(r.bad, fmt.Sprintf(format, args...))
}

// start records that a function of stage i (part p, -1 for a count) starts.
func (r *recorder) start(ctx context.Context, i, p int) {
	info, _ := kernel.TaskInfo(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight++
	s := r.m.stages[i]
	for _, d := range s.deps {
		if r.okParts[d] < max(1, r.m.stages[d].shards) {
			r.badf("stage %s started before its dependency %s succeeded", s.name, r.m.stages[d].name)
		}
	}
	if r.canceled && !r.allowed[s.name] {
		r.badf("stage %s started after Cancel", s.name)
	}
	if p >= 0 {
		key := [2]int{i, p}
		r.attempts[key] = append(r.attempts[key], info.Attempt)
	}
	if i == r.trigger {
		first := false
		r.once.Do(func() { close(r.started); first = true })
		if first {
			// Hold the trigger's first function, whatever its context says, until
			// the test cancelled the run, so that the run is live when Cancel comes.
			r.mu.Unlock()
			<-r.proceed
			r.mu.Lock()
		}
	}
}

// end records that the function returns err.
func (r *recorder) end(i, p int, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight--
	if err == nil && p >= 0 {
		r.okParts[i]++
	}
	return err
}

// work runs part p of stage i: a wait of its work time, then its planned failure.
func (r *recorder) work(ctx context.Context, i, p int) error {
	r.start(ctx, i, p)
	info, _ := kernel.TaskInfo(ctx)
	select {
	case <-time.After(r.m.stages[i].work[p]):
	case <-ctx.Done():
		return r.end(i, p, ctx.Err())
	}
	if info.Attempt <= r.m.stages[i].fails[p] {
		return r.end(i, p, fmt.Errorf("planned failure of %s part %d attempt %d", r.m.stages[i].name, p, info.Attempt))
	}
	return r.end(i, p, nil)
}

func (m *mFlow) build(r *recorder) *flow.Flow {
	f := flow.New("model")
	retry := &kernel.RetryPolicy{MaxAttempts: m.maxAttempts, Base: time.Millisecond, Jitter: kernel.JitterNone}
	for _, i := range m.order {
		s := m.stages[i]
		o := flow.StageOptions{Priority: s.prio, Retry: retry}
		for _, d := range s.deps {
			o.After = append(o.After, m.stages[d].name)
		}
		if s.shards == 0 {
			f.Stage(s.name, func(ctx context.Context, _ flow.Inputs) ([]byte, error) {
				return nil, r.work(ctx, i, 0)
			}, &o)
			continue
		}
		f.Sharded(s.name, func(ctx context.Context, _ flow.Inputs) (int, error) {
			r.start(ctx, i, -1)
			return s.shards, r.end(i, -1, nil)
		}, func(ctx context.Context, sh flow.Shard, _ flow.Inputs) error {
			if sh.Total != s.shards {
				r.mu.Lock()
				r.badf("stage %s: shard %d of %d, want of %d", s.name, sh.Index, sh.Total, s.shards)
				r.mu.Unlock()
			}
			return r.work(ctx, i, sh.Index)
		}, &flow.ShardOptions{StageOptions: o, MaxShards: 8})
	}
	return f
}

// TestModelRandomDAGs runs random flows on kernels with few slots and little
// room (so that stages wait for room), and checks them against the model: no
// stage starts before its dependencies succeeded, every part runs once per
// attempt, the failure policies hold, and Cancel ends every stage.
func TestModelRandomDAGs(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runModel(t, uint64(seed)) })
		})
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 29))
	m := genFlow(rng)
	cancelAt := -1
	if rng.IntN(3) == 0 {
		cancelAt = rng.IntN(len(m.stages))
	}
	c := 1 + rng.IntN(4)
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: 1 + rng.IntN(4),
		Capacity:       kernel.ByPriority[int]{High: c, Normal: c, Low: c},
		RetryBudget:    kernel.RetryBudget{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	r := newRecorder(&m, cancelAt)
	h, err := flow.Run(context.Background(), k, m.build(r), &flow.Options{OnFailure: m.policy})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	canceled := false
	defer func() {
		select {
		case <-r.proceed:
		default:
			close(r.proceed)
		}
	}()
	select {
	case <-h.Done():
	case <-r.started:
		h.Cancel()
		canceled = true
		r.mu.Lock()
		r.canceled = true
		r.allowed = map[string]bool{}
		for _, s := range h.Stages() {
			if s.State == flow.StageRunning {
				r.allowed[s.Name] = true
			}
		}
		r.mu.Unlock()
		close(r.proceed)
		<-h.Done()
	}
	checkModel(t, &m, r, h.Stages(), h.State(), h.Err(), canceled)
}

// checkModel checks the end of a run of m, recorded by r, whose stages ended as
// st and the run in state with err, against the model.
func checkModel(t *testing.T, m *mFlow, r *recorder, st []flow.StageStatus, state flow.State, runErr error, canceled bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		t.Error(b)
	}
	if r.inflight != 0 {
		t.Errorf("%d functions still running after the run ended", r.inflight)
	}
	runs, ok := m.expect()
	anyFail := false
	for i := range m.stages {
		anyFail = anyFail || (runs[i] && !ok[i])
	}
	allOK := true
	for _, s := range st {
		if !s.State.Terminal() {
			t.Errorf("stage %s ended the run %v", s.Name, s.State)
		}
		allOK = allOK && s.State == flow.StageSucceeded
	}
	// Each part's attempts are 1, 2, ... once each; a part of a succeeded stage
	// ran exactly as many as its planned failures needed.
	for key, as := range r.attempts {
		for n, a := range as {
			if a != n+1 {
				t.Errorf("stage %s part %d attempts %v, want 1, 2, ...", m.stages[key[0]].name, key[1], as)
				break
			}
		}
		if st[idxOf(st, m.stages[key[0]].name)].State == flow.StageSucceeded {
			if want := m.stages[key[0]].fails[key[1]] + 1; len(as) != want {
				t.Errorf("stage %s part %d ran %d attempts, want %d", m.stages[key[0]].name, key[1], len(as), want)
			}
		}
	}
	for i, s := range m.stages {
		got := st[idxOf(st, s.name)]
		if got.State == flow.StageSucceeded && !ok[i] {
			t.Errorf("stage %s succeeded, want it not to", s.name)
		}
		if got.State == flow.StageFailed && ok[i] {
			t.Errorf("stage %s failed, want it not to: %v", s.name, got.Err)
		}
		if got.State == flow.StageFailed && !errors.As(got.Err, new(*flow.StageError)) {
			t.Errorf("stage %s Err = %v, want a *StageError", s.name, got.Err)
		}
		if got.State == flow.StageSucceeded && s.shards > 0 && (got.Shards != s.shards || got.ShardsDone != s.shards) {
			t.Errorf("stage %s shards %d of %d, want %d of %d", s.name, got.ShardsDone, got.Shards, s.shards, s.shards)
		}
		if !canceled && m.policy == flow.ContinueIndependent {
			want := flow.StageSkipped
			switch {
			case ok[i]:
				want = flow.StageSucceeded
			case runs[i]:
				want = flow.StageFailed
			}
			if got.State != want {
				t.Errorf("stage %s state %v, want %v", s.name, got.State, want)
			}
		}
		if !canceled && m.policy == flow.FailFast && got.State == flow.StageSkipped {
			t.Errorf("stage %s skipped under FailFast", s.name)
		}
	}
	switch {
	case allOK:
		if state != flow.Succeeded || runErr != nil {
			t.Errorf("State() = %v, Err() = %v, want succeeded, nil", state, runErr)
		}
	case canceled:
		if state != flow.Canceled || !errors.Is(runErr, kernel.ErrCanceled) {
			t.Errorf("after Cancel: State() = %v, Err() = %v, want canceled, ErrCanceled", state, runErr)
		}
	default:
		if !anyFail || state != flow.Failed || !errors.As(runErr, new(*flow.StageError)) {
			t.Errorf("State() = %v, Err() = %v, want failed with a *StageError (model fails: %v)", state, runErr, anyFail)
		}
	}
	if !canceled && anyFail == allOK {
		t.Errorf("model fails: %v, but every stage succeeded: %v", anyFail, allOK)
	}
}

func idxOf(st []flow.StageStatus, name string) int {
	return slices.IndexFunc(st, func(s flow.StageStatus) bool { return s.Name == name })
}
