package fuzz

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
)

// This file decodes bytes into a kernel case for TestKernelModel and FuzzKernel: a
// random kernel.Config that Validate accepts (extreme values included), the
// operations of a few submitting goroutines, and how the kernel is stopped. A
// zero byte always decodes to the plainest choice (default field, no operation),
// so that a short input is a small case.

// feature is a part of the generator, or a check, that -kmodel.avoid can turn off
// to look past a known failure.
type feature uint32

const (
	featRetry        feature = 1 << iota // retries at all (off: every policy has MaxAttempts 1)
	featHugeBackoff                      // retry Base and Max near math.MaxInt64
	featHugeWindow                       // RetryBudget.Window = math.MaxInt64
	featEvictLow                         // Config.EvictLow
	featEventPanic                       // an OnEvent that panics
	featBlockingCB                       // OnEvent and OnTimeout that block until the case releases them
	featHugeDelay                        // Task.Delay near math.MaxInt64
	featHugeConc                         // MaxConcurrency above 64
	featBatchRace                        // Batch.Go called while Batch.Wait runs
	featGoexit                           // task functions that call runtime.Goexit
	featHugeQuota                        // Quotas above queue.QuotaMax (1 << 30)
	featMapStray                         // Map members whose functions ignore their context (Map needs batchcancel)
	featBatchCancel                      // batch contexts that end while members are submitted; off, Map becomes Batch
	featUpdateShrink                     // Update lowering Capacity, MaxConcurrency or MaxZombies
	checkGauges                          // the gauges agree with Stats and are zero at the end
	checkWaitCtx                         // Handle.Wait with a done context on a finished task
)

var featureNames = map[string]feature{
	"retry":       featRetry,
	"hugebackoff": featHugeBackoff,
	"hugewindow":  featHugeWindow,
	"evictlow":    featEvictLow,
	"eventpanic":  featEventPanic,
	"blockcb":     featBlockingCB,
	"hugedelay":   featHugeDelay,
	"hugeconc":    featHugeConc,
	"batchrace":   featBatchRace,
	"goexit":      featGoexit,
	"hugequota":   featHugeQuota,
	"mapstray":    featMapStray,
	"batchcancel": featBatchCancel,
	"updshrink":   featUpdateShrink,
	"gauges":      checkGauges,
	"waitctx":     checkWaitCtx,
}

// parseFeatures parses a comma-separated list of feature names.
func parseFeatures(s string) (feature, error) {
	var f feature
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		v, ok := featureNames[name]
		if !ok {
			return 0, fmt.Errorf("unknown feature %q", name)
		}
		f |= v
	}
	return f, nil
}

// caseInput decodes a case from bytes: one byte per choice, zeros once the bytes
// run out.
type caseInput struct {
	byteReader
	avoid feature
}

// n returns a value in [0, n) (n <= 256).
func (in *caseInput) n(n int) int { return int(in.next()) % n }

// chance is true for about pct percent of the byte values, never for zero.
func (in *caseInput) chance(pct int) bool { return int(in.next())*100 >= (100-pct)*256 }

func (in *caseInput) on(f feature) bool { return in.avoid&f == 0 }

// pickDur returns one of ds, chosen by the next byte (ds[0] for a zero byte).
func (in *caseInput) pickDur(ds ...time.Duration) time.Duration { return ds[in.n(len(ds))] }

const hugeDur = time.Duration(math.MaxInt64)

// The operations of a submitting goroutine.
type opKind uint8

const (
	opTrySubmit opKind = iota
	opSubmit
	opTryGo
	opGo
	opCancel
	opWait
	opUpdate
	opBatch
	opMap
	opObserve
	opInvalid
	opBurst // many tasks alike at once, to fill the kernel
	opKinds
)

var opNames = [...]string{"TrySubmit", "Submit", "TryGo", "Go", "Cancel", "Wait", "Update", "Batch", "Map", "Observe", "Invalid", "Burst"}

func (k opKind) String() string { return opNames[k] }

// What a task function does on one attempt.
type bodyKind uint8

