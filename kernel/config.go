package kernel

import (
	"cmp"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/benbjohnson/clock"

	"github.com/axsched/ax/kernel/internal/check"
	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/store"
)

// Defaults and limits of [Config].
const (
	maxConcurrencyDefault     = 500
	maxConcurrencyMax         = 1 << 24
	capacityHighDefault       = 10_000
	capacityNormalDefault     = 30_000
	capacityLowDefault        = 10_000
	capacityMax               = 1 << 24
	degradeAtDefault          = 0.8
	tickDefault               = time.Millisecond
	tickMin                   = 100 * time.Microsecond
	tickMax                   = time.Minute
	maxZombiesDefault         = 100
	maxZombiesMax             = 1 << 24
	zombieGraceDefault        = 3 * time.Second
	zombieGraceMax            = time.Hour
	onTimeoutWorkersDefault   = 4
	onTimeoutWorkersMax       = 1024
	eventBufferDefault        = 1 << 16
	eventBufferMax            = 1 << 24
	storeTimeoutDefault       = 5 * time.Second
	storeBatchDefault         = 4096
	maxResultDefault          = 64 << 10
	storeSnapshotBatchDefault = 1 << 16
	storeBatchMax             = 1 << 20
	quotaHighDefault          = 17
	quotaNormalDefault        = 2
	quotaLowDefault           = 1
	quotaMax                  = queue.QuotaMax
	nameMax                   = 64
	leaseDefault              = 15 * time.Second
	leaseConfigMin            = 100 * time.Millisecond
	leaseConfigMax            = time.Hour

	retryMaxAttemptsDefault = 3
	retryBaseDefault        = time.Second
	retryMultiplierDefault  = 2.0
	retryMaxDefault         = 30 * time.Second

	retryBudgetRatioDefault        = 0.2
	retryBudgetMinPerSecondDefault = 10
	retryBudgetWindowDefault       = 10 * time.Second
)

// Quotas shares the dispatches between the priorities, in picking cycles of
// High + Normal + LowGuaranteed picks: Normal and LowGuaranteed are floors, the
// picks each gets in every cycle while it has work, spread over the cycle; the
// rest of the cycle goes to the highest priority with work. So while every
// priority is saturated each gets its quota's share of the cycle; a priority
// without work takes nothing, and its share goes to the highest priority that has
// some (work-conserving). The defaults, 17/2/1, give High up to 85 % of the
// dispatches while Normal and Low are saturated, and Normal and Low floors of 10 %
// and 5 %.
type Quotas struct {
	High, Normal, LowGuaranteed int
}

// Reserve holds running slots back for High tasks.
type Reserve struct {
	// High slots of MaxConcurrency only High tasks may occupy, so that long Normal
	// and Low tasks can never hold every slot while High work waits. If zero, none.
	High int
}

// Jitter is how a retry delay is randomised.
type Jitter uint8

// The jitter modes.
const (
	// JitterFull draws the delay uniformly from [0, d] ("full jitter"), the default.
	JitterFull Jitter = iota
	// JitterEqual draws it from [d/2, d].
	JitterEqual
	// JitterNone uses d itself.
	JitterNone
)

// BackoffFunc returns the delay before retry number attempt (1 for the first retry)
// after err. A nil BackoffFunc means [DefaultBackoff]'s exponential rule.
type BackoffFunc func(attempt int, err error) time.Duration

