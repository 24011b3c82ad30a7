package fuzz

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/goleak"

	"github.com/axsched/ax/kernel"
)

// TestKernelModel and FuzzKernel check DESIGN.md §15 on random cases decoded by
// kernel_gen_test.go: a config that Validate accepts, the operations of a few
// goroutines, then Shutdown and Close. Once the kernel stopped they check that
// nothing panicked or hung, that every accepted task is terminal and counted
// once, that refused tasks never ran, that Stats, the Prometheus text, the
// handles and the events agree, and that the goroutines went back to where they
// were. A panic on a kernel goroutine ends the test binary: the last
// "kmodel: case seed=N" line on stderr names the case.

var (
	kmodelSeed  = flag.Uint64("kmodel.seed", 1, "TestKernelModel: the seed of its first case")
	kmodelN     = flag.Int("kmodel.n", 0, "TestKernelModel: the number of cases (0: 120, 25 with -short)")
	kmodelAvoid = flag.String("kmodel.avoid", "", "TestKernelModel, FuzzKernel: comma-separated generator features and "+
		"checks to leave out: retry, hugebackoff, hugewindow, evictlow, eventpanic, blockcb, hugedelay, hugeconc, "+
		"batchrace, goexit, hugequota, mapstray, batchcancel, updshrink, gauges, waitctx")
)

const (
	// hangTimeout bounds every wait of the harness: past it, the case fails with a
	// goroutine dump instead of hanging the test.
	hangTimeout = 20 * time.Second
	// stallSlack is how much longer than its context (Shutdown) or ZombieGrace
	// (Close) a stop may take before the case calls it stuck.
	stallSlack = 3 * time.Second
	// caseBytes is how many bytes TestKernelModel draws for a case.
	caseBytes = 4096
)

var errFail = errors.New("fuzz: task failed")

// monoEpoch is the origin of the monotonic times the task functions record.
var monoEpoch = time.Now()

// kernelModelHung is set when a case hung: later cases would run beside its
// goroutines, so TestKernelModel stops.
var kernelModelHung atomic.Bool

// seedBytes returns the bytes of TestKernelModel's case seed.
func seedBytes(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, caseBytes)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func avoidFlag(tb testing.TB) feature {
	f, err := parseFeatures(*kmodelAvoid)
	if err != nil {
		tb.Fatalf("-kmodel.avoid: %v", err)
	}
	return f
}

// TestKernelModel runs -kmodel.n cases from the seeds -kmodel.seed, -kmodel.seed+1,
// ...; a failure prints the command that runs its case again (the interleaving
// is the scheduler's, so a replay may need a few runs).
func TestKernelModel(t *testing.T) {
	avoid := avoidFlag(t)
	n := *kmodelN
	if n == 0 {
		n = 120
		if testing.Short() {
			n = 25
		}
	}
	for i := range n {
		seed := *kmodelSeed + uint64(i)
		if !testing.Verbose() {
			// A panic on a kernel goroutine ends the process before the test can say
			// which case it ran; go test prints this only when the package fails.
			fmt.Fprintf(os.Stderr, "kmodel: case seed=%d\n", seed)
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			replay := fmt.Sprintf("replay: go test -race -run TestKernelModel ./fuzz/ -kmodel.seed=%d -kmodel.n=1", seed)
			if *kmodelAvoid != "" {
				replay += " -kmodel.avoid=" + *kmodelAvoid
			}
			runKernelCase(t, seedBytes(seed), avoid, replay)
		})
		if kernelModelHung.Load() {
			t.Fatalf("a case hung: the remaining cases are skipped")
		}
	}
}

// kernelSeeds are the table cases FuzzKernel starts from.
var kernelSeeds = []struct {
	name string
	data []byte
}{
	{"empty: the zero config, no operation, Close", nil},
	{"all 0xff: extreme values everywhere", bytes.Repeat([]byte{0xff}, 512)},
	{"short: one worker, a few operations", seedBytes(1001)[:200]},
	{"seed 1002", seedBytes(1002)},
	{"seed 1003", seedBytes(1003)},
	{"seed 1004", seedBytes(1004)},
}

// FuzzKernel decodes the fuzzer's bytes into a case as TestKernelModel does. A case
// takes tens of milliseconds, so minimizing an input takes long: run it with, for
// example,
//
//	go test -run '^$' -fuzz '^FuzzKernel$' -fuzztime 5m -fuzzminimizetime 10s ./fuzz/
func FuzzKernel(f *testing.F) {
	for _, s := range kernelSeeds {
		f.Add(s.data)
	}
	avoid := avoidFlag(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if kernelModelHung.Load() {
			t.Fatal("an earlier input hung: this process cannot judge more inputs")
		}
		runKernelCase(t, data, avoid, "")
	})
}

// recKind is how a task was submitted.
type recKind uint8

const (
	recHandle recKind = iota // TrySubmit, Submit
	recFF                    // TryGo, Go
	recBatch                 // a Batch or Map member
)

// taskRec follows one task of a case: what it was, what its submission returned
// and what its function did.
type taskRec struct {
	spec     *taskSpec
	body     bodySpec
	kind     recKind
	id       string          // "t<index>"; the task's ID when spec.ownID
	prio     kernel.Priority // normalized
	noTime   bool            // its attempts have no timeout (NoTimeout)
	hugeTime bool            // its own timeout is an hour or more (and not NoTimeout)
	maxTries int             // the most attempts its own policy allows; 0: the config's

	// Set by the submitting goroutine; read after it is done.
	op        string
	submitAt  time.Time
	notBefore time.Duration // monoNow() before which it must not start (a short Delay or At); 0: none
	h         *kernel.Handle
	err       error
	accepted  bool // known accepted
	unknown   bool // a batch member that may or may not have been submitted

	// Written by the function.
	runs       atomic.Int32
	ends       atomic.Int32
	firstStart atomic.Int64 // monoNow() + 1 of its first run; 0: never ran
	okRet      atomic.Bool  // an attempt returned nil
	panics     atomic.Int32 // attempts that panicked or called Goexit
	final      atomic.Int32 // the first attempt of an instant kind (bodyKind.instant)
	onTimeouts atomic.Int32
}

func (rec *taskRec) name() string {
	if rec.spec != nil {
		return fmt.Sprintf("%s %s", rec.op, rec.spec)
	}
	return fmt.Sprintf("%s t%s{%v %v}", rec.op, strings.TrimPrefix(rec.id, "t"), rec.prio, rec.body)
}

// eventLog is Config.OnEvent.
type eventLog struct {
	c *kcase
	r *runner

	mu   sync.Mutex
	byID map[string][]kernel.Event
	n    int
}