const (
	bodyOK         bodyKind = iota // returns nil at once
	bodyFail                       // returns errFail
	bodyPermanent                  // returns kernel.Permanent(errFail)
	bodyPanic                      // panics
	bodyGoexit                     // calls runtime.Goexit
	bodyWaitOK                     // waits for its context or a short timer; nil after the timer
	bodyWaitFail                   // the same, errFail after the timer
	bodyCtx                        // waits for its context only
	bodyTimer                      // ignores its context: waits a short timer, returns nil
	bodyRelease                    // ignores its context: waits until the case releases it (after Close)
	bodyLateGoexit                 // ignores its context: waits a short timer, then calls runtime.Goexit
)

var bodyNames = [...]string{"ok", "fail", "permanent", "panic", "goexit", "waitok", "waitfail", "ctx", "timer", "release", "lategoexit"}

func (b bodyKind) String() string { return bodyNames[b] }

// bodySpec is a task function: what attempts 1, 2 and 3+ do.
type bodySpec struct {
	kinds    [3]bodyKind
	d        time.Duration // the timer of the waiting kinds
	panicVal uint8         // 0: a string, 1: an error, 2: nil
}

func (b bodySpec) kind(attempt int) bodyKind { return b.kinds[min(attempt, 3)-1] }

// instant reports whether an attempt of kind k settles the task at once when it
// has no timeout: it succeeds, or fails in a way that is never retried.
func (b bodyKind) instant() bool {
	return b == bodyOK || b == bodyPermanent || b == bodyPanic || b == bodyGoexit
}

func (b bodySpec) String() string {
	return fmt.Sprintf("%v/%v/%v d=%v", b.kinds[0], b.kinds[1], b.kinds[2], b.d)
}

// atKind says how Task.At is set, relative to the submission.
type atKind uint8

const (
	atNone  atKind = iota
	atPast         // 1 s ago
	atEpoch        // 1970
	atSoon         // atOffset from now
	atHour         // in an hour
	atFar          // the year 36812
	atKinds
)

// taskSpec is a task to submit.
type taskSpec struct {
	id        int // its index in the case; names it "t<id>" when ownID
	ownID     bool
	prio      kernel.Priority
	delay     time.Duration
	at        atKind
	atOffset  time.Duration
	timeout   time.Duration
	retry     *kernel.RetryPolicy
	body      bodySpec
	onTimeout uint8 // 0 none, 1 count, 2 panic, 3 slow, 4 block until released
	invalid   uint8 // opInvalid: which field is bad (see runner.task)
}

// far reports whether the task is due an hour or more after its submission: it
// must not run during the case.
func (s *taskSpec) far() bool {
	return s.delay >= time.Hour || s.at == atHour || s.at == atFar
}

func (s *taskSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "t%d{%v", s.id, s.prio)
	if s.ownID {
		b.WriteString(" id")
	}
	if s.delay != 0 {
		fmt.Fprintf(&b, " delay=%v", s.delay)
	}
	if s.at != atNone {
		fmt.Fprintf(&b, " at=%d/%v", s.at, s.atOffset)
	}
	if s.timeout != 0 {
		fmt.Fprintf(&b, " timeout=%v", s.timeout)
	}
	if s.retry != nil {
		fmt.Fprintf(&b, " retry=%s", retryString(s.retry))
	}
	if s.onTimeout != 0 {
		fmt.Fprintf(&b, " ontimeout=%d", s.onTimeout)
	}
	if s.invalid != 0 {
		fmt.Fprintf(&b, " invalid=%d", s.invalid)
	}
	fmt.Fprintf(&b, " %v}", s.body)
	return b.String()
}

// batchSpec is a Batch (opBatch) or a Map call (opMap).
type batchSpec struct {
	opts    kernel.BatchOptions
	members []bodySpec
	ids     []int         // each member's task index
	ctxKind uint8         // 0 Background, 1 a short timeout, 2 cancelled after the members were added
	ctxD    time.Duration // the timeout of ctxKind 1
	flush   bool          // Batch: Flush before Wait
	race    int           // Batch: members added by another goroutine while Wait runs
}

// kop is one operation.
type kop struct {
	kind  opKind
	task  *taskSpec
	ctxD  time.Duration // Submit, Go, Wait: the context's timeout (0: already done)
	idx   int           // Cancel, Wait: which handle (modulo the handles so far)
	cfg   *kernel.Config
	batch *batchSpec
	burst []*taskSpec // opBurst: the tasks, submitted with TryGo when ctxD is 0, else TrySubmit
}