// RetryPolicy says whether and when a failed attempt is tried again. A task is
// retried when its attempt returned an error that is not [Permanent] or timed out,
// while it has attempts left and the kernel's retry budget allows (a durable task's
// retry the budget refuses waits for it: see [RetryBudget]). An attempt that
// panicked (a [*PanicError]) is not retried: the task ends Failed. Canceled and
// evicted tasks are never retried.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts in all, the first included; 1 means no
	// retry. If zero, 3.
	MaxAttempts int
	// Base is the delay before the first retry. If zero, 1 s.
	Base time.Duration
	// Multiplier grows the delay with each retry: Base × Multiplier^(n-1). If zero,
	// 2. Must be >= 1 otherwise.
	Multiplier float64
	// Max caps the delay. If zero, 30 s.
	Max time.Duration
	// Jitter randomises the delay. The zero value is JitterFull.
	Jitter Jitter
	// BackoffFunc, when set, replaces the rule above (Jitter is not applied to it).
	// It runs on the scheduler's goroutine and must be quick; a negative delay means
	// none, and a panic is recovered into the rule's delay (Stats.CallbackPanics).
	BackoffFunc BackoffFunc
}

// RetryBudget stops retry storms: over a sliding Window, retries may be at most
// Ratio of first attempts plus MinPerSecond × Window. The window slides in steps of
// a second, or of a sixtieth of Window when that is longer. A refused retry is
// counted (PriorityStats.RetriesRefused, ax_retries_refused_total) and reported
// (NoteRetryRefused). It ends an in-memory task with [ErrRetryBudget]. A durable
// task stays Retrying instead, and asks again at its backoff or when the window
// slides, whichever is later, without spending an attempt.
type RetryBudget struct {
	// Ratio of retries to first attempts. If zero, 0.2.
	Ratio float64
	// MinPerSecond retries are always allowed. If zero, 10.
	MinPerSecond int
	// Window of the accounting. If zero, 10 s.
	Window time.Duration
	// Disabled turns the budget off: every retry the policy allows happens.
	Disabled bool
}

// Event is one state change of a task, given to Config.OnEvent.
//
// An event with a Note has zero From and To. It is about a group or a key (TaskID
// is empty): a key throttled, a pause or resume, a breaker's transition; or, for
// NoteRetryRefused, about the task it names.
type Event struct {
	TaskID   string
	Priority Priority
	From, To State // From is 0 for a task entering the kernel
	Time     time.Time
	Attempt  int   // the attempt the change belongs to (1 for the first)
	Err      error // the error that ended an attempt or the task, if any

	Group string // the task's group (Task.Group), or the group of a Note
	Key   string // the task's key (Task.Key), or the key of a Note ("" for the whole group)
	Note  Note   // what happened to a group or key; 0 for a task's state change
	// Breaker is the state a key's breaker entered (Note NoteBreaker).
	Breaker BreakerState
}

// Note says what an [Event] about a group or a key reports.
type Note uint8

// The notes of events about groups and keys.
const (
	// NoteThrottled: a key waits for a token of its rate or a RetryAfter's end.
	NoteThrottled Note = iota + 1
	// NotePaused: Kernel.Pause paused the group, or the key.
	NotePaused
	// NoteResumed: Kernel.Resume resumed the group, or the key.
	NoteResumed
	// NoteBreaker: the key's breaker changed state (Event.Breaker).
	NoteBreaker
	// NoteRetryRefused: Config.RetryBudget refused a retry of the task the event
	// names (TaskID, Attempt: the attempt that failed, Err: its error). Its state
	// change follows: its end, or Retrying for a durable task that waits for the
	// budget.
	NoteRetryRefused
)