func (l *eventLog) onEvent(ev kernel.Event) {
	l.mu.Lock()
	l.byID[ev.TaskID] = append(l.byID[ev.TaskID], ev)
	l.n++
	n := l.n
	l.mu.Unlock()
	switch l.c.events {
	case evPanic:
		if n%l.c.panicEvery == 0 {
			panic("fuzz: OnEvent panics")
		}
	case evSlow:
		if n <= l.c.slowFirst {
			tm := time.NewTimer(l.c.slowD)
			<-tm.C
		}
	case evBlock:
		if n == l.c.blockAt {
			select {
			case <-l.r.release:
			case <-l.r.abort:
			}
		}
	}
}

// runner runs one case.
type runner struct {
	t      testing.TB
	c      *kcase
	avoid  feature
	k      *kernel.Kernel
	replay string

	mu      sync.Mutex
	errs    []string
	recs    []*taskRec
	handles []*taskRec

	release, abort         chan struct{}
	releaseOnce, abortOnce sync.Once
	hung                   atomic.Bool
	stopping               atomic.Bool // the first Shutdown or Close is about to begin
	closeCalled            atomic.Bool // Close began: a Shutdown waiting then returns ErrClosed
	shutdownCalled         atomic.Bool
	active                 atomic.Int64 // task functions running

	// The most of each over the configs applied (Update included), resolved.
	maxConc, maxZombies, maxGrace atomic.Int64

	ev      *eventLog
	waiters sync.WaitGroup // Batch and Map calls
}

func (r *runner) errorf(format string, args ...any) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *runner) releaseAll() { r.releaseOnce.Do(func() { close(r.release) }) }

func (r *runner) abortAll() {
	r.releaseAll()
	r.abortOnce.Do(func() { close(r.abort) })
}

func goroutineDump() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return b.String()
}

// hang records that what did not finish within hangTimeout, with every goroutine's
// stack, and releases whatever the case's functions wait for.
func (r *runner) hang(what string) {
	if r.hung.Swap(true) {
		return
	}
	kernelModelHung.Store(true)
	r.errorf("hang: %s did not finish within %v; goroutines:\n%s", what, hangTimeout, goroutineDump())
	r.abortAll()
	if k := r.k; k != nil {
		go func() { _ = k.Close() }() // best effort: the case failed already
	}
}

// waitChan waits for ch to close, at most hangTimeout.
func (r *runner) waitChan(what string, ch <-chan struct{}) bool {
	if r.hung.Load() {
		return false
	}
	tm := time.NewTimer(hangTimeout)
	defer tm.Stop()
	select {
	case <-ch:
		return true
	case <-tm.C:
		r.hang(what)
		return false
	}
}

// waitCond polls cond until it holds, at most hangTimeout.
func (r *runner) waitCond(what string, cond func() bool) bool {
	if r.hung.Load() {
		return false
	}
	deadline := time.Now().Add(hangTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			r.hang(what)
			return false
		}
		tm := time.NewTimer(200 * time.Microsecond)
		<-tm.C
	}
	return true
}

func wgDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

// call runs a stop method, which must return within limit: past it the case
// fails, releases the functions and callbacks that wait for the case, and waits
// up to hangTimeout more.
func (r *runner) call(name string, limit time.Duration, f func()) {
	if r.hung.Load() {
		return
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				r.errorf("%s panicked: %v\n%s", name, v, debug.Stack())
			}
		}()
		f()
	}()
	tm := time.NewTimer(limit)
	defer tm.Stop()
	select {
	case <-done:
		return
	case <-tm.C:
	}
	r.errorf("%s has not returned %v after it was called (limit %v); goroutines:\n%s", name, time.Since(start), limit, goroutineDump())
	r.releaseAll()
	if r.waitChan(name+" (after the case released its functions and callbacks)", done) {
		r.errorf("%s returned %v after it was called, once the case released its functions and callbacks", name, time.Since(start))
	}
}

// noteConfig raises the maxima the mid-run checks allow by c's resolved values.
func (r *runner) noteConfig(c *kernel.Config) {
	raise := func(a *atomic.Int64, v int64) {
		for {
			cur := a.Load()
			if v <= cur || a.CompareAndSwap(cur, v) {
				return
			}
		}
	}
	conc := int64(c.MaxConcurrency)
	if conc == 0 {
		conc = kernelMaxConcurrencyDefault
	}
	raise(&r.maxConc, conc)
	z := int64(c.MaxZombies)
	switch z {
	case 0:
		z = 100
	case -1:
		z = 0
	}
	raise(&r.maxZombies, z)
	g := c.ZombieGrace
	if g == 0 {
		g = 3 * time.Second
	}
	raise(&r.maxGrace, int64(g))
}

// runKernelCase decodes data and runs the case, failing tb with everything it found.
func runKernelCase(tb testing.TB, data []byte, avoid feature, replay string) {
	c := decodeCase(data, avoid)
	r := &runner{t: tb, c: c, avoid: avoid, replay: replay, release: make(chan struct{}), abort: make(chan struct{})}
	baseline := runtime.NumGoroutine()
	before := goleak.IgnoreCurrent()
	defer r.report()

	cfg := c.cfg
	if c.events != evNone {
		r.ev = &eventLog{c: c, r: r, byID: map[string][]kernel.Event{}}
		cfg.OnEvent = r.ev.onEvent
	}
	if c.logger {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.ownMetrics {
		cfg.Metrics = metrics.NewSet()
	}
	r.refuseHugeQuotas(&cfg)
	if err := cfg.Validate(); err != nil {
		r.errorf("harness: the generated config is invalid: Validate() = %v", err)
		return
	}
	r.noteConfig(&cfg)
	var k *kernel.Kernel
	var err error
	r.call("New()", hangTimeout, func() { k, err = kernel.New(cfg) })
	switch {
	case r.hung.Load():
		return
	case err != nil:
		r.errorf("New() = %v, want nil", err)
		return
	case k == nil:
		return // it panicked
	}
	r.k = k

	trigger := make(chan struct{})
	var triggerOnce sync.Once
	stopNow := func() { triggerOnce.Do(func() { close(trigger) }) }
	var subs sync.WaitGroup
	for w, ops := range c.workers {
		subs.Add(1)
		go func() {
			defer subs.Done()
			for i, o := range ops {
				if w == 0 && c.stop.when == 1 && i == c.stop.at {
					stopNow()
				}
				r.do(w, i, o)
			}
			if w == 0 {
				stopNow()
			}
		}()
	}
	subsDone := wgDone(&subs)
	switch c.stop.when {
	case 0:
		r.waitChan("the submitting goroutines", subsDone)
	case 1:
		r.waitChan("worker 0 to reach its stop", trigger)
	}
	r.stopKernel()
	// The submitters are done before r.waiters is waited for: they call its Add.
	if !r.waitChan("the submitting goroutines", subsDone) ||
		!r.waitChan("the Batch.Wait and Map calls", wgDone(&r.waiters)) {
		return
	}
	r.releaseAll()
	if !r.waitCond("the task functions to return", func() bool { return r.active.Load() == 0 }) ||
		!r.waitCond(fmt.Sprintf("the goroutines to go back to %d", baseline), func() bool { return runtime.NumGoroutine() <= baseline }) {
		return
	}
	// The count may hide a goroutine of the case behind one that ended meanwhile.
	if err := goleak.Find(before); err != nil {
		r.errorf("goroutines of the case still run after Close: %v", err)
	}
	r.checkFinal(avoid)
}

// report fails the test with what the case found.
func (r *runner) report() {
	r.mu.Lock()
	errs := r.errs
	r.mu.Unlock()
	if len(errs) == 0 {
		return
	}
	const most = 25
	var b strings.Builder
	if r.replay != "" {
		b.WriteString(r.replay + "\n")
	}
	fmt.Fprintf(&b, "%d failures", len(errs))
	if len(errs) > most {
		fmt.Fprintf(&b, " (the first %d)", most)
		errs = errs[:most]
	}
	b.WriteString(":\n")
	for _, e := range errs {
		b.WriteString("- " + e + "\n")
	}
	r.t.Logf("case:\n%s", r.c)
	if r.hung.Load() {
		r.t.Fatalf("%s", b.String())
	}
	r.t.Errorf("%s", b.String())
}

// do runs one operation; a panic out of the kernel's API fails the case.
func (r *runner) do(w, i int, o kop) {
	defer func() {
		if v := recover(); v != nil {
			r.errorf("worker %d op %d %v panicked: %v\n%s", w, i, o, v, debug.Stack())
		}
	}()
	switch o.kind {
	case opTrySubmit, opSubmit, opTryGo, opGo, opInvalid:
		r.submit(o)
	case opBurst:
		kind := opTryGo
		if o.ctxD != 0 {
			kind = opTrySubmit
		}
		for _, t := range o.burst {
			r.submit(kop{kind: kind, task: t})
		}
	case opCancel:
		if rec := r.pickHandle(o.idx); rec != nil {
			rec.h.Cancel()
		}
	case opWait:
		r.wait(o)
	case opUpdate:
		r.update(o.cfg)
	case opBatch, opMap:
		r.waiters.Add(1)
		go func() {
			defer r.waiters.Done()
			defer func() {
				if v := recover(); v != nil {
					r.errorf("worker %d op %d %v panicked: %v\n%s", w, i, o, v, debug.Stack())
				}
			}()
			if o.kind == opBatch {
				r.batch(o.batch)
			} else {
				r.mapCall(o.batch)
			}
		}()
	case opObserve:
		r.observe()
	}
}

func (r *runner) pickHandle(idx int) *taskRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.handles) == 0 {
		return nil
	}
	return r.handles[idx%len(r.handles)]
}

