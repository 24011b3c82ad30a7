package flow

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
)

// Limits of a flow definition.
const (
	// maxStages bounds the stages of one flow.
	maxStages = 10_000
	// maxShardsDefault is ShardOptions.MaxShards when zero; maxShardsMax its bound.
	maxShardsDefault = 1000
	maxShardsMax     = 1 << 20
	// resultMax bounds a stage's result, in bytes.
	resultMax = 1 << 20
)

// StageOptions configure a stage's task: the fields of [kernel.Task] of the same
// names, so that a flow's stage obeys the limits of any task of its priority and
// group. A nil *StageOptions means the zero value.
type StageOptions struct {
	// After names the stages that must succeed before this one starts. If empty,
	// the stage starts when the run starts.
	After []string

	// Priority of the stage's tasks. If zero, Normal.
	Priority kernel.Priority
	// Timeout bounds each attempt of each task of the stage. If zero, the
	// kernel's Config.DefaultTimeout for the priority.
	Timeout time.Duration
	// Group and Key put the stage's tasks in a group of the kernel's
	// Config.Groups under a key (see [kernel.Task.Group]). A group the kernel
	// does not know fails the stage when its first task is submitted. If Group
	// is empty, no group (Key must be empty too).
	Group, Key string
	// Retry replaces the kernel's Config.Retry for each task of the stage: a
	// shard that fails is retried alone, under it. If nil, Config.Retry applies.
	Retry *kernel.RetryPolicy
}

// ShardOptions configure a sharded stage ([Flow.Sharded]). A nil *ShardOptions
// means the zero value.
type ShardOptions struct {
	StageOptions

	// MaxShards bounds the count the stage's CountFunc may return, at most
	// 1,048,576. If zero, 1000.
	MaxShards int

	// MaxParallel bounds the shards of the stage in the kernel at once (queued,
	// running or retrying); 1 runs them one at a time in index order. Shards are
	// submitted in index order, so they start in that order among themselves
	// and share the kernel's slots with other work by its priority quotas. If
	// zero, every shard is submitted at once.
	MaxParallel int
}

// Policy says what a run does when a stage fails.
type Policy uint8

// The failure policies.
const (
	// FailFast, the zero value, ends the run Failed at the first stage that
	// fails: the stages in the kernel are cancelled and no other stage starts.
	FailFast Policy = iota
	// ContinueIndependent skips the stages that depend, directly or not, on a
	// failed stage and runs the others to their end; the run then ends Failed.
	ContinueIndependent
)

// String returns "fail-fast" or "continue-independent".
func (p Policy) String() string {
	switch p {
	case FailFast:
		return "fail-fast"
	case ContinueIndependent:
		return "continue-independent"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Options configure one run of a flow. A nil *Options means the zero value.
type Options struct {
	// OnFailure is the failure policy. If zero, FailFast.
	OnFailure Policy
}

// validate checks o's fields, naming the bad ones after prefix.
func (o *StageOptions) validate(prefix string) []error {
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &kernel.ConfigError{Field: prefix + "." + field, Value: v, Reason: reason})
	}
	if !o.Priority.Valid() {
		bad("Priority", o.Priority, "must be High, Normal or Low")
	}
	if o.Timeout < 0 {
		bad("Timeout", o.Timeout, "must be >= 0")
	}
	if o.Group == "" && o.Key != "" {
		bad("Key", o.Key, "needs a Group")
	}
	if o.Retry != nil {
		for _, err := range unjoin(o.Retry.Validate()) {
			var ce *kernel.ConfigError
			if errors.As(err, &ce) {
				bad("Retry"+strings.TrimPrefix(ce.Field, "RetryPolicy"), ce.Value, ce.Reason)
			} else {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// unjoin returns the errors err joins (errors.Join), err alone, or none for nil.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