// Config configures a [Kernel]. The zero value is valid: every field has a default,
// documented with the field. [New] validates it with [Config.Validate].
type Config struct {
	// MaxConcurrency is the number of tasks that run at once (executor slots), at
	// most 2^24. Executors start on demand and the run queue grows with
	// use, so a large value costs memory only when that much work runs. If zero,
	// 500. Changeable with [Kernel.Update].
	MaxConcurrency int

	// Quotas shares the dispatches between the priorities; each field at most
	// 2^30. If a field is zero: High 17, Normal 2, LowGuaranteed
	// 1. Changeable.
	Quotas Quotas

	// Reserve holds slots for High tasks. Must leave at least one slot for the others.
	// If zero, no reservation. Changeable.
	Reserve Reserve

	// AgeAfter promotes a task that waited longer in its bucket: it is picked as if
	// one level higher (Low as Normal, Normal as High). If zero, no aging. Changeable.
	AgeAfter time.Duration

	// Capacity bounds the tasks of each priority that wait in the kernel — queued
	// (in their bucket, in a group's key queue, held by a paused kind, or picked for
	// the run queue until an executor starts them), delayed or waiting for a retry —
	// each at most 2^24; Stats.Queued shows them. Running tasks are
	// bounded by MaxConcurrency. Submissions are refused (or wait) at the bound, but
	// an accepted task is never refused later: a failed attempt's retry re-enters
	// without a check, so a priority may briefly hold up to its attempts in flight
	// more; and with EvictLow a High task may take a Low task's place. If a field is
	// zero: 10,000 / 30,000 / 10,000. Changeable.
	Capacity ByPriority[int]

	// DegradeAt is the fraction of the total capacity above which only High tasks are
	// admitted. If zero, 0.8; 1 turns degradation off. Changeable.
	DegradeAt float64

	// EvictLow lets a High arrival that finds no room take the place of the newest
	// queued Low task, which ends Evicted with ErrEvicted: the High task holds the
	// evicted task's room (counted against Capacity.Low) until it leaves its
	// bucket, so the total of waiting tasks never exceeds the total capacity. It
	// applies to in-memory tasks; a durable High task waits or is refused like any
	// other. Changeable.
	EvictLow bool

	// Tick is the resolution of the timing wheel: delays, retry backoff and timeouts
	// fire at most one tick late. At least 100 µs, at most 1 min. If zero,
	// 1 ms. Not changeable.
	Tick time.Duration

	// DefaultTimeout applies to tasks whose Timeout is zero. If a field is zero, such
	// tasks have no timeout. Changeable (applies to tasks submitted afterwards).
	DefaultTimeout ByPriority[time.Duration]

	// Retry is the retry policy per priority, for tasks without their own. A zero
	// policy means the defaults (3 attempts, 1 s base, ×2, 30 s max, full jitter); a
	// common choice is Retry.Low = RetryPolicy{MaxAttempts: 1}. Changeable: a retry
	// is decided under the policy in force, tasks submitted earlier included.
	Retry ByPriority[RetryPolicy]

	// RetryBudget limits retries kernel-wide (see RetryBudget). Changeable.
	RetryBudget RetryBudget

	// MaxZombies caps the goroutines left running by tasks that ignored their
	// context past their timeout, whose slots were given to other tasks; at most
	// 2^24. Past the cap a timed-out task keeps its slot until it returns.
	// If zero, 100; -1 means none (a timed-out task always keeps
	// its slot). Changeable.
	MaxZombies int

	// ZombieGrace is how long a zombie may run before it is logged with its stack,
	// and how long Close waits for running functions and callbacks; at most
	// 1 h. If zero, 3 s. Changeable.
	ZombieGrace time.Duration

	// OnTimeoutWorkers is the number of goroutines that run Task.OnTimeout callbacks,
	// at most 1,024. If zero, 4. Not changeable.
	OnTimeoutWorkers int

	// EventBuffer is how many events may wait for OnEvent, at most 2^24;
	// past it events are dropped and counted (Stats.EventsDropped), never blocking
	// the kernel. If zero, 65,536. Not changeable.
	EventBuffer int

	// Clock is the time source. If nil, the real clock. Not changeable. Durable due
	// times are stored on the store's clock when it tells its time ([Kernel.StoreOffset]).
	Clock clock.Clock

	// Name adds the label kernel="<Name>" to every series of the kernel's metrics,
	// so that several kernels can share one Config.Metrics set and one /metrics
	// page. It is at most 64 bytes of ASCII letters, digits, '_', '-' and
	// '.'. Kernels sharing a set must all be named, each differently: [New]
	// refuses a kernel whose name is taken on its set, or which is unnamed while
	// the set holds another kernel (or named while it holds an unnamed one), with
	// a [*ConfigError] for Config.Name. A name is taken from New until the kernel
	// stopped ([Kernel.Shutdown] drained or [Kernel.Close] ended the tasks). If
	// zero, the series carry no kernel label, and the kernel must be alone on its
	// set. Not changeable.
	Name string

	// Metrics receives the kernel's metrics: New registers on it one writer that
	// writes the families of every kernel on the set, each with its # HELP and
	// # TYPE lines. A kernel's series are on a set given here from New until the
	// kernel stopped, then the set leaves them out ([Kernel.WritePrometheus] still
	// writes them). If nil, the kernel makes its own set ([Kernel.Metrics]), which
	// keeps its series after the stop. Never the global set. Not changeable.
	Metrics *metrics.Set

	// Logger logs what matters: zombies, dropped events, shutdown reports. The
	// kernel never calls its handler from the goroutines it depends on: records
	// (level, message, attributes and source intact) wait in a queue of 256 that
	// one goroutine of the kernel hands to the handler; past that, records are
	// dropped and counted (Stats.LogsDropped). A panic in the handler is recovered
	// and counted (Stats.CallbackPanics); Shutdown and Close wait for a blocked
	// handler only within their bounds (ctx, Config.ZombieGrace), then abandon it
	// (Stats.CallbacksAbandoned). If nil, nothing is logged. Not changeable.
	Logger *slog.Logger

	// OnEvent, if set, receives every state change of every task, in order, on one
	// goroutine of its own (never the scheduler's). It must not block for long: when
	// EventBuffer events are waiting, further events are dropped. A panic in it is
	// recovered and counted (Stats.CallbackPanics), and delivery goes on. Shutdown
	// and Close wait for it only as long as their bounds allow. Not changeable.
	OnEvent func(Event)

	// Hooks, if set, is called at durable submits and around every attempt (see
	// [Hooks]; axotel traces tasks with it). If nil, nothing is called. Not changeable.
	Hooks Hooks

	// Store, if set, makes durable tasks possible ([Kernel.Register],
	// [Kernel.SubmitDurable]): their lifecycle is journaled to it in group commits, and
	// [New] reads back the tasks a previous kernel on it left live (see
	// [Kernel.Register] for when they run). The kernel never closes the store. Not
	// changeable.
	Store store.Store

	// SnapshotEvery chooses the durability mode. Zero (the default) is acknowledged
	// mode: a durable submit returns once the group commit holding its task landed,
	// and the journal commits as soon as the previous commit returned. A positive
	// value is periodic snapshot mode: submits return at once and the journal commits
	// every SnapshotEvery (real time), so a crash loses at most the tasks submitted in
	// the last SnapshotEvery — and their completions, which then run again. A
	// positive value needs a Store. Not changeable.
	SnapshotEvery time.Duration

	// StoreTimeout bounds every call to the store (a commit, the recovery at New). If
	// zero, 5 s. Not changeable.
	StoreTimeout time.Duration

	// Owner names this kernel as an owner of a [store.SharedStore] (see there): its tasks'
	// rows carry it, and a kernel that joins under the same name ends the earlier
	// membership at once and takes its tasks back, so a restarted process need not
	// wait for its old lease to end. Two live kernels under one name take each other's
	// tasks in turn: a name given here must be this replica's own, kept across
	// restarts (a pod name, a host and slot). At most OwnerNameMax bytes.
	//
	// If empty, the kernel takes a default name: "ax-", the host name, 6 hex digits of
	// the namespace (host, user and the store's identity, see [store.Identifier]; one
	// namespace per host and user for a store without one) and the lowest slot of the
	// namespace that no live kernel holds. A slot is held with a flock(2) lock on a file
	// under os.UserCacheDir() (or os.TempDir()), which ends with the process however it
	// ends: two live kernels of one host never share a name, in one process or many,
	// and a process restarted after a crash (kill -9 included) takes the dead one's
	// slot, joins under its name and takes its tasks back at once. Close, or a Shutdown
	// that completes, gives the slot back. Should a live kernel that does not see the
	// lock (another host of the same name and machine ID, a container with a home and
	// /tmp of its own) join under the name, this kernel goes on under a generated name
	// at its next commit, with a warning. Without flock(2) (Windows) or with all 64
	// slots held, the name is generated ("ax-" and 12 hex digits), and a crashed
	// kernel's tasks are rescued once its lease ended. A replica restarted on another
	// host needs a stable Owner to take its tasks back at once.
	//
	// Unused with a Store that is not a SharedStore. Not changeable.
	Owner string

	// SharedPool sends every durable task to the pool of a [store.SharedStore], where any
	// kernel on the store with a free slot claims and runs it, this one included (see
	// [DurableTask.Pool]). If false, a durable task goes to the pool only when it asks,
	// or when this kernel has no room for it (Config.Capacity): on a SharedStore a
	// durable submit never waits for room nor is refused for the lack of it. Otherwise
	// it runs here: tasks queued in a busy kernel wait for its slots even while another
	// kernel idles, which SharedPool avoids at the price of a claim (a store
	// transaction) per round of slots. Needs a SharedStore. Not changeable.
	SharedPool bool

	// Lease is how long the store keeps this kernel an owner after its last renewal
	// (every group commit renews it; an idle kernel renews it every Lease/5). A kernel
	// that could not renew for Lease − Lease/3 starts no durable attempt until it
	// renews, so it never starts one its lease may not cover; once the lease has ended
	// the store refuses its commits, and it joins again as a new owner. Live kernels
	// rescue the tasks of an ended owner within about Lease + Lease/3. If zero,
	// 15 s; from 100 ms to 1 h. Unused
	// with a Store that is not a SharedStore. Not changeable.
	Lease time.Duration

	// Groups names the groups tasks may join (Task.Group), each with its limits per
	// key and in total and an optional breaker per key (see [GroupConfig]): at most
	// 1,024, each name 1 to 64 bytes of ASCII letters, digits, '_', '-' and
	// '.' (it labels the group's metrics). New and Update copy the map. If nil, no
	// groups: a task naming one is refused. Changeable: a new limit applies to the
	// next permits; a group removed keeps serving the tasks it holds under its last
	// config, and new tasks naming it are refused.
	Groups map[string]GroupConfig

	// StoreBatch is the most changes in one group commit (the inserts of one
	// SubmitDurableMany are never split). If zero, 4,096 in
	// acknowledged mode and 65,536 in periodic snapshot
	// mode, where a snapshot should hold every change of its interval: the insert,
	// start and end of a short task then become one row write. In snapshot mode,
	// durable submits wait while 4 × StoreBatch changes wait for the store. At most
	// 2^20. Not changeable.
	StoreBatch int

	// MaxResult bounds a task's result ([SetResult]), in bytes; a store that accepts
	// less (a [store.ResultLimiter]) lowers it. If zero, 64 KiB. At most
	// store.ResultMax (1 MiB). Not changeable.
	MaxResult int
}

