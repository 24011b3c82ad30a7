package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// Misfire says what a schedule does with the targets it missed: targets that passed
// more than the schedule's grace before they could fire (the process was down, the
// schedule was paused, the scheduler was held up). A target that fires within the
// grace after its time is not misfired and fires normally under every policy. The
// zero value means [MisfireOnce].
type Misfire uint8

// The misfire policies.
const (
	// MisfireDefault is the zero value, treated as [MisfireOnce].
	MisfireDefault Misfire = iota
	// MisfireOnce fires the missed targets as one: the latest of them fires, and its
	// [Fire.Missed] counts the others. When a target within the grace is due as well,
	// that one fires instead and counts every missed one.
	MisfireOnce
	// MisfireSkip fires none of the missed targets: the schedule resumes at its next
	// target, and the next [Fire.Missed] counts them.
	MisfireSkip
	// MisfireAll fires every missed target, in order, at most Options.MaxCatchUp of
	// them (the latest ones); the first fire's [Fire.Missed] counts the earlier ones,
	// which do not fire.
	MisfireAll
)

// String returns "once", "skip" or "all" (the zero value is "once").
func (m Misfire) String() string {
	switch m {
	case MisfireOnce, MisfireDefault:
		return "once"
	case MisfireSkip:
		return "skip"
	case MisfireAll:
		return "all"
	default:
		return "misfire(" + strconv.Itoa(int(m)) + ")"
	}
}

// Valid reports whether m is one of the defined policies (or the zero value).
func (m Misfire) Valid() bool { return m <= MisfireAll }

// Overlap says what a schedule does when an occurrence is due while an earlier one
// of it is still live (queued, running or retrying in the kernel). The zero value
// means [OverlapSkip].
type Overlap uint8

// The overlap policies.
const (
	// OverlapDefault is the zero value, treated as [OverlapSkip].
	OverlapDefault Overlap = iota
	// OverlapSkip fires no occurrence while one is live: the occurrence is counted
	// as skipped ([Stats.Skipped]) and the next [Fire.Missed] counts it.
	OverlapSkip
	// OverlapQueueOne keeps at most one occurrence waiting behind the live one: it is
	// submitted when the live one ends. A further occurrence due while one waits is
	// skipped.
	OverlapQueueOne
	// OverlapAllow submits every occurrence, whatever is live.
	OverlapAllow
	// OverlapReplace cancels the live occurrences (their context ends with
	// kernel.ErrCanceled, as [kernel.Handle.Cancel] does) and submits the new one.
	OverlapReplace
)

// String returns the policy's name.
func (o Overlap) String() string {
	switch o {
	case OverlapSkip, OverlapDefault:
		return "skip"
	case OverlapQueueOne:
		return "queue-one"
	case OverlapAllow:
		return "allow"
	case OverlapReplace:
		return "replace"
	default:
		return "overlap(" + strconv.Itoa(int(o)) + ")"
	}
}

// Valid reports whether o is one of the defined policies (or the zero value).
func (o Overlap) Valid() bool { return o <= OverlapReplace }

// Limits and defaults of [Options].
const (
	// NameMax is the longest schedule name, in bytes.
	NameMax = store.ScheduleNameMax
	// MaxCatchUpMax is the most fires one catch-up may be configured to make.
	MaxCatchUpMax = 10_000

	maxCatchUpDefault = 100
	graceDefault      = time.Minute
)