// ctxFor returns a context that ends after d, or one already done for d == 0.
func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	if d == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	return context.WithTimeout(context.Background(), d)
}

func normalize(p kernel.Priority) kernel.Priority {
	if p == kernel.PriorityDefault {
		return kernel.Normal
	}
	return p
}

func (r *runner) newRec(spec *taskSpec, kind recKind, op string) *taskRec {
	rec := &taskRec{spec: spec, body: spec.body, kind: kind, id: fmt.Sprintf("t%d", spec.id), prio: normalize(spec.prio), op: op}
	rec.noTime = spec.timeout == kernel.NoTimeout
	rec.hugeTime = spec.timeout >= time.Hour && spec.timeout != kernel.NoTimeout
	if spec.retry != nil {
		rec.maxTries = spec.retry.MaxAttempts
		if rec.maxTries == 0 {
			rec.maxTries = kernelRetryMaxAttemptsDefault
		}
	}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return rec
}

// task builds the kernel.Task of rec, due relative to now.
func (r *runner) task(rec *taskRec) kernel.Task {
	s := rec.spec
	t := kernel.Task{Priority: s.prio, Delay: s.delay, Timeout: s.timeout}
	if s.ownID {
		t.ID = rec.id
	}
	if s.retry != nil {
		p := *s.retry
		t.Retry = &p
	}
	now := time.Now()
	rec.submitAt = now
	switch s.at {
	case atPast:
		t.At = now.Add(-time.Second)
	case atEpoch:
		t.At = time.Unix(1, 0)
	case atSoon:
		t.At = now.Add(s.atOffset)
		rec.notBefore = t.At.Sub(monoEpoch)
	case atHour:
		t.At = now.Add(time.Hour)
	case atFar:
		t.At = time.Unix(1<<40, 0)
	}
	if s.delay > 0 && s.delay < time.Hour {
		rec.notBefore = now.Add(s.delay).Sub(monoEpoch)
	}
	t.Run = func(ctx context.Context) error { return r.run(ctx, rec) }
	switch s.onTimeout {
	case 1, 2, 3, 4:
		mode := s.onTimeout
		t.OnTimeout = func(attempt int) {
			rec.onTimeouts.Add(1)
			if attempt < 1 || (rec.maxTries > 0 && attempt > rec.maxTries) {
				r.errorf("%s: OnTimeout(%d), want an attempt in [1, %d]", rec.name(), attempt, rec.maxTries)
			}
			switch mode {
			case 2:
				panic("fuzz: OnTimeout panics")
			case 3:
				tm := time.NewTimer(2 * time.Millisecond)
				<-tm.C
			case 4:
				select {
				case <-r.release:
				case <-r.abort:
				}
			}
		}
	}
	switch s.invalid {
	case 1:
		t.Run = nil
	case 2:
		t.Delay = -time.Nanosecond
	case 3:
		t.Priority = kernel.Low + 1 + kernel.Priority(s.id%200)
	case 4:
		t.Delay, t.At = time.Millisecond, now
	case 5:
		t.Timeout = -1
	case 6:
		t.Retry = &kernel.RetryPolicy{Multiplier: 0.5}
	}
	return t
}

// run is every task function of a case.
func (r *runner) run(ctx context.Context, rec *taskRec) error {
	now := time.Now()
	n := int(rec.runs.Add(1))
	rec.firstStart.CompareAndSwap(0, int64(now.Sub(monoEpoch))+1)
	r.active.Add(1)
	defer func() {
		rec.ends.Add(1)
		r.active.Add(-1)
	}()
	if ctx == nil {
		r.errorf("%s: attempt %d: Run got a nil context", rec.name(), n)
		return errFail
	}
	dl, hasDL := ctx.Deadline()
	switch {
	case rec.hugeTime && (!hasDL || dl.Before(now.Add(30*time.Minute))):
		r.errorf("%s: attempt %d: ctx.Deadline() = %v, %t, want about %v after its start %v", rec.name(), n, dl, hasDL, rec.spec.timeout, now)
	case rec.noTime && rec.kind != recBatch && hasDL:
		r.errorf("%s: attempt %d: ctx.Deadline() = %v, true, want none (NoTimeout)", rec.name(), n, dl)
	}
	k := rec.body.kind(n)
	if k.instant() {
		rec.final.CompareAndSwap(0, int32(n))
	}
	d := rec.body.d
	switch k {
	case bodyOK:
		rec.okRet.Store(true)
		return nil
	case bodyFail:
		return errFail
	case bodyPermanent:
		return kernel.Permanent(errFail)
	case bodyPanic:
		rec.panics.Add(1)
		switch rec.body.panicVal {
		case 0:
			panic("fuzz: task panics")
		case 1:
			panic(errFail)
		default:
			panic(nil)
		}
	case bodyGoexit:
		rec.panics.Add(1)
		runtime.Goexit()
	case bodyLateGoexit:
		rec.panics.Add(1)
		tm := time.NewTimer(d)
		<-tm.C
		runtime.Goexit()
	case bodyWaitOK, bodyWaitFail:
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errFail, ctx.Err())
		case <-tm.C:
		}
		if k == bodyWaitOK {
			rec.okRet.Store(true)
			return nil
		}
		return errFail
	case bodyCtx:
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errFail, ctx.Err())
		case <-r.abort:
			return errFail
		}
	case bodyTimer:
		tm := time.NewTimer(d)
		<-tm.C
	case bodyRelease:
		select {
		case <-r.release:
		case <-r.abort:
		}
	}
	rec.okRet.Store(true)
	return nil
}