func (o kop) String() string {
	switch o.kind {
	case opTrySubmit, opTryGo, opInvalid:
		return fmt.Sprintf("%v(%v)", o.kind, o.task)
	case opSubmit, opGo:
		return fmt.Sprintf("%v(ctx %v, %v)", o.kind, o.ctxD, o.task)
	case opCancel:
		return fmt.Sprintf("Cancel(#%d)", o.idx)
	case opWait:
		return fmt.Sprintf("Wait(#%d, ctx %v)", o.idx, o.ctxD)
	case opUpdate:
		return "Update(" + configString(o.cfg) + ")"
	case opBurst:
		return fmt.Sprintf("Burst(%d × %v, handles %t)", len(o.burst), o.burst[0], o.ctxD != 0)
	case opBatch, opMap:
		b := o.batch
		return fmt.Sprintf("%v(%d members %v, %v timeout=%v retry=%s cancelOnError=%t noWait=%t, ctx %d/%v, flush %t, race %d)",
			o.kind, len(b.members), b.members, b.opts.Priority, b.opts.Timeout, retryString(b.opts.Retry),
			b.opts.CancelOnError, b.opts.NoWait, b.ctxKind, b.ctxD, b.flush, b.race)
	}
	return o.kind.String()
}

// How OnEvent behaves.
type eventMode uint8

const (
	evNone   eventMode = iota
	evRecord           // records every event
	evPanic            // records, and panics on every panicEvery-th event
	evSlow             // records; the first slowFirst events take slowD each
	evBlock            // records; the blockAt-th event blocks until the case releases it
	evModes
)

// stopPlan says when and how the kernel is stopped. Close always comes last.
type stopPlan struct {
	when   uint8 // 0: after the submitters are done; 1: when worker 0 reaches op at; 2: at once
	at     int
	seq    uint8 // 0 Close; 1 Shutdown, Close; 2 Shutdown ∥ Close; 3 Close, Shutdown; 4 Shutdown ∥ Shutdown
	d1, d2 time.Duration
}

// kcase is a decoded case.
type kcase struct {
	cfg        kernel.Config
	events     eventMode
	panicEvery int
	slowFirst  int
	slowD      time.Duration
	blockAt    int
	logger     bool
	ownMetrics bool
	workers    [][]kop
	stop       stopPlan
	ntasks     int
	used       int // the bytes decoded: the rest of the input changes nothing
}

func (c *kcase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decoded from %d bytes\nconfig %s\n", c.used, configString(&c.cfg))
	fmt.Fprintf(&b, "events %d (panic every %d, slow first %d by %v, block at %d), logger %t, own metrics %t\n",
		c.events, c.panicEvery, c.slowFirst, c.slowD, c.blockAt, c.logger, c.ownMetrics)
	fmt.Fprintf(&b, "stop %+v\n", c.stop)
	for i, w := range c.workers {
		fmt.Fprintf(&b, "worker %d:", i)
		for _, o := range w {
			b.WriteString("\n  " + o.String())
		}
		b.WriteString("\n")
	}
	return b.String()
}

func retryString(p *kernel.RetryPolicy) string {
	if p == nil {
		return "nil"
	}
	fn := ""
	if p.BackoffFunc != nil {
		fn = " func"
	}
	return fmt.Sprintf("{%d %v ×%g max %v j%d%s}", p.MaxAttempts, p.Base, p.Multiplier, p.Max, p.Jitter, fn)
}

func configString(c *kernel.Config) string {
	return fmt.Sprintf("{MaxConcurrency:%d Quotas:%+v Reserve:%+v AgeAfter:%v Capacity:%+v DegradeAt:%g EvictLow:%t Tick:%v "+
		"DefaultTimeout:%+v Retry:{%s %s %s} RetryBudget:%+v MaxZombies:%d ZombieGrace:%v OnTimeoutWorkers:%d EventBuffer:%d}",
		c.MaxConcurrency, c.Quotas, c.Reserve, c.AgeAfter, c.Capacity, c.DegradeAt, c.EvictLow, c.Tick,
		c.DefaultTimeout, retryString(&c.Retry.High), retryString(&c.Retry.Normal), retryString(&c.Retry.Low),
		c.RetryBudget, c.MaxZombies, c.ZombieGrace, c.OnTimeoutWorkers, c.EventBuffer)
}

