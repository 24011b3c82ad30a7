package kernel

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/store"
)

// Overlap says what a schedule does when an occurrence is due while an earlier one
// of it is still live (queued, running or retrying). The zero value means
// [OverlapSkip].
type Overlap uint8

// The overlap policies.
const (
	// OverlapDefault is the zero value; the kernel treats it as [OverlapSkip].
	OverlapDefault Overlap = iota
	// OverlapSkip fires no occurrence while one is live: the occurrence is counted as
	// skipped ([ScheduleStats.Skipped]) and the next [Fire.Missed] counts it.
	OverlapSkip
	// OverlapQueueOne keeps at most one occurrence waiting behind the live one: it is
	// submitted when the live one ends. A further occurrence due while one waits is
	// skipped.
	OverlapQueueOne
	// OverlapAllow submits every occurrence, whatever is live.
	OverlapAllow
	// OverlapReplace cancels the live occurrences (their context ends with
	// [ErrCanceled], as [Handle.Cancel] does) and submits the new one.
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

// ScheduleOptions configure one schedule of [Kernel.Schedule]. A nil *ScheduleOptions
// means the zero value, whose fields all have defaults.
type ScheduleOptions struct {
	// Name identifies the schedule in Stats.Schedules and events; unique among the
	// live schedules of a kernel, at most ScheduleNameMax bytes. If empty, the kernel
	// makes one ("schedule-" and a sequence number).
	Name string

	// Misfire is what happens to the targets that passed more than Grace before
	// they could fire (the kernel was busy, the machine slept, the schedule was
	// paused). If zero, MisfireOnce.
	Misfire Misfire

	// MaxCatchUp bounds the fires of one catch-up under MisfireAll, at most
	// MaxCatchUpMax. If zero, MaxCatchUpDefault.
	MaxCatchUp int

	// Grace is how late a target may fire and still be on time. If zero,
	// MisfireGraceDefault.
	Grace time.Duration

	// Overlap is what happens to an occurrence due while an earlier one is live. If
	// zero, OverlapSkip.
	Overlap Overlap

	// Jitter delays each fire by a random duration in [0, Jitter), so schedules
	// sharing a time do not all fire at once (the wheel then rounds the fire up to
	// its Config.Tick, as every timer). The delay does not count toward Grace, and
	// Fire.Scheduled is the target without it. If zero, none.
	Jitter time.Duration

	// RunOnStart fires an occurrence when the schedule is added (its Fire.Scheduled
	// is that time), besides the schedule's targets. If false, the first fire is the
	// schedule's first target.
	RunOnStart bool

	// Priority, Timeout, Group, Key and Retry are those of the task each occurrence
	// submits; see [Task]. Group must name a group of Config.Groups.
	Priority Priority
	Timeout  time.Duration
	Group    string
	Key      string
	Retry    *RetryPolicy
}

// validate checks o's fields under rc, naming the bad ones.
func (o *ScheduleOptions) validate(rc *resolved) error {
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &ConfigError{Field: "ScheduleOptions." + field, Value: v, Reason: reason})
	}
	if len(o.Name) > store.ScheduleNameMax {
		bad("Name", len(o.Name), fmt.Sprintf("bytes: must be at most %d (ScheduleNameMax)", store.ScheduleNameMax))
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
		bad("Key", o.Key, "needs a ScheduleOptions.Group")
	}
	if o.Group != "" {
		if _, ok := rc.groups[o.Group]; !ok {
			bad("Group", o.Group, "names no group of Config.Groups")
		}
	}
	if o.Retry != nil {
		errs = append(errs, o.Retry.validate("ScheduleOptions.Retry")...)
	}
	return errors.Join(errs...)
}

// scheduleReady checks opts (validated in place) after the caller's own checks errs:
// it returns them all, joined, or ErrClosed once the kernel stopped; otherwise it
// gives opts a Retry of its own.
func (k *Kernel) scheduleReady(errs []error, opts *ScheduleOptions) error {
	if err := opts.validate(k.rc.Load()); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if opts.Retry != nil {
		r := *opts.Retry
		opts.Retry = &r
	}
	if k.isClosed() {
		return ErrClosed
	}
	return nil
}
