package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/axsched/ax/kernel"
)

// Run validates f and starts a run of it on k: the stages without dependencies
// are submitted at once, each other stage when the last stage it depends on
// succeeds. Run does not block: a stage that finds the kernel full waits for
// room on the run's one submitting goroutine, which exists only while such
// stages wait. It returns a [*DefError] (joined, one per problem) for a bad
// definition, a *kernel.ConfigError naming a bad field of opts, and
// kernel.ErrClosed after k began to stop; then nothing was submitted. Once it
// returned a Handle, the run ends in exactly one terminal state ([Handle.Wait]).
//
// The run does not inherit ctx's cancellation or deadline (cancel it with
// [Handle.Cancel]); its stages' contexts carry ctx's values. A nil ctx passes
// none. The run ends with the kernel: a stage that would start after
// Shutdown or Close began fails with kernel.ErrClosed, Close ends the tasks in
// the kernel, and the run ends with them.
func Run(ctx context.Context, k *kernel.Kernel, f *Flow, opts *Options) (*Handle, error) {
	if k == nil {
		return nil, errors.New("flow: Run: nil kernel")
	}
	if f == nil {
		return nil, errors.New("flow: Run: nil flow")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.OnFailure > ContinueIndependent {
		return nil, &kernel.ConfigError{Field: "flow.Options.OnFailure", Value: o.OnFailure, Reason: "must be FailFast or ContinueIndependent"}
	}
	next, err := f.graph()
	if err != nil {
		return nil, err
	}
	select {
	case <-k.Stopping():
		return nil, fmt.Errorf("flow %q: %w", f.name, kernel.ErrClosed)
	default:
	}
	if ctx == context.Background() || ctx == context.TODO() {
		ctx = nil // no values to lend
	}
	r := newRun(ctx, k, f, next, o.OnFailure)
	r.mu.Lock()
	for i := range r.st {
		if r.st[i].waiting == 0 && r.st[i].state == StageWaiting && !r.stop {
			r.start(i)
		}
	}
	r.settle()
	r.mu.Unlock()
	return &Handle{r: r}, nil
}

// RunSharded runs a sharded job on its own: a flow named name of one sharded
// stage of the same name ([Flow.Sharded]); opts.After must be empty.
func RunSharded(ctx context.Context, k *kernel.Kernel, name string, count CountFunc, run ShardFunc, opts *ShardOptions) (*Handle, error) {
	return Run(ctx, k, New(name).Sharded(name, count, run, opts), nil)
}

// RunWait runs f as [Run] does and blocks until the run ended, returning
// [Handle.Err]. When ctx ends first, it cancels the run and still waits for its
// end. It suits the function of a task or of a schedule's occurrence that
// should start a flow and end with it; that task holds a slot of the kernel
// while the flow runs, so give the kernel more slots than such tasks.
func RunWait(ctx context.Context, k *kernel.Kernel, f *Flow, opts *Options) error {
	h, err := Run(ctx, k, f, opts)
	if err != nil {
		return err
	}
	var stop <-chan struct{}
	if ctx != nil {
		stop = ctx.Done()
	}
	select {
	case <-h.Done():
	case <-stop:
		h.Cancel()
		<-h.Done()
	}
	return h.Err()
}

// run is one run of a flow: the coordinator. It has no goroutine of its own:
// the kernel's OnEnd calls of the stages' tasks advance it (Task.OnEnd), and a
// goroutine (pump) exists only while tasks wait for room in the kernel.
type run struct {
	// Immutable.
	k      *kernel.Kernel
	f      *Flow // a copy of the definition as Run saw it
	index  map[string]int
	next   [][]int // the stages that depend on each stage
	prev   [][]int // the stages each stage depends on
	policy Policy
	values context.Context
	res    results
	pctx   context.Context // the pump's submissions; cancelled when the run halts
	pstop  context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	st       []stageRun // guarded by mu
	live     int        // guarded by mu: tasks submitted or waiting to be, not ended
	queue    []job      // guarded by mu: tasks waiting for room, in order (pump)
	pumping  bool       // guarded by mu: the pump goroutine runs
	stop     bool       // guarded by mu: start nothing more (cancelled, or FailFast after a failure)
	canceled bool       // guarded by mu: Handle.Cancel was called while Running
	errs     []error    // guarded by mu: the failed stages' errors, in order
	state    State      // guarded by mu
}

// stageRun is the progress of one stage. Guarded by run.mu.
type stageRun struct {
	state    StageState
	waiting  int // dependencies not yet succeeded
	err      error
	inKernel int              // its tasks submitted or waiting to be, not ended
	h        *kernel.Handle   // the task of a plain stage, or the count task
	hs       []*kernel.Handle // a sharded stage's shards, once counted
	counted  int              // the count its CountFunc returned (countAt: the attempt)
	countAt  int
	total    int // shards to run
	nextIdx  int // the next shard to submit
	shardsOK int // shards succeeded
}

// job is one task of a stage: its run or count (shard -1), or a shard.
type job struct{ stage, shard int }

func newRun(ctx context.Context, k *kernel.Kernel, f *Flow, next [][]int, p Policy) *run {
	n := len(f.stages)
	r := &run{
		k:      k,
		f:      &Flow{name: f.name, stages: append([]stageDef(nil), f.stages...)},
		index:  make(map[string]int, n),
		next:   next,
		prev:   make([][]int, n),
		policy: p,
		values: ctx,
		res:    newMemResults(n),
		done:   make(chan struct{}),
		st:     make([]stageRun, n),
		state:  Running,
	}
	r.pctx, r.pstop = context.WithCancel(context.Background())
	for i, d := range r.f.stages {
		r.index[d.name] = i
	}
	for s, ns := range next {
		for _, i := range ns {
			r.prev[i] = append(r.prev[i], s)
		}
	}
	for i := range r.st {
		r.st[i] = stageRun{state: StageWaiting, waiting: len(r.prev[i])}
	}
	return r
}

// upstream reports whether stage s depends on stage j, directly or not.
func (r *run) upstream(s, j int) bool {
	if slices.Contains(r.prev[s], j) {
		return true
	}
	seen := make([]bool, len(r.prev))
	todo := append([]int(nil), r.prev[s]...)
	for len(todo) > 0 {
		v := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if v == j {
			return true
		}
		if !seen[v] {
			seen[v] = true
			todo = append(todo, r.prev[v]...)
		}
	}
	return false
}

// start moves stage i to Running and submits its task. Under mu.
func (r *run) start(i int) {
	r.st[i].state = StageRunning
	r.submit(job{i, -1})
}

// submit hands j's task to the kernel without blocking, or queues it for the
// pump while the kernel is full. Under mu.
func (r *run) submit(j job) {
	st := &r.st[j.stage]
	st.inKernel++
	r.live++
	if r.pumping {
		r.queue = append(r.queue, j)
		return
	}
	h, err := r.k.TrySubmit(r.task(j))
	switch {
	case err == nil:
		r.setHandle(j, h)
	case errors.Is(err, kernel.ErrQueueFull) || errors.Is(err, kernel.ErrDegraded):
		r.queue = append(r.queue, j)
		r.pumping = true
		go r.pump()
	default:
		st.inKernel--
		r.live--
		r.fail(j, kernel.Failed, err)
	}
}

// pump submits the queued tasks in order, each waiting for room, until none is
// left or the run halts.
func (r *run) pump() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.queue) > 0 {
		j := r.queue[0]
		r.queue = r.queue[1:]
		if r.stop {
			r.unsubmitted(j)
			continue
		}
		t := r.task(j)
		r.mu.Unlock()
		h, err := r.k.Submit(r.pctx, t)
		r.mu.Lock()
		switch {
		case err == nil:
			r.setHandle(j, h)
			if r.stop {
				h.Cancel()
			}
		case r.stop:
			r.unsubmitted(j)
		default:
			r.unsubmitted(j)
			r.fail(j, kernel.Failed, err)
		}
	}
	r.queue = nil
	r.pumping = false
	r.settle()
}