// Validate reports every invalid field as a [*ConfigError], joined with
// [errors.Join]. The zero Config is valid.
func (c *Config) Validate() error {
	e := fields("Config.")
	check.Upto(e, "MaxConcurrency", c.MaxConcurrency, maxConcurrencyMax)
	check.Upto(e, "Quotas.High", c.Quotas.High, quotaMax)
	check.Upto(e, "Quotas.Normal", c.Quotas.Normal, quotaMax)
	check.Upto(e, "Quotas.LowGuaranteed", c.Quotas.LowGuaranteed, quotaMax)
	conc := cmp.Or(c.MaxConcurrency, maxConcurrencyDefault)
	switch {
	case c.Reserve.High < 0:
		e.Bad("Reserve.High", c.Reserve.High, "must be >= 0")
	case c.MaxConcurrency >= 0 && c.MaxConcurrency <= maxConcurrencyMax && c.Reserve.High >= conc:
		e.Bad("Reserve.High", c.Reserve.High, "must be < MaxConcurrency ("+strconv.Itoa(conc)+")")
	}
	check.NonNeg(e, "AgeAfter", c.AgeAfter)
	check.In(e, "Capacity.High", c.Capacity.High, capacityMax)
	check.In(e, "Capacity.Normal", c.Capacity.Normal, capacityMax)
	check.In(e, "Capacity.Low", c.Capacity.Low, capacityMax)
	check.In(e, "DegradeAt", c.DegradeAt, 1)
	check.ZeroOrIn(e, "Tick", c.Tick, tickMin, tickMax)
	check.NonNeg(e, "DefaultTimeout.High", c.DefaultTimeout.High)
	check.NonNeg(e, "DefaultTimeout.Normal", c.DefaultTimeout.Normal)
	check.NonNeg(e, "DefaultTimeout.Low", c.DefaultTimeout.Low)
	e.Add(c.Retry.High.validate("Config.Retry.High")...)
	e.Add(c.Retry.Normal.validate("Config.Retry.Normal")...)
	e.Add(c.Retry.Low.validate("Config.Retry.Low")...)
	check.NonNeg(e, "RetryBudget.Ratio", c.RetryBudget.Ratio)
	check.NonNeg(e, "RetryBudget.MinPerSecond", c.RetryBudget.MinPerSecond)
	check.NonNeg(e, "RetryBudget.Window", c.RetryBudget.Window)
	check.Between(e, "MaxZombies", c.MaxZombies, -1, maxZombiesMax)
	check.Upto(e, "ZombieGrace", c.ZombieGrace, zombieGraceMax)
	check.Upto(e, "OnTimeoutWorkers", c.OnTimeoutWorkers, onTimeoutWorkersMax)
	check.Upto(e, "EventBuffer", c.EventBuffer, eventBufferMax)
	switch {
	case c.SnapshotEvery < 0:
		e.Bad("SnapshotEvery", c.SnapshotEvery, "must be >= 0")
	case c.SnapshotEvery > 0 && c.Store == nil:
		e.Bad("SnapshotEvery", c.SnapshotEvery, "needs a Store (periodic snapshots are of durable tasks)")
	}
	check.NonNeg(e, "StoreTimeout", c.StoreTimeout)
	check.Upto(e, "StoreBatch", c.StoreBatch, storeBatchMax)
	check.Upto(e, "MaxResult", c.MaxResult, store.ResultMax)
	if _, shared := c.Store.(store.SharedStore); c.SharedPool && !shared {
		e.Bad("SharedPool", c.SharedPool, "needs a Store that is a SharedStore")
	}
	if len(c.Owner) > store.OwnerNameMax {
		e.Bad("Owner", c.Owner, "must be at most "+strconv.Itoa(store.OwnerNameMax)+" bytes (OwnerNameMax)")
	}
	if c.Lease != 0 && (c.Lease < leaseConfigMin || c.Lease > leaseConfigMax) {
		e.Bad("Lease", c.Lease, "must be 0 (the default, 15 s) or from "+leaseConfigMin.String()+" to "+leaseConfigMax.String())
	}
	e.Add(validateGroups(c.Groups)...)
	if !check.Name(c.Name, nameMax) {
		e.Bad("Name", c.Name, "must be at most "+strconv.Itoa(nameMax)+" bytes of ASCII letters, digits, '_', '-' and '.'")
	}
	return e.Err()
}