func (r *runner) submit(o kop) {
	kind := recHandle
	if o.kind == opTryGo || o.kind == opGo || (o.kind == opInvalid && o.task.id%2 == 1) {
		kind = recFF
	}
	wait := o.kind == opSubmit || o.kind == opGo || (o.kind == opInvalid && o.task.id%4 >= 2)
	name := map[[2]bool]string{{false, false}: "TrySubmit", {false, true}: "Submit", {true, false}: "TryGo", {true, true}: "Go"}[[2]bool{kind == recFF, wait}]
	rec := r.newRec(o.task, kind, name)
	t := r.task(rec)
	ctx, cancel := ctxFor(o.ctxD)
	defer cancel()
	var h *kernel.Handle
	var err error
	switch {
	case kind == recHandle && !wait:
		h, err = r.k.TrySubmit(t)
	case kind == recHandle:
		h, err = r.k.Submit(ctx, t)
	case !wait:
		err = r.k.TryGo(t)
	default:
		err = r.k.Go(ctx, t)
	}
	rec.err = err
	stopping := r.stopping.Load()
	if o.kind == opInvalid {
		var ce *kernel.ConfigError
		if err == nil || (!errors.As(err, &ce) && !errors.Is(err, kernel.ErrClosed)) {
			r.errorf("%s() of an invalid task = %v, want a *ConfigError", rec.name(), err)
		}
		if err == nil {
			rec.accepted = true // counted, so that the sums stay right
			if h != nil {
				rec.h = h
				r.addHandle(rec)
			}
		}
		return
	}
	switch {
	case err == nil:
		rec.accepted = true
		if kind == recHandle {
			if h == nil {
				r.errorf("%s() = nil, nil, want a handle", rec.name())
				return
			}
			rec.h = h
			r.addHandle(rec)
		}
	case errors.Is(err, kernel.ErrClosed):
		if !stopping {
			r.errorf("%s() = %v before Shutdown or Close", rec.name(), err)
		}
	case !wait && errors.Is(err, kernel.ErrQueueFull):
	case !wait && errors.Is(err, kernel.ErrDegraded):
		if rec.prio == kernel.High {
			r.errorf("%s() of a High task = %v, want no ErrDegraded for High", rec.name(), err)
		}
	case wait && ctx.Err() != nil && errors.Is(err, ctx.Err()):
	default:
		r.errorf("%s() = %v, want nil, ErrQueueFull, ErrDegraded (Try only), the context's error (Submit, Go only) or ErrClosed", rec.name(), err)
	}
}

func (r *runner) addHandle(rec *taskRec) {
	r.mu.Lock()
	r.handles = append(r.handles, rec)
	r.mu.Unlock()
	if rec.h.Priority() != rec.prio {
		r.errorf("%s: Handle.Priority() = %v, want %v", rec.name(), rec.h.Priority(), rec.prio)
	}
	if rec.spec.ownID && rec.h.ID() != rec.id {
		r.errorf("%s: Handle.ID() = %q, want %q", rec.name(), rec.h.ID(), rec.id)
	}
}

func (r *runner) wait(o kop) {
	rec := r.pickHandle(o.idx)
	if rec == nil {
		return
	}
	ctx, cancel := ctxFor(o.ctxD)
	defer cancel()
	err := rec.h.Wait(ctx)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return // it may still run
	}
	select {
	case <-rec.h.Done():
	default:
		r.errorf("%s: Handle.Wait() = %v before Done() was closed (state %v)", rec.name(), err, rec.h.State())
		return
	}
	if st := rec.h.State(); !st.Terminal() {
		r.errorf("%s: State() = %v after Wait returned, want a terminal state", rec.name(), st)
	}
	if got := rec.h.Err(); !errors.Is(got, err) {
		r.errorf("%s: Handle.Wait() = %v, want Err() = %v", rec.name(), err, got)
	}
}

// refuseHugeQuotas checks that Validate refuses quotas above kernelQuotaMax,
// naming the field (New and Update would fail or ignore them otherwise), then
// brings them within it so that the case goes on.
func (r *runner) refuseHugeQuotas(cfg *kernel.Config) {
	q := &cfg.Quotas
	for _, f := range []struct {
		name string
		v    *int
	}{{"High", &q.High}, {"Normal", &q.Normal}, {"LowGuaranteed", &q.LowGuaranteed}} {
		if *f.v <= kernelQuotaMax {
			continue
		}
		var ce *kernel.ConfigError
		err := cfg.Validate()
		found := false
		for _, e := range unjoin(err) {
			if errors.As(e, &ce) && ce.Field == "Config.Quotas."+f.name {
				found = true
			}
		}
		if !found {
			r.errorf("Validate() with Quotas.%s = %d = %v, want a *ConfigError naming Config.Quotas.%s", f.name, *f.v, err, f.name)
		}
		*f.v = kernelQuotaMax
	}
}

// unjoin returns the errors an errors.Join holds, or err itself.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// update applies cfg's changeable fields.
func (r *runner) update(cfg *kernel.Config) {
	next := *cfg
	r.refuseHugeQuotas(&next)
	if err := next.Validate(); err != nil {
		r.errorf("harness: the generated update is invalid: Validate() = %v", err)
		return
	}
	r.noteConfig(&next)
	err := r.k.Update(func(c *kernel.Config) {
		keep := *c
		*c = next
		if r.avoid&featUpdateShrink != 0 {
			c.Capacity, c.MaxConcurrency, c.MaxZombies, c.Reserve = keep.Capacity, keep.MaxConcurrency, keep.MaxZombies, keep.Reserve
		}
		c.Tick, c.OnTimeoutWorkers, c.EventBuffer = keep.Tick, keep.OnTimeoutWorkers, keep.EventBuffer
		c.Clock, c.Metrics, c.Logger, c.OnEvent = keep.Clock, keep.Metrics, keep.Logger, keep.OnEvent
		c.Store, c.SnapshotEvery, c.StoreTimeout, c.StoreBatch = keep.Store, keep.SnapshotEvery, keep.StoreTimeout, keep.StoreBatch
	})
	if err != nil && (!errors.Is(err, kernel.ErrClosed) || !r.stopping.Load()) {
		r.errorf("Update(%s) = %v, want nil", configString(&next), err)
	}
}