// decodeCase decodes a whole case.
func decodeCase(data []byte, avoid feature) *kcase {
	in := &caseInput{byteReader: byteReader{data: data}, avoid: avoid}
	c := &kcase{}
	c.cfg = in.config()
	c.cfg.Tick = in.pickDur(0, 100*time.Microsecond, time.Millisecond, 3*time.Millisecond)
	c.cfg.OnTimeoutWorkers = in.n(4)
	if in.chance(20) {
		c.cfg.EventBuffer = 1 + in.n(32) // events get dropped
	}
	c.events = eventMode(in.n(int(evModes)))
	switch c.events {
	case evPanic:
		if !in.on(featEventPanic) {
			c.events = evRecord
		}
		c.panicEvery = []int{1, 3, 17}[in.n(3)]
	case evSlow:
		c.slowFirst = 1 + in.n(40)
		c.slowD = in.pickDur(200*time.Microsecond, time.Millisecond, 3*time.Millisecond)
	case evBlock:
		if !in.on(featBlockingCB) {
			c.events = evRecord
		}
		c.blockAt = 1 + in.n(20)
	}
	c.logger = in.chance(30)
	c.ownMetrics = in.chance(30)

	nw := 1 + in.n(4)
	for range nw {
		nops := in.n(41)
		ops := make([]kop, 0, nops)
		for range nops {
			ops = append(ops, in.op(c))
		}
		c.workers = append(c.workers, ops)
	}
	c.stop = stopPlan{
		when: []uint8{0, 0, 0, 0, 1, 1, 2}[in.n(7)],
		at:   in.n(41),
		seq:  uint8(in.n(5)),
		d1:   in.pickDur(0, time.Millisecond, 10*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond),
		d2:   in.pickDur(0, time.Millisecond, 10*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond),
	}
	c.used = len(data) - len(in.data)
	return c
}

// config decodes the changeable fields of a Config (those Update may set) within
// what Validate accepts.
func (in *caseInput) config() kernel.Config {
	var c kernel.Config
	switch v := in.n(16); {
	case v == 0:
		// MaxConcurrencyDefault
	case v < 8:
		c.MaxConcurrency = 1 + in.n(8) // small: the kernel fills up
	case v < 14 || !in.on(featHugeConc):
		c.MaxConcurrency = 1 + in.n(64)
	default:
		c.MaxConcurrency = []int{100, 1000, 1 << 16, 1 << 20}[in.n(4)]
	}
	conc := c.MaxConcurrency
	if conc == 0 {
		conc = kernelMaxConcurrencyDefault
	}
	quota := func() int {
		switch v := in.n(11); {
		case v < 6:
			return v // 0 takes the default
		case v < 8:
			return 1 + in.n(100)
		case v == 8 || !in.on(featHugeQuota):
			return 1 << 30
		case v == 9:
			return math.MaxInt32
		default:
			return 1 << 40
		}
	}
	c.Quotas = kernel.Quotas{High: quota(), Normal: quota(), LowGuaranteed: quota()}
	if in.chance(30) {
		c.Reserve.High = in.n(256) % conc // < MaxConcurrency
	}
	c.AgeAfter = in.pickDur(0, 0, time.Microsecond, time.Millisecond, 10*time.Millisecond, time.Hour, hugeDur)
	capacity := func() int {
		switch v := in.n(12); {
		case v == 0:
			return 0 // the default
		case v < 6:
			return 1 + in.n(8)
		case v < 11:
			return 1 + in.n(50)
		default:
			return 1 << 24
		}
	}
	c.Capacity = kernel.ByPriority[int]{High: capacity(), Normal: capacity(), Low: capacity()}
	switch in.n(6) {
	case 0:
		// DegradeAtDefault
	case 1:
		c.DegradeAt = 1
	case 2:
		c.DegradeAt = math.SmallestNonzeroFloat64
	case 3:
		c.DegradeAt = 0.5
	default:
		c.DegradeAt = float64(in.next()) / 255
	}
	c.EvictLow = in.chance(40) && in.on(featEvictLow)
	timeout := func() time.Duration {
		return in.pickDur(0, 0, 0, time.Millisecond, 5*time.Millisecond, 20*time.Millisecond,
			kernel.NoTimeout, kernel.NoTimeout-1, time.Hour)
	}
	c.DefaultTimeout = kernel.ByPriority[time.Duration]{High: timeout(), Normal: timeout(), Low: timeout()}
	c.Retry = kernel.ByPriority[kernel.RetryPolicy]{High: in.retry(), Normal: in.retry(), Low: in.retry()}
	switch in.n(6) {
	case 0:
		// the defaults
	case 1:
		c.RetryBudget.Disabled = true
	default:
		c.RetryBudget.Ratio = []float64{0, 0.01, 1, 100, math.MaxFloat64}[in.n(5)]
		c.RetryBudget.MinPerSecond = []int{0, 1, 1000, math.MaxInt32}[in.n(4)]
		c.RetryBudget.Window = in.pickDur(0, time.Second, 10*time.Second, time.Hour, hugeDur)
		if c.RetryBudget.Window == hugeDur && !in.on(featHugeWindow) {
			c.RetryBudget.Window = time.Hour
		}
		c.RetryBudget.Disabled = in.chance(20)
	}
	c.MaxZombies = []int{0, -1, 1, 2, 5, 100}[in.n(6)]
	// Close waits up to ZombieGrace for functions that ignore their context: small.
	c.ZombieGrace = in.pickDur(time.Millisecond, time.Nanosecond, 5*time.Millisecond, 20*time.Millisecond)
	return c
}