// Validate returns nil for a policy that [Config.Validate] and the submit calls
// accept, and otherwise a *ConfigError for each bad field (joined), its Field
// starting "RetryPolicy.". Clients that hold a policy for later tasks (a schedule's
// occurrences) call it to refuse a bad one at once.
func (p *RetryPolicy) Validate() error { return errors.Join(p.validate("RetryPolicy")...) }

// validate checks a retry policy; prefix names it ("Config.Retry.Low", "Task.Retry").
func (p *RetryPolicy) validate(prefix string) []error {
	e := fields(prefix + ".")
	check.NonNeg(e, "MaxAttempts", p.MaxAttempts)
	check.NonNeg(e, "Base", p.Base)
	check.Multiplier(e, "Multiplier", p.Multiplier)
	check.NonNeg(e, "Max", p.Max)
	if p.Jitter > JitterNone {
		e.Bad("Jitter", p.Jitter, "must be JitterFull, JitterEqual or JitterNone")
	}
	return e.List()
}

// withDefaults returns the policy with its zero fields filled.
func (p RetryPolicy) withDefaults() RetryPolicy {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, retryMaxAttemptsDefault)
	p.Base = cmp.Or(p.Base, retryBaseDefault)
	p.Multiplier = cmp.Or(p.Multiplier, retryMultiplierDefault)
	p.Max = cmp.Or(p.Max, retryMaxDefault)
	return p
}