// batchCtx returns the context of a batch or Map call and its cancel function.
func batchCtx(b *batchSpec) (context.Context, context.CancelFunc) {
	switch b.ctxKind {
	case 1:
		return context.WithTimeout(context.Background(), b.ctxD)
	default:
		return context.WithCancel(context.Background())
	}
}

func (r *runner) memberRecs(b *batchSpec, op string) []*taskRec {
	recs := make([]*taskRec, len(b.members))
	for i, body := range b.members {
		// Unknown until the call returns: a panic out of it leaves them so.
		rec := &taskRec{body: body, kind: recBatch, id: fmt.Sprintf("t%d", b.ids[i]), prio: normalize(b.opts.Priority), op: op, unknown: true}
		rec.noTime = b.opts.Timeout == kernel.NoTimeout
		if b.opts.Retry != nil {
			rec.maxTries = b.opts.Retry.MaxAttempts
			if rec.maxTries == 0 {
				rec.maxTries = kernelRetryMaxAttemptsDefault
			}
		}
		recs[i] = rec
	}
	r.mu.Lock()
	r.recs = append(r.recs, recs...)
	r.mu.Unlock()
	return recs
}

func batchOpts(b *batchSpec) *kernel.BatchOptions {
	opts := b.opts
	if b.opts.Retry != nil {
		p := *b.opts.Retry
		opts.Retry = &p
	}
	return &opts
}

func (r *runner) batch(b *batchSpec) {
	recs := r.memberRecs(b, "Batch.Go")
	ctx, cancel := batchCtx(b)
	defer cancel()
	kb := r.k.NewBatch(ctx, batchOpts(b))
	for _, rec := range recs {
		kb.Go(func(ctx context.Context) error { return r.run(ctx, rec) })
	}
	var flushErr error
	if b.flush {
		flushErr = kb.Flush()
	}
	if b.ctxKind == 2 {
		cancel()
	}
	var racers sync.WaitGroup
	if b.race > 0 {
		racing := r.memberRecs(&batchSpec{opts: b.opts, members: make([]bodySpec, b.race), ids: make([]int, b.race)}, "Batch.Go during Wait")
		for _, rec := range racing {
			rec.id = ""
		}
		racers.Add(1)
		go func() {
			defer racers.Done()
			defer func() {
				if v := recover(); v != nil {
					r.errorf("Batch.Go during Batch.Wait panicked: %v\n%s", v, debug.Stack())
				}
			}()
			for _, rec := range racing {
				kb.Go(func(ctx context.Context) error { return r.run(ctx, rec) })
			}
		}()
	}
	err := kb.Wait()
	racers.Wait()
	// The members are known submitted when no submission could fail unseen: a
	// Flush before Wait that returned nil, or a Wait that returned nil.
	known := (b.flush && flushErr == nil) || err == nil
	for _, rec := range recs {
		rec.accepted, rec.unknown = known, !known
	}
}

func (r *runner) mapCall(b *batchSpec) {
	recs := r.memberRecs(b, "Map")
	ctx, cancel := batchCtx(b)
	defer cancel()
	if b.ctxKind == 2 {
		cancel()
	}
	items := make([]int, len(recs))
	for i := range items {
		items[i] = i
	}
	out, err := kernel.Map(ctx, r.k, items, func(ctx context.Context, i int) (int, error) {
		if err := r.run(ctx, recs[i]); err != nil {
			return 0, err
		}
		return i + 1, nil
	}, batchOpts(b))
	if len(out) != len(items) {
		r.errorf("Map() of %d items returned %d results", len(items), len(out))
		return
	}
	for i, v := range out {
		switch {
		case v != 0 && v != i+1:
			r.errorf("Map() result %d = %d, want 0 or %d", i, v, i+1)
		case v == i+1 && !recs[i].okRet.Load():
			r.errorf("Map() result %d = %d, but its function never returned nil", i, v)
		case v == 0 && err == nil:
			r.errorf("Map() = nil error with result %d = 0, want %d", i, i+1)
		}
	}
	for _, rec := range recs {
		rec.accepted, rec.unknown = err == nil, err != nil
	}
}

// observe reads Stats and the metrics while the kernel runs.
func (r *runner) observe() {
	s1 := r.k.Stats()
	s2 := r.k.Stats()
	ps1, ps2 := prioStats(&s1), prioStats(&s2)
	var term, started, submitted, retried uint64
	for i := range ps1 {
		term += terminalOf(ps1[i])
		started += ps1[i].Started
		submitted += ps2[i].Submitted
		retried += ps2[i].Retried
	}
	if term > submitted {
		r.errorf("while running: Stats() terminal = %d, then Submitted = %d: a task ended before it was counted", term, submitted)
	}
	if started > submitted+retried {
		r.errorf("while running: Stats() Started = %d, then Submitted + Retried = %d + %d", started, submitted, retried)
	}
	if mc := r.maxConc.Load(); int64(s1.Running) > mc || int64(s1.Executors) > mc {
		r.errorf("while running: Stats() Running = %d, Executors = %d, want <= %d (the largest MaxConcurrency)", s1.Running, s1.Executors, mc)
	}
	if mz := r.maxZombies.Load(); int64(s1.Zombies) > mz {
		r.errorf("while running: Stats() Zombies = %d, want <= %d (the largest MaxZombies)", s1.Zombies, mz)
	}
	var buf bytes.Buffer
	r.k.WritePrometheus(&buf)
	if _, err := parseProm(buf.String()); err != nil {
		r.errorf("while running: WritePrometheus() wrote bad text: %v", err)
	}
	_ = r.k.Zombies()
}

// stopKernel runs the case's stop sequence. Close is always last.
func (r *runner) stopKernel() {
	r.stopping.Store(true)
	p := r.c.stop
	both := func(f, g func()) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); f() }()
		go func() { defer wg.Done(); g() }()
		wg.Wait()
	}
	switch p.seq {
	case 0:
		r.close()
	case 1:
		r.shutdown(p.d1)
		r.close()
	case 2:
		both(func() { r.shutdown(p.d1) }, r.close)
		r.close()
	case 3:
		r.close()
		r.shutdown(p.d1)
		r.close()
	default:
		both(func() { r.shutdown(p.d1) }, func() { r.shutdown(p.d2) })
		r.close()
	}
}

