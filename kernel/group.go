package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/internal/keycount"
	"github.com/axsched/ax/internal/rate"
	"github.com/axsched/ax/kernel/internal/check"
)

// Defaults and limits of [GroupConfig].
const (
	keyIdleDefault = time.Minute
	rateBurstMax   = 1 << 20
	groupsMax      = 1024
)

// Rate is a token bucket: N tokens per Per, refilled evenly (one every Per/N), in
// a bucket of Burst tokens. The zero Rate is no limit.
//
// With Burst 1 (the default) the starts are spread evenly, one every Per/N: a window
// of length Per holds at most N starts, which is what an upstream's "N per second"
// quota usually means, and when a start came late, one more (or the tokens of two
// ticks, at rates above one token every two ticks): the wheel wakes a waiting key up
// to a tick after its token, and a start made within two ticks of its token counts as
// made at the token's time, so that the lateness does not slow a backlogged key (as
// golang.org/x/time/rate's reservations keep their times however late the waiter
// wakes). A larger Burst lets up to Burst starts go at once after a quiet spell (as
// x/time/rate's burst does), so a window of length Per may then hold up to
// N + Burst - 1 starts (and as many more after a late one).
//
// A task takes its token with its permit, before it enters its bucket, and may
// start later than that while a saturated kernel keeps it waiting for a slot; such
// a late start is the "one more" above. While it waits, its key (or its group, for
// Total.Rate) grants no other permit under the rate, so that a backlog never
// releases more than that one late start beside the rate's own.
type Rate struct {
	// N tokens per Per. If zero, no rate limit (Per and Burst must be zero too).
	N int
	// Per is the period N tokens are spread over. Must be > 0 when N is set, and
	// Per/N at least a nanosecond.
	Per time.Duration
	// Burst is the bucket's size, at most 2^20. If zero, 1.
	Burst int
}

// Limits bounds the attempts of a key or of a whole group. The zero Limits is no
// limit.
type Limits struct {
	// Concurrency is the most attempts running at once. If zero, no limit.
	Concurrency int
	// Rate bounds how fast attempts start. If zero, no limit.
	Rate Rate
}

// GroupConfig configures a group of tasks (Config.Groups): limits per key and for
// the whole group, a bound on the tasks waiting per key, and an optional circuit
// breaker per key. A task names its group and key with Task.Group and Task.Key
// (Batch and Map members with BatchOptions.Group and Key). The limits hold per
// kernel: kernels sharing a store each apply them to the tasks they run.
type GroupConfig struct {
	// PerKey limits each key of the group on its own. If zero, no limit.
	PerKey Limits
	// Total limits the group, all keys together. If zero, no limit.
	Total Limits
	// MaxWaiting bounds, per key, the tasks submitted and not yet started
	// (waiting for their permit, delayed or waiting for a retry): a submission past
	// it fails with [ErrGroupFull]. Retries are never refused. If zero, no bound
	// other than Config.Capacity.
	MaxWaiting int
	// KeyIdle is how long the state of a key (its rate bucket, its breaker) is kept
	// after the key was last used, while nothing of it waits or runs. A forgotten key
	// starts again with a full bucket and a closed breaker. If zero,
	// 1 min.
	KeyIdle time.Duration
	// Breaker, if set, gives each key a circuit breaker (see [BreakerConfig]). If
	// nil, none.
	Breaker *BreakerConfig
	// Ordered, if set, starts each key's tasks one at a time in the order they came
	// to the key (at submit, or when their Delay or At is due), whatever their
	// priorities; a task holds its key until it ends, its retries and their backoffs
	// included. PerKey.Concurrency must be 0 or 1. The order holds within one
	// kernel: pool tasks claimed here, and other kernels on the store, are outside it
	// (see docs/groups.md). Changeable: set, it orders the tasks waiting (a task
	// retrying then holds nothing); cleared, it frees every key at once. If false,
	// a key's tasks start by priority, FIFO within one, a retry behind later tasks.
	Ordered bool
}

// RateLimitedError is returned by a task's function to say that the upstream
// asked it to slow down (an HTTP 429 or 503 with Retry-After): the task's key
// pauses for RetryAfter (no attempt of the key starts until then), and the task
// goes back to the head of its key's queue without spending an attempt or the
// retry budget. Returned by a task without a Group, it is an error like any other.
type RateLimitedError struct {
	RetryAfter time.Duration // how long the key pauses; <= 0 means a tick
	Err        error         // the upstream's answer, if any
}

// Error implements error.
func (e *RateLimitedError) Error() string {
	s := "kernel: rate limited, retry after " + e.RetryAfter.String()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *RateLimitedError) Unwrap() error { return e.Err }

// Selector chooses the work [Kernel.Pause] and [Kernel.Resume] apply to: a group
// (Group), one key of a group (Group and Key), a priority (Priority), or the
// durable tasks of a kind (Kind). Exactly one of Group, Priority and Kind is set.
type Selector struct {
	Group    string
	Key      string
	Priority Priority // PriorityDefault means none; use Normal for Normal
	Kind     string
}