// withDefaults returns a copy of c with every zero field resolved. c must be valid.
func (c Config) withDefaults() Config {
	c.MaxConcurrency = cmp.Or(c.MaxConcurrency, maxConcurrencyDefault)
	c.Quotas.High = cmp.Or(c.Quotas.High, quotaHighDefault)
	c.Quotas.Normal = cmp.Or(c.Quotas.Normal, quotaNormalDefault)
	c.Quotas.LowGuaranteed = cmp.Or(c.Quotas.LowGuaranteed, quotaLowDefault)
	c.Capacity.High = cmp.Or(c.Capacity.High, capacityHighDefault)
	c.Capacity.Normal = cmp.Or(c.Capacity.Normal, capacityNormalDefault)
	c.Capacity.Low = cmp.Or(c.Capacity.Low, capacityLowDefault)
	c.DegradeAt = cmp.Or(c.DegradeAt, degradeAtDefault)
	c.Tick = cmp.Or(c.Tick, tickDefault)
	c.Retry.High = c.Retry.High.withDefaults()
	c.Retry.Normal = c.Retry.Normal.withDefaults()
	c.Retry.Low = c.Retry.Low.withDefaults()
	c.RetryBudget.Ratio = cmp.Or(c.RetryBudget.Ratio, retryBudgetRatioDefault)
	c.RetryBudget.MinPerSecond = cmp.Or(c.RetryBudget.MinPerSecond, retryBudgetMinPerSecondDefault)
	c.RetryBudget.Window = cmp.Or(c.RetryBudget.Window, retryBudgetWindowDefault)
	switch c.MaxZombies {
	case 0:
		c.MaxZombies = maxZombiesDefault
	case -1:
		c.MaxZombies = 0
	}
	c.ZombieGrace = cmp.Or(c.ZombieGrace, zombieGraceDefault)
	c.OnTimeoutWorkers = cmp.Or(c.OnTimeoutWorkers, onTimeoutWorkersDefault)
	c.EventBuffer = cmp.Or(c.EventBuffer, eventBufferDefault)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, storeTimeoutDefault)
	c.Lease = cmp.Or(c.Lease, leaseDefault)
	c.MaxResult = cmp.Or(c.MaxResult, maxResultDefault)
	if c.SnapshotEvery > 0 {
		c.StoreBatch = cmp.Or(c.StoreBatch, storeSnapshotBatchDefault)
	} else {
		c.StoreBatch = cmp.Or(c.StoreBatch, storeBatchDefault)
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	return c
}

// totalCapacity is the sum of the per-priority capacities of a resolved config.
func (c *Config) totalCapacity() int { return c.Capacity.High + c.Capacity.Normal + c.Capacity.Low }