func (r *runner) shutdown(d time.Duration) {
	r.shutdownCalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var err error
	r.call(fmt.Sprintf("Shutdown(ctx with timeout %v)", d), d+stallSlack, func() { err = r.k.Shutdown(ctx) })
	if r.hung.Load() {
		return
	}
	if err == nil {
		r.checkDrained("after Shutdown() returned nil")
		return
	}
	var se *kernel.ShutdownError
	closed := r.closeCalled.Load() && errors.Is(err, kernel.ErrClosed)
	if !errors.As(err, &se) || (!errors.Is(err, context.DeadlineExceeded) && !closed) {
		r.errorf("Shutdown() = %v, want nil or a *ShutdownError wrapping context.DeadlineExceeded (or ErrClosed once Close began)", err)
	}
}

func (r *runner) close() {
	r.closeCalled.Store(true)
	var err error
	r.call("Close()", time.Duration(r.maxGrace.Load())+stallSlack, func() { err = r.k.Close() })
	if err != nil {
		r.errorf("Close() = %v, want nil", err)
	}
}

// checkDrained checks what a kernel that drained shows: every task terminal and
// counted, nothing queued, delayed or running.
func (r *runner) checkDrained(when string) {
	s := r.k.Stats()
	r.checkStatsStopped(&s, when)
	r.mu.Lock()
	hs := append([]*taskRec(nil), r.handles...)
	r.mu.Unlock()
	for _, rec := range hs {
		select {
		case <-rec.h.Done():
		default:
			r.errorf("%s: %s, Done() is not closed (state %v)", rec.name(), when, rec.h.State())
		}
	}
}

var prioNames = [3]string{"high", "normal", "low"}

func prioIndex(p kernel.Priority) int {
	switch p {
	case kernel.High:
		return 0
	case kernel.Low:
		return 2
	default:
		return 1
	}
}

func prioStats(s *kernel.Stats) [3]*kernel.PriorityStats {
	return [3]*kernel.PriorityStats{&s.ByPriority.High, &s.ByPriority.Normal, &s.ByPriority.Low}
}

func terminalOf(p *kernel.PriorityStats) uint64 {
	return p.Succeeded + p.Failed + p.TimedOut + p.Canceled + p.Evicted + p.Abandoned
}

var terminalStates = []kernel.State{kernel.Succeeded, kernel.Failed, kernel.TimedOut, kernel.Canceled, kernel.Evicted, kernel.Abandoned}

func stateCount(p *kernel.PriorityStats, s kernel.State) uint64 {
	switch s {
	case kernel.Succeeded:
		return p.Succeeded
	case kernel.Failed:
		return p.Failed
	case kernel.TimedOut:
		return p.TimedOut
	case kernel.Canceled:
		return p.Canceled
	case kernel.Evicted:
		return p.Evicted
	case kernel.Abandoned:
		return p.Abandoned
	}
	return 0
}

// checkStatsStopped checks the Stats of a kernel that stopped.
func (r *runner) checkStatsStopped(s *kernel.Stats, when string) {
	for i, p := range prioStats(s) {
		if got := terminalOf(p); got != p.Submitted {
			r.errorf("%s: Stats() %s: Succeeded+Failed+TimedOut+Canceled+Evicted+Abandoned = %d+%d+%d+%d+%d+%d = %d, want Submitted = %d",
				when, prioNames[i], p.Succeeded, p.Failed, p.TimedOut, p.Canceled, p.Evicted, p.Abandoned, got, p.Submitted)
		}
		if p.Queued != 0 {
			r.errorf("%s: Stats() %s Queued = %d, want 0", when, prioNames[i], p.Queued)
		}
	}
	if s.Queued != (kernel.ByPriority[int]{}) || s.Delayed != 0 || s.Dispatched != 0 || s.Running != 0 || s.Zombies != 0 || s.Executors != 0 {
		r.errorf("%s: Stats() Queued, Delayed, Dispatched, Running, Zombies, Executors = %+v, %d, %d, %d, %d, %d, want all 0",
			when, s.Queued, s.Delayed, s.Dispatched, s.Running, s.Zombies, s.Executors)
	}
}

// parseProm parses the Prometheus text format into series → value.
func parseProm(text string) (map[string]float64, error) {
	m := map[string]float64{}
	for i, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("line %d %q: no value", i+1, line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", i+1, line, err)
		}
		key := line[:sp]
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: series %s written twice", i+1, key)
		}
		m[key] = v
	}
	return m, nil
}

var promCounters = []struct {
	name string
	get  func(*kernel.PriorityStats) uint64
}{
	{"ax_tasks_submitted_total", func(p *kernel.PriorityStats) uint64 { return p.Submitted }},
	{"ax_tasks_started_total", func(p *kernel.PriorityStats) uint64 { return p.Started }},
	{"ax_tasks_succeeded_total", func(p *kernel.PriorityStats) uint64 { return p.Succeeded }},
	{"ax_tasks_failed_total", func(p *kernel.PriorityStats) uint64 { return p.Failed }},
	{"ax_tasks_timed_out_total", func(p *kernel.PriorityStats) uint64 { return p.TimedOut }},
	{"ax_tasks_retried_total", func(p *kernel.PriorityStats) uint64 { return p.Retried }},
	{"ax_tasks_rejected_total", func(p *kernel.PriorityStats) uint64 { return p.Rejected }},
	{"ax_tasks_evicted_total", func(p *kernel.PriorityStats) uint64 { return p.Evicted }},
	{"ax_tasks_canceled_total", func(p *kernel.PriorityStats) uint64 { return p.Canceled }},
	{"ax_tasks_panics_total", func(p *kernel.PriorityStats) uint64 { return p.Panics }},
	{"ax_tasks_abandoned_total", func(p *kernel.PriorityStats) uint64 { return p.Abandoned }},
	{"ax_task_wait_seconds_count", func(p *kernel.PriorityStats) uint64 { return p.Wait.Count }},
	{"ax_task_exec_seconds_count", func(p *kernel.PriorityStats) uint64 { return p.Exec.Count }},
}

// checkProm compares the Prometheus text with s.
func (r *runner) checkProm(s *kernel.Stats, gauges bool) {
	var buf bytes.Buffer
	r.k.WritePrometheus(&buf)
	m, err := parseProm(buf.String())
	if err != nil {
		r.errorf("WritePrometheus() wrote bad text: %v", err)
		return
	}
	want := func(key string, v float64) {
		got, ok := m[key]
		switch {
		case !ok:
			r.errorf("WritePrometheus() has no %s, want %g (Stats)", key, v)
		case got != v:
			r.errorf("WritePrometheus() %s = %g, want %g (Stats)", key, got, v)
		}
	}
	ps := prioStats(s)
	for _, c := range promCounters {
		for i, p := range ps {
			want(fmt.Sprintf("%s{priority=%q}", c.name, prioNames[i]), float64(c.get(p)))
		}
	}
	want("ax_events_dropped_total", float64(s.EventsDropped))
	want("ax_ontimeout_dropped_total", float64(s.OnTimeoutDropped))
	if !gauges {
		return
	}
	for i, p := range ps {
		want(fmt.Sprintf("ax_queue_depth{priority=%q}", prioNames[i]), float64(p.Queued))
	}
	want("ax_tasks_running", float64(s.Running))
	want("ax_tasks_delayed", float64(s.Delayed))
	want("ax_executors", float64(s.Executors))
	want("ax_zombies", float64(s.Zombies))
}