// retry decodes a retry policy.
func (in *caseInput) retry() kernel.RetryPolicy {
	var p kernel.RetryPolicy
	if in.n(4) == 0 {
		if !in.on(featRetry) {
			p.MaxAttempts = 1
		}
		return p // 3 attempts, 1 s base: the retries wait past the case
	}
	p.MaxAttempts = []int{0, 1, 2, 3, 5, 20, 1000}[in.n(7)]
	p.Base = in.pickDur(0, time.Nanosecond, 100*time.Microsecond, time.Millisecond, 5*time.Millisecond, time.Hour, hugeDur)
	p.Multiplier = []float64{0, 1, 1.5, 2, 10, 1e300, math.MaxFloat64}[in.n(7)]
	p.Max = in.pickDur(0, time.Nanosecond, time.Millisecond, 10*time.Millisecond, time.Hour, hugeDur)
	if !in.on(featHugeBackoff) {
		if p.Base == hugeDur {
			p.Base = time.Hour
		}
		if p.Max == hugeDur {
			p.Max = time.Hour
		}
	}
	p.Jitter = kernel.Jitter(in.n(3))
	if in.chance(15) {
		ds := []time.Duration{-time.Second, 0, time.Microsecond, time.Millisecond, hugeDur}
		off := in.n(len(ds))
		p.BackoffFunc = func(attempt int, _ error) time.Duration { return ds[(attempt+off)%len(ds)] }
	}
	if !in.on(featRetry) {
		p.MaxAttempts = 1
	}
	return p
}

// bodyWeights draws the kinds of attempts: success is the most common.
var bodyWeights = []bodyKind{
	bodyOK, bodyOK, bodyOK, bodyFail, bodyPermanent, bodyPanic, bodyGoexit,
	bodyWaitOK, bodyWaitOK, bodyWaitFail, bodyCtx, bodyTimer, bodyRelease, bodyLateGoexit,
}

// body decodes a task function.
func (in *caseInput) body() bodySpec {
	var b bodySpec
	for i := range b.kinds {
		k := bodyWeights[in.n(len(bodyWeights))]
		if (k == bodyGoexit || k == bodyLateGoexit) && !in.on(featGoexit) {
			k = bodyPanic
		}
		if !in.on(featRetry) && i > 0 {
			k = bodyOK // never runs
		}
		b.kinds[i] = k
	}
	b.d = in.pickDur(0, 100*time.Microsecond, time.Millisecond, 3*time.Millisecond, 10*time.Millisecond, 20*time.Millisecond)
	b.panicVal = uint8(in.n(3))
	return b
}