// String returns the selector as a short description ("group x", "key x/y", ...).
func (s Selector) String() string {
	switch {
	case s.Group != "" && s.Key != "":
		return "key " + strconv.Quote(s.Group) + "/" + strconv.Quote(s.Key)
	case s.Group != "":
		return "group " + strconv.Quote(s.Group)
	case s.Kind != "":
		return "kind " + strconv.Quote(s.Kind)
	default:
		return "priority " + s.Priority.String()
	}
}

// validate checks that s names one thing.
func (s Selector) validate() error {
	n := 0
	if s.Group != "" {
		n++
	}
	if s.Priority != PriorityDefault {
		n++
		if !s.Priority.Valid() {
			return &ConfigError{Field: "Selector.Priority", Value: s.Priority, Reason: "must be High, Normal or Low"}
		}
	}
	if s.Kind != "" {
		n++
	}
	switch {
	case s.Key != "" && s.Group == "":
		return &ConfigError{Field: "Selector.Key", Value: s.Key, Reason: "needs a Group"}
	case n != 1:
		return &ConfigError{Field: "Selector", Value: s, Reason: "must set exactly one of Group, Priority and Kind"}
	}
	return nil
}

// Pause stops the starts of the work sel selects: a group's tasks, one key's, a
// priority's (grouped or not) or a durable kind's. Paused tasks stay queued, in
// their order, and count against Config.Capacity; tasks already running go on,
// and tasks already handed to the run queue (at most the lookahead) may still
// start. Submissions go on being accepted. A paused group or key pauses tasks
// submitted later too; pausing a key that has no task yet holds its state until
// it is resumed. A durable task of a paused kind that belongs to a group holds no
// permit of its key while it waits, and waits for one again once resumed. Pause
// blocks until the loop applied it, and returns
// [ErrClosed] once the kernel has stopped, a *ConfigError for a bad selector, and
// an error for a group not in Config.Groups. Pausing what is paused does nothing.
//
// A paused task waits through [Kernel.Shutdown], which then returns when its ctx
// ends unless the work is resumed; [Kernel.Close] ends paused tasks Canceled with
// [ErrClosed], as it does every queued task.
func (k *Kernel) Pause(sel Selector) error { return k.pauseResume(sel, true) }

// Resume undoes [Kernel.Pause] for sel: the selected tasks start again in their
// order, under their limits. Resuming what is not paused does nothing. It blocks
// until the loop applied it and returns the errors of Pause.
func (k *Kernel) Resume(sel Selector) error { return k.pauseResume(sel, false) }

func (k *Kernel) pauseResume(sel Selector, pause bool) error {
	if err := sel.validate(); err != nil {
		return err
	}
	if sel.Group != "" {
		if _, ok := k.rc.Load().groups[sel.Group]; !ok {
			return fmt.Errorf("kernel: %v: no such group in Config.Groups", sel)
		}
	}
	ack := make(chan error, 1)
	k.control(ctrlMsg{kind: ctrlPause, sel: sel, pause: pause, ack: ack})
	select {
	case err := <-ack:
		return err
	case <-k.loopDone:
		select {
		case err := <-ack:
			return err
		default:
			return ErrClosed
		}
	}
}

// validateGroups checks Config.Groups.
func validateGroups(groups map[string]GroupConfig) []error {
	e := fields("Config.Groups")
	if len(groups) > groupsMax {
		e.Bad("", len(groups), "must hold at most "+strconv.Itoa(groupsMax)+" groups")
	}
	for name, g := range groups {
		ge := fields("Config.Groups[" + strconv.Quote(name) + "]")
		if name == "" || !check.Name(name, nameMax) {
			ge.Bad("", nil, "a group's name must be 1 to "+strconv.Itoa(nameMax)+" bytes of ASCII letters, digits, '_', '-' and '.'")
		}
		ge.Add(g.PerKey.validate(ge.Prefix + ".PerKey")...)
		if g.Ordered && g.PerKey.Concurrency > 1 {
			ge.Bad(".PerKey.Concurrency", g.PerKey.Concurrency, "must be 0 or 1 when Ordered is set")
		}
		ge.Add(g.Total.validate(ge.Prefix + ".Total")...)
		check.In(ge, ".MaxWaiting", g.MaxWaiting, capacityMax)
		check.NonNeg(ge, ".KeyIdle", g.KeyIdle)
		if g.Breaker != nil {
			ge.Add(g.Breaker.validate(ge.Prefix + ".Breaker")...)
		}
		e.Add(ge.List()...)
	}
	return e.List()
}

// validate checks limits; prefix names them.
func (l *Limits) validate(prefix string) []error {
	e := fields(prefix + ".")
	check.In(e, "Concurrency", l.Concurrency, maxConcurrencyMax)
	r := l.Rate
	switch {
	case r.N < 0:
		e.Bad("Rate.N", r.N, "must be >= 0")
	case r.N == 0 && r.Per != 0:
		e.Bad("Rate.Per", r.Per, "must be zero when Rate.N is")
	case r.N == 0 && r.Burst != 0:
		e.Bad("Rate.Burst", r.Burst, "must be zero when Rate.N is")
	case r.N > 0 && r.Per <= 0:
		e.Bad("Rate.Per", r.Per, "must be > 0 when Rate.N is set")
	case r.N > 0 && r.Per/time.Duration(r.N) == 0:
		e.Bad("Rate.N", r.N, "must be at most Rate.Per in nanoseconds (one token per ns)")
	}
	check.In(e, "Rate.Burst", r.Burst, rateBurstMax)
	return e.List()
}