// checkFinal checks everything once the kernel stopped and every goroutine of the
// case returned.
func (r *runner) checkFinal(avoid feature) {
	s := r.k.Stats()
	r.checkStatsStopped(&s, "after Close")
	if s2 := r.k.Stats(); fmt.Sprint(s2) != fmt.Sprint(s) {
		r.errorf("after Close: Stats() changed from %+v to %+v", s, s2)
	}
	r.checkProm(&s, avoid&checkGauges == 0)
	ps := prioStats(&s)

	var (
		known, unknown, rejected, maybeRejected, neverRan [3]uint64
		runs, panics, panicFailed                         [3]uint64
		byState                                           [3]map[kernel.State]uint64
	)
	for i := range byState {
		byState[i] = map[kernel.State]uint64{}
	}
	for _, rec := range r.recs {
		pi := prioIndex(rec.prio)
		n := int(rec.runs.Load())
		runs[pi] += uint64(n)
		panics[pi] += uint64(rec.panics.Load())
		if e := int(rec.ends.Load()); e != n {
			r.errorf("%s: its function started %d times and returned %d times", rec.name(), n, e)
		}
		switch {
		case rec.unknown:
			unknown[pi]++
			maybeRejected[pi]++
		case rec.accepted:
			known[pi]++
			if n == 0 {
				neverRan[pi]++
			}
		default:
			if n != 0 {
				r.errorf("%s was refused (%v) but its function ran %d times", rec.name(), rec.err, n)
			}
			switch {
			case errors.Is(rec.err, kernel.ErrQueueFull), errors.Is(rec.err, kernel.ErrDegraded):
				rejected[pi]++
			case rec.err != nil && !errors.Is(rec.err, kernel.ErrClosed):
				maybeRejected[pi]++ // a Submit or Go whose context ended
			}
		}
		if rec.spec != nil && rec.spec.far() && n != 0 {
			r.errorf("%s is due an hour or more after its submission but its function ran %d times", rec.name(), n)
		}
		if fs := rec.firstStart.Load(); fs != 0 && rec.notBefore != 0 {
			if start := time.Duration(fs - 1); start < rec.notBefore-100*time.Microsecond {
				sub := rec.submitAt.Sub(monoEpoch)
				r.errorf("%s first ran %v after its submission, want >= %v (its Delay or At)", rec.name(), start-sub, rec.notBefore-sub)
			}
		}
		if f := int(rec.final.Load()); rec.noTime && f > 0 && n > f {
			r.errorf("%s: attempt %d (%v) settles a task without a timeout, but its function ran %d times",
				rec.name(), f, rec.body.kind(f), n)
		}
		if rec.h != nil {
			r.checkHandle(rec, avoid)
			st := rec.h.State()
			byState[pi][st]++
			var pe *kernel.PanicError
			if st == kernel.Failed && errors.As(rec.h.Err(), &pe) {
				panicFailed[pi]++
			}
		}
	}
	for i, p := range ps {
		name := prioNames[i]
		if p.Submitted < known[i] || p.Submitted > known[i]+unknown[i] {
			r.errorf("Stats() %s Submitted = %d, want %d accepted (+ up to %d batch members not known submitted)", name, p.Submitted, known[i], unknown[i])
		}
		if p.Rejected < rejected[i] || p.Rejected > rejected[i]+maybeRejected[i] {
			r.errorf("Stats() %s Rejected = %d, want %d ErrQueueFull or ErrDegraded refusals (+ up to %d that may count)", name, p.Rejected, rejected[i], maybeRejected[i])
		}
		if p.Started < runs[i] || p.Started > p.Submitted+p.Retried {
			r.errorf("Stats() %s Started = %d, want >= %d function runs and <= Submitted + Retried = %d + %d", name, p.Started, runs[i], p.Submitted, p.Retried)
		}
		if p.Panics < panicFailed[i] || p.Panics > panics[i] {
			r.errorf("Stats() %s Panics = %d, want >= %d handles Failed with a *PanicError and <= %d functions that panicked", name, p.Panics, panicFailed[i], panics[i])
		}
		if neverRan[i] > p.Canceled+p.Evicted+p.Abandoned+p.TimedOut {
			r.errorf("Stats() %s: %d accepted tasks never ran, but only Canceled+Evicted+Abandoned+TimedOut = %d", name, neverRan[i], p.Canceled+p.Evicted+p.Abandoned+p.TimedOut)
		}
		for _, st := range terminalStates {
			if got := stateCount(p, st); got < byState[i][st] {
				r.errorf("Stats() %s %v = %d, want >= %d (handles in that state)", name, st, got, byState[i][st])
			}
		}
	}
	if r.ev != nil {
		r.checkEvents(&s)
	}
	var sum kernel.PriorityStats
	for _, p := range ps {
		sum.Submitted += p.Submitted
		sum.Rejected += p.Rejected
		sum.Retried += p.Retried
		sum.Succeeded += p.Succeeded
		sum.Failed += p.Failed
		sum.TimedOut += p.TimedOut
		sum.Canceled += p.Canceled
		sum.Evicted += p.Evicted
		sum.Abandoned += p.Abandoned
	}
	r.t.Logf("%d tasks: submitted %d, rejected %d, retried %d; succeeded %d, failed %d, timed out %d, canceled %d, evicted %d, abandoned %d; events dropped %d",
		len(r.recs), sum.Submitted, sum.Rejected, sum.Retried, sum.Succeeded, sum.Failed, sum.TimedOut, sum.Canceled, sum.Evicted, sum.Abandoned, s.EventsDropped)
}