// unsubmitted takes back the count of a task that never reached the kernel.
// Under mu.
func (r *run) unsubmitted(j job) {
	r.st[j.stage].inKernel--
	r.live--
}

// setHandle records the handle of j's task, to cancel it. Under mu.
func (r *run) setHandle(j job, h *kernel.Handle) {
	st := &r.st[j.stage]
	if j.shard < 0 {
		st.h = h
	} else {
		st.hs[j.shard] = h
	}
}

// task builds the kernel task of j. Under mu.
func (r *run) task(j job) kernel.Task {
	d := &r.f.stages[j.stage]
	id := r.f.name + "/" + d.name
	if j.shard >= 0 {
		id += "/" + strconv.Itoa(j.shard)
	}
	t := kernel.Task{
		ID:       id,
		Priority: d.opts.Priority,
		Timeout:  d.opts.Timeout,
		Group:    d.opts.Group,
		Key:      d.opts.Key,
		Retry:    d.opts.Retry,
		Values:   r.values,
		OnEnd:    func(s kernel.State, err error) { r.ended(j, s, err) },
	}
	in := Inputs{r: r, stage: j.stage}
	switch {
	case d.run != nil:
		t.Run = func(ctx context.Context) error { return r.runStage(ctx, d, in) }
	case j.shard < 0:
		t.Run = func(ctx context.Context) error { return r.count(ctx, d, in) }
	default:
		s := Shard{Index: j.shard, Total: r.st[j.stage].total}
		t.Run = func(ctx context.Context) error { return d.shard(ctx, s, in) }
	}
	return t
}

// runStage runs a plain stage's function and keeps its result.
func (r *run) runStage(ctx context.Context, d *stageDef, in Inputs) error {
	b, err := d.run(ctx, in)
	if err != nil {
		return err
	}
	if len(b) > resultMax {
		return kernel.Permanent(fmt.Errorf("flow: result of %d bytes: at most %d", len(b), resultMax))
	}
	info, _ := kernel.TaskInfo(ctx)
	r.res.put(in.stage, info.Attempt, b)
	return nil
}