// cloneGroups deep-copies Config.Groups (each Breaker included).
func cloneGroups(groups map[string]GroupConfig) map[string]GroupConfig {
	if groups == nil {
		return nil
	}
	out := make(map[string]GroupConfig, len(groups))
	for name, g := range groups {
		if g.Breaker != nil {
			b := *g.Breaker
			g.Breaker = &b
		}
		out[name] = g
	}
	return out
}

// groupDef is a group's resolved config, shared by submitters and the loop. The
// counts of waiting tasks per key (for MaxWaiting) outlive config updates: the
// def of a group that stays in the config keeps its counts.
type groupDef struct {
	name    string
	cfg     GroupConfig      // defaults applied; Breaker deep-copied
	counts  *keycount.Counts // nil when MaxWaiting is zero
	perKey  rate.Limit
	total   rate.Limit
	breaker *BreakerConfig  // cfg.Breaker with defaults, or nil
	brc     *breaker.Config // the parameters of breaker's arithmetic, or nil
}

// resolveGroups builds the group defs of c, reusing prev's counts.
func resolveGroups(c *Config, prev map[string]*groupDef) map[string]*groupDef {
	if len(c.Groups) == 0 {
		return nil
	}
	out := make(map[string]*groupDef, len(c.Groups))
	for name, g := range c.Groups {
		g.KeyIdle = cmp.Or(g.KeyIdle, keyIdleDefault)
		if g.Ordered {
			g.PerKey.Concurrency = 1
		}
		d := &groupDef{name: name, cfg: g, perKey: g.PerKey.Rate.limit(c.Tick), total: g.Total.Rate.limit(c.Tick)}
		if g.Breaker != nil {
			b := g.Breaker.withDefaults()
			d.breaker = &b
			d.brc = b.params()
			d.cfg.Breaker = &b
		}
		if g.MaxWaiting > 0 {
			if p := prev[name]; p != nil && p.counts != nil {
				d.counts = p.counts
			} else {
				d.counts = keycount.New()
			}
		}
		out[name] = d
	}
	return out
}

// rateLateTicks is how late, in ticks of the wheel, a key's start may come after
// the token it waited for and still count at the token's time (rate.Limit.Late):
// one tick for the wheel's rounding of a wake-up up to its tick, one for the
// loop's own wake-up latency.
const rateLateTicks = 2

// limit returns r as the rate leaf computes it, on a wheel whose tick is tick.
// r must be valid.
func (r Rate) limit(tick time.Duration) rate.Limit {
	return rate.NewLimit(r.N, r.Per, r.Burst, tick*rateLateTicks)
}

// groupOf resolves t's group for a submission under rc: nil for a task without
// one, or a *ConfigError naming Task.Group or Task.Key.
func groupOf(t *Task, rc *resolved) (*groupDef, error) {
	if t.Group == "" {
		if t.Key != "" {
			return nil, &ConfigError{Field: "Task.Key", Value: t.Key, Reason: "needs a Task.Group"}
		}
		return nil, nil
	}
	d, ok := rc.groups[t.Group]
	if !ok {
		return nil, &ConfigError{Field: "Task.Group", Value: t.Group, Reason: "names no group of Config.Groups"}
	}
	return d, nil
}

// countWaiting counts a new task of group d and key in its key's waiting tasks,
// and returns ErrGroupFull when MaxWaiting is reached.
func countWaiting(d *groupDef, key string, n int) error {
	if d == nil || d.counts == nil {
		return nil
	}
	if !d.counts.Add(key, int32(n), int32(d.cfg.MaxWaiting)) {
		return fmt.Errorf("%w: group %q, key %q holds %d waiting tasks (MaxWaiting)", ErrGroupFull, d.name, key, d.cfg.MaxWaiting)
	}
	return nil
}

// isRateLimited returns the pause a RateLimitedError in err asks for.
func isRateLimited(err error) (time.Duration, bool) {
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		return 0, false
	}
	return rl.RetryAfter, true
}

// canceledByKernel reports whether err is the context cancellation of Cancel or
// Close rather than a failure of the upstream.
func canceledByKernel(err error) bool {
	return errors.Is(err, context.Canceled)
}

// countSome counts up to n new tasks of group d and key in its key's waiting
// tasks, as many as MaxWaiting allows, and returns how many it counted: at least
// one, or none with ErrGroupFull.
func countSome(d *groupDef, key string, n int64) (int64, error) {
	took, had := d.counts.AddSome(key, n, int32(d.cfg.MaxWaiting))
	if took == 0 {
		return 0, fmt.Errorf("%w: group %q, key %q holds %d waiting tasks (MaxWaiting)", ErrGroupFull, d.name, key, had)
	}
	return took, nil
}