// Options configure one schedule of [Scheduler.Add] or [Scheduler.AddDurable]. A
// nil *Options means the zero value, whose fields all have defaults.
type Options struct {
	// Name identifies the schedule in [Scheduler.Stats] and events: unique among the
	// live schedules of a scheduler, at most [NameMax] bytes. If empty, the scheduler
	// makes one ("schedule-" and a sequence number); a durable schedule requires one.
	Name string

	// Misfire is what happens to the targets that passed more than Grace before they
	// could fire. If zero, MisfireOnce.
	Misfire Misfire

	// MaxCatchUp bounds the fires of one catch-up under MisfireAll, at most
	// [MaxCatchUpMax]. If zero, 100.
	MaxCatchUp int

	// Grace is how late a target may fire and still be on time. If zero, a minute.
	Grace time.Duration

	// Overlap is what happens to an occurrence due while an earlier one is live. If
	// zero, OverlapSkip.
	Overlap Overlap

	// Jitter delays each fire by a random duration in [0, Jitter), so schedules
	// sharing a time do not all fire at once (the scheduler's wheel then rounds the
	// fire up to its Config.Tick, as every timer). The delay does not count toward
	// Grace, and Fire.Scheduled is the target without it. If zero, none.
	Jitter time.Duration

	// RunOnStart fires an occurrence when the schedule is added (its Fire.Scheduled
	// is that time), besides the schedule's targets. If false, the first fire is the
	// schedule's first target.
	RunOnStart bool

	// Priority, Timeout, Group, Key and Retry are those of the task each occurrence
	// submits; see [kernel.Task]. Add refuses a Group that is not in the kernel's
	// Config.Groups and a Retry that [kernel.RetryPolicy.Validate] refuses; an
	// occurrence the kernel refuses later (its group removed by an Update) is counted
	// as refused ([Stats.Refused]).
	Priority kernel.Priority
	Timeout  time.Duration
	Group    string
	Key      string
	Retry    *kernel.RetryPolicy
}

// validate checks o's fields, naming the bad ones.
func (o *Options) validate() error {
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &kernel.ConfigError{Field: "schedule.Options." + field, Value: v, Reason: reason})
	}
	if len(o.Name) > NameMax {
		bad("Name", len(o.Name), fmt.Sprintf("bytes: must be at most %d (NameMax)", NameMax))
	}
	if !o.Misfire.Valid() {
		bad("Misfire", o.Misfire, "must be MisfireOnce, MisfireSkip or MisfireAll")
	}
	if o.MaxCatchUp < 0 || o.MaxCatchUp > MaxCatchUpMax {
		bad("MaxCatchUp", o.MaxCatchUp, fmt.Sprintf("must be in [0, %d] (MaxCatchUpMax)", MaxCatchUpMax))
	}
	if o.Grace < 0 {
		bad("Grace", o.Grace, "must be >= 0")
	}
	if !o.Overlap.Valid() {
		bad("Overlap", o.Overlap, "must be OverlapSkip, OverlapQueueOne, OverlapAllow or OverlapReplace")
	}
	if o.Jitter < 0 {
		bad("Jitter", o.Jitter, "must be >= 0")
	}
	if !o.Priority.Valid() {
		bad("Priority", o.Priority, "must be High, Normal or Low")
	}
	if o.Timeout < 0 {
		bad("Timeout", o.Timeout, "must be >= 0")
	}
	if o.Group == "" && o.Key != "" {
		bad("Key", o.Key, "needs an Options.Group")
	}
	if o.Retry != nil {
		r := *o.Retry
		o.Retry = &r
		for _, err := range unjoin(r.Validate()) {
			var ce *kernel.ConfigError
			if errors.As(err, &ce) {
				bad("Retry"+strings.TrimPrefix(ce.Field, "RetryPolicy"), ce.Value, ce.Reason)
			}
		}
	}
	return errors.Join(errs...)
}

// unjoin returns the errors err joins (errors.Join), err alone, or none for nil.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// checkGroup returns a *kernel.ConfigError when group is not empty and names no
// group of the kernel's Config.Groups (read from [kernel.Kernel.Stats]).
func (s *Scheduler) checkGroup(group string) error {
	if group == "" {
		return nil
	}
	if _, ok := s.k.Stats().Groups[group]; ok {
		return nil
	}
	return &kernel.ConfigError{Field: "schedule.Options.Group", Value: group, Reason: "is not a group of the kernel's Config.Groups"}
}