// checkHandle checks a finished task's handle.
func (r *runner) checkHandle(rec *taskRec, avoid feature) {
	h := rec.h
	select {
	case <-h.Done():
	default:
		r.errorf("%s: Done() is not closed after Close (state %v)", rec.name(), h.State())
		return
	}
	st := h.State()
	err := h.Err()
	if !st.Terminal() {
		r.errorf("%s: State() = %v after Close, want a terminal state", rec.name(), st)
		return
	}
	if st2 := h.State(); st2 != st {
		r.errorf("%s: State() = %v, then %v", rec.name(), st, st2)
	}
	n := int(rec.runs.Load())
	if a := h.Attempts(); a < n || (rec.maxTries > 0 && a > rec.maxTries) {
		r.errorf("%s: Attempts() = %d, want >= %d function runs and <= %d (its Retry.MaxAttempts)", rec.name(), a, n, rec.maxTries)
	}
	var pe *kernel.PanicError
	bad := ""
	switch st {
	case kernel.Succeeded:
		if err != nil {
			bad = "nil"
		} else if !rec.okRet.Load() {
			r.errorf("%s ended Succeeded, but its function never returned nil", rec.name())
		}
	case kernel.Failed:
		switch {
		case errors.As(err, &pe):
			if rec.panics.Load() == 0 {
				r.errorf("%s ended Failed with %v, but its function never panicked", rec.name(), err)
			}
		case errors.Is(err, errFail):
			if n == 0 {
				r.errorf("%s ended Failed with %v, but its function never ran", rec.name(), err)
			}
		default:
			bad = "an error of its function"
		}
	case kernel.TimedOut:
		if !errors.Is(err, kernel.ErrTimeout) {
			bad = "ErrTimeout"
		}
		if rec.noTime || rec.hugeTime {
			r.errorf("%s ended TimedOut, but its timeout is %v", rec.name(), rec.spec.timeout)
		}
	case kernel.Canceled:
		if !errors.Is(err, kernel.ErrCanceled) && !errors.Is(err, kernel.ErrClosed) {
			bad = "ErrCanceled or ErrClosed"
		}
	case kernel.Evicted:
		if !errors.Is(err, kernel.ErrEvicted) {
			bad = "ErrEvicted"
		}
		if rec.prio != kernel.Low {
			r.errorf("%s of priority %v ended Evicted, want only Low tasks evicted", rec.name(), rec.prio)
		}
	case kernel.Abandoned:
		if !errors.Is(err, kernel.ErrAbandoned) {
			bad = "ErrAbandoned"
		}
		if !r.shutdownCalled.Load() {
			r.errorf("%s ended Abandoned without a Shutdown", rec.name())
		}
	}
	if bad != "" {
		r.errorf("%s ended %v: Err() = %v, want %s", rec.name(), st, err, bad)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if got := h.Wait(ctx); !errors.Is(got, err) {
		r.errorf("%s: Wait(ctx) = %v, want Err() = %v", rec.name(), got, err)
	}
	cancel()
	if avoid&checkWaitCtx == 0 {
		done, stop := context.WithCancel(context.Background())
		stop()
		for range 2 {
			if got := h.Wait(done); !errors.Is(got, err) {
				r.errorf("%s ended %v: Wait(a done ctx) = %v, want Err() = %v (the task had finished)", rec.name(), st, got, err)
				break
			}
		}
	}
}

// legalFrom is the documented transition table, with 0 for a task's first state.
var legalFrom = map[kernel.State][]kernel.State{
	0:               {kernel.Queued, kernel.Delayed, kernel.Canceled},
	kernel.Delayed:  {kernel.Queued, kernel.Canceled, kernel.Abandoned},
	kernel.Queued:   {kernel.Running, kernel.Canceled, kernel.Evicted, kernel.Abandoned},
	kernel.Running:  {kernel.Succeeded, kernel.Failed, kernel.TimedOut, kernel.Canceled, kernel.Retrying},
	kernel.Retrying: {kernel.Queued, kernel.Canceled, kernel.Abandoned},
}

// checkEvents checks the events against Stats and the handles.
func (r *runner) checkEvents(s *kernel.Stats) {
	if s.EventsDropped > 0 {
		return // the events may be missing some
	}
	r.ev.mu.Lock()
	byID := r.ev.byID
	r.ev.mu.Unlock()
	var entered, refused [3]uint64
	var ended [3]map[kernel.State]uint64
	for i := range ended {
		ended[i] = map[kernel.State]uint64{}
	}
	final := map[string]kernel.Event{}
	for id, evs := range byID {
		prev := kernel.State(0)
		for i, ev := range evs {
			if ev.Note != 0 {
				// A note about the task is not a state change: a refused retry
				// comes between the attempt's end and the task's.
				if ev.Note != kernel.NoteRetryRefused || ev.From != 0 || ev.To != 0 || prev != kernel.Running {
					r.errorf("events of task %s: event %d is note %v (%v -> %v) after %v, want NoteRetryRefused with zero states after running", id, i, ev.Note, ev.From, ev.To, prev)
				}
				refused[prioIndex(ev.Priority)]++
				continue
			}
			if ev.Priority != evs[0].Priority {
				r.errorf("events of task %s: event %d has priority %v, the first %v", id, i, ev.Priority, evs[0].Priority)
			}
			if ev.From != prev {
				r.errorf("events of task %s: event %d is %v -> %v, want From = %v (the previous To)", id, i, ev.From, ev.To, prev)
			}
			legal := false
			for _, to := range legalFrom[ev.From] {
				legal = legal || to == ev.To
			}
			if !legal {
				r.errorf("events of task %s: event %d is %v -> %v, not in the transition table", id, i, ev.From, ev.To)
			}
			if ev.From == 0 {
				entered[prioIndex(ev.Priority)]++
			}
			if ev.To.Terminal() {
				if _, twice := final[id]; twice {
					r.errorf("events of task %s: a second terminal event %v -> %v", id, ev.From, ev.To)
				}
				final[id] = ev
				ended[prioIndex(ev.Priority)][ev.To]++
			}
			prev = ev.To
		}
		if !prev.Terminal() {
			r.errorf("events of task %s: the last is %v, want a terminal state", id, prev)
		}
	}
	for i, p := range prioStats(s) {
		if entered[i] != p.Submitted {
			r.errorf("events: %d %s tasks entered the kernel, want Stats() Submitted = %d", entered[i], prioNames[i], p.Submitted)
		}
		if refused[i] != p.RetriesRefused {
			r.errorf("events: %d %s retries refused, want Stats() RetriesRefused = %d", refused[i], prioNames[i], p.RetriesRefused)
		}
		for _, st := range terminalStates {
			if got := stateCount(p, st); ended[i][st] != got {
				r.errorf("events: %d %s tasks ended %v, want Stats() %v = %d", ended[i][st], prioNames[i], st, st, got)
			}
		}
	}
	for _, rec := range r.recs {
		id := rec.id
		if rec.h != nil {
			id = rec.h.ID()
		} else if rec.kind != recFF || !rec.spec.ownID {
			continue // its ID is the kernel's
		}
		ev, ok := final[id]
		switch {
		case rec.accepted && !ok:
			r.errorf("%s (ID %s) has no terminal event", rec.name(), id)
		case !rec.accepted && !rec.unknown && len(byID[id]) > 0:
			r.errorf("%s was refused (%v) but has events %v", rec.name(), rec.err, byID[id])
		case rec.h != nil && ok && (ev.To != rec.h.State() || (ev.Err == nil) != (rec.h.Err() == nil)):
			r.errorf("%s: terminal event %v (err %v), want State() = %v (err %v)", rec.name(), ev.To, ev.Err, rec.h.State(), rec.h.Err())
		}
	}
}

// The kernel's defaults and limits that the models follow (see kernel.Config).
const (
	kernelMaxConcurrencyDefault   = 500
	kernelRetryMaxAttemptsDefault = 3
	kernelQuotaMax                = 1 << 30
)