// count runs a sharded stage's CountFunc and keeps the count it returned. A
// panic or a count out of range fails the stage without a retry.
func (r *run) count(ctx context.Context, d *stageDef, in Inputs) (err error) {
	var n int
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = kernel.Permanent(fmt.Errorf("%w: CountFunc panicked: %v", ErrShardCount, v))
			}
		}()
		n, err = d.count(ctx, in)
	}()
	if err != nil {
		return err
	}
	if n < 1 || n > d.max {
		return kernel.Permanent(fmt.Errorf("%w: CountFunc returned %d: must be in [1, %d] (ShardOptions.MaxShards)", ErrShardCount, n, d.max))
	}
	info, _ := kernel.TaskInfo(ctx)
	r.mu.Lock()
	if st := &r.st[in.stage]; info.Attempt >= st.countAt {
		st.counted, st.countAt = n, info.Attempt
	}
	r.mu.Unlock()
	return nil
}

// ended is the OnEnd of every task of the run: it advances the run.
func (r *run) ended(j job, s kernel.State, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live--
	st := &r.st[j.stage]
	st.inKernel--
	d := &r.f.stages[j.stage]
	switch {
	case s != kernel.Succeeded:
		r.fail(j, s, err)
	case d.run != nil:
		r.succeed(j.stage)
	case j.shard < 0:
		if st.state == StageRunning && !r.stop {
			st.total = st.counted
			st.hs = make([]*kernel.Handle, st.total)
			r.fill(j.stage)
		}
	default:
		st.shardsOK++
		if st.shardsOK == st.total {
			r.succeed(j.stage)
		} else {
			r.fill(j.stage)
		}
	}
	r.settle()
}

// fill submits the next shards of stage i, within its MaxParallel. Under mu.
func (r *run) fill(i int) {
	st := &r.st[i]
	par := r.f.stages[i].par
	for st.state == StageRunning && !r.stop && st.nextIdx < st.total && (par == 0 || st.inKernel < par) {
		n := st.nextIdx
		st.nextIdx++
		r.submit(job{i, n})
	}
}

// succeed marks stage i Succeeded and starts the stages it was the last
// dependency of. Under mu.
func (r *run) succeed(i int) {
	if r.st[i].state != StageRunning {
		return
	}
	r.st[i].state = StageSucceeded
	for _, n := range r.next[i] {
		sn := &r.st[n]
		sn.waiting--
		if sn.waiting == 0 && sn.state == StageWaiting && !r.stop {
			r.start(n)
		}
	}
}

// fail records that a task of j's stage ended in state s with err (or that the
// kernel refused it), and applies the failure policy. Under mu.
func (r *run) fail(j job, s kernel.State, err error) {
	st := &r.st[j.stage]
	if st.state != StageRunning {
		return
	}
	r.cancelStage(j.stage)
	if r.stop && s == kernel.Canceled {
		st.state = StageCanceled
		return
	}
	st.state = StageFailed
	st.err = &StageError{Flow: r.f.name, Stage: r.f.stages[j.stage].name, Shard: j.shard, Err: err}
	r.errs = append(r.errs, st.err)
	if r.policy == FailFast {
		r.halt()
		return
	}
	r.skip(j.stage)
}

// skip marks the stages that depend on stage i, directly or not, Skipped.
// Under mu.
func (r *run) skip(i int) {
	todo := append([]int(nil), r.next[i]...)
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if r.st[n].state == StageWaiting {
			r.st[n].state = StageSkipped
			todo = append(todo, r.next[n]...)
		}
	}
}

// halt stops the run from starting anything more and cancels what is in the
// kernel. Under mu.
func (r *run) halt() {
	if r.stop {
		return
	}
	r.stop = true
	r.pstop()
	for i := range r.st {
		switch r.st[i].state {
		case StageWaiting:
			r.st[i].state = StageCanceled
		case StageRunning:
			r.cancelStage(i)
		}
	}
	for _, j := range r.queue {
		r.unsubmitted(j)
	}
	r.queue = r.queue[:0]
}

// cancelStage cancels the tasks of stage i in the kernel. Under mu.
func (r *run) cancelStage(i int) {
	st := &r.st[i]
	if st.h != nil {
		st.h.Cancel()
	}
	for _, h := range st.hs {
		if h != nil {
			h.Cancel()
		}
	}
}

// settle ends the stages that can no longer go on and, once nothing of the run
// is left in the kernel, the run. Under mu.
func (r *run) settle() {
	if r.state.Terminal() {
		return
	}
	if r.stop {
		for i := range r.st {
			if st := &r.st[i]; st.state == StageRunning && st.inKernel == 0 {
				st.state = StageCanceled
			}
		}
	}
	if r.live > 0 || r.pumping {
		return
	}
	all := true
	for i := range r.st {
		switch r.st[i].state {
		case StageWaiting, StageRunning:
			return
		case StageSucceeded:
		default:
			all = false
		}
	}
	switch {
	case all:
		r.state = Succeeded
	case r.canceled:
		r.state = Canceled
	default:
		r.state = Failed
	}
	r.pstop()
	close(r.done)
}