// task decodes a task.
func (in *caseInput) task(c *kcase) *taskSpec {
	s := &taskSpec{id: c.ntasks}
	c.ntasks++
	s.ownID = in.chance(40)
	s.prio = kernel.Priority(in.n(4))
	switch in.n(4) {
	case 0, 1:
	case 2:
		s.delay = in.pickDur(0, 100*time.Microsecond, time.Millisecond, 2*time.Millisecond, 5*time.Millisecond,
			15*time.Millisecond, time.Hour, hugeDur, hugeDur-1)
		if s.delay > time.Hour && !in.on(featHugeDelay) {
			s.delay = time.Hour
		}
	default:
		s.at = atKind(in.n(int(atKinds)))
		s.atOffset = in.pickDur(0, time.Millisecond, 5*time.Millisecond)
	}
	s.timeout = in.pickDur(0, 0, 0, 0, 500*time.Microsecond, 2*time.Millisecond, 10*time.Millisecond,
		30*time.Millisecond, kernel.NoTimeout, kernel.NoTimeout-1, time.Hour)
	if in.chance(30) {
		p := in.retry()
		s.retry = &p
	}
	s.body = in.body()
	s.onTimeout = uint8(in.n(5))
	if s.onTimeout == 4 && !in.on(featBlockingCB) {
		s.onTimeout = 1
	}
	return s
}

// op decodes one operation.
func (in *caseInput) op(c *kcase) kop {
	o := kop{kind: opKind(in.n(int(opKinds)))}
	switch o.kind {
	case opTrySubmit, opTryGo:
		o.task = in.task(c)
	case opSubmit, opGo:
		o.task = in.task(c)
		o.ctxD = in.pickDur(0, time.Millisecond, 5*time.Millisecond, 20*time.Millisecond)
	case opInvalid:
		o.task = in.task(c)
		o.task.invalid = uint8(1 + in.n(6))
		o.ctxD = time.Millisecond
	case opBurst:
		t := in.task(c)
		n := 8 + in.n(57)
		o.burst = []*taskSpec{t}
		for range n - 1 {
			cp := *t
			cp.id = c.ntasks
			c.ntasks++
			o.burst = append(o.burst, &cp)
		}
		if in.chance(50) {
			o.ctxD = 1
		}
	case opCancel:
		o.idx = int(in.next())
	case opWait:
		o.idx = int(in.next())
		o.ctxD = in.pickDur(0, time.Millisecond, 10*time.Millisecond)
	case opUpdate:
		cfg := in.config()
		o.cfg = &cfg
	case opBatch, opMap:
		b := &batchSpec{}
		b.opts.Priority = kernel.Priority(in.n(4))
		b.opts.Timeout = in.pickDur(0, 0, time.Millisecond, 10*time.Millisecond, kernel.NoTimeout)
		if in.chance(30) {
			p := in.retry()
			b.opts.Retry = &p
		}
		b.opts.CancelOnError = in.chance(50)
		b.opts.NoWait = in.chance(30)
		for range in.n(13) {
			body := in.body()
			if o.kind == opMap && !in.on(featMapStray) {
				for i, k := range body.kinds {
					if k == bodyTimer || k == bodyRelease || k == bodyWaitOK || k == bodyLateGoexit {
						body.kinds[i] = bodyWaitFail
					}
				}
			}
			b.members = append(b.members, body)
			b.ids = append(b.ids, c.ntasks)
			c.ntasks++
		}
		b.ctxKind = uint8(in.n(3))
		if !in.on(featBatchCancel) {
			// A member that fails cancels a Map's context too.
			b.ctxKind, b.opts.CancelOnError, o.kind = 0, false, opBatch
		}
		if o.kind == opMap && !in.on(featMapStray) {
			b.opts.Timeout = kernel.NoTimeout
		}
		b.ctxD = in.pickDur(time.Millisecond, 5*time.Millisecond, 20*time.Millisecond)
		b.flush = in.chance(50)
		race, extra := in.chance(25), in.n(8)
		if race && o.kind == opBatch && in.on(featBatchRace) {
			b.race = 256 + extra
		}
		o.batch = b
	}
	return o
}
