package flow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/axsched/ax/kernel"
)

// StageFunc is the work of a plain stage. in reads the results of the stages it
// follows. The []byte it returns with a nil error is the stage's result (at most
// 1 MiB; nil is none), readable by the stages after it; it must not be modified
// afterwards. ctx is the context of the stage's task: it ends at the attempt's
// timeout, at [Handle.Cancel] (or [Durable.Cancel]) and when the kernel closes,
// and carries [kernel.TaskInfo].
type StageFunc func(ctx context.Context, in Inputs) ([]byte, error)

// CountFunc returns how many shards a sharded stage runs: at least 1 and at most
// ShardOptions.MaxShards. It runs when the stage starts, as a task of the stage
// (its priority, group, timeout and retries); an error is retried as the task's
// would be, a panic or a count out of range fails the stage ([ErrShardCount])
// with none of its shards started.
type CountFunc func(ctx context.Context, in Inputs) (int, error)

// ShardFunc is the work of one shard of a sharded stage. Each shard is a task of
// its own, retried alone when it fails.
type ShardFunc func(ctx context.Context, s Shard, in Inputs) error

// Shard says which part of a sharded stage's work a [ShardFunc] does.
type Shard struct {
	Index int // 0 <= Index < Total
	Total int // the count the stage's CountFunc returned
}

// Flow is a definition: named stages and the stages each one waits for. Build
// it with [New], [Flow.Stage] and [Flow.Sharded], then start runs of it with
// [Run]; one Flow may be run many times and concurrently. Its methods are not
// safe for concurrent use while it is built; once built, it must not be
// changed while a Run call reads it. The zero Flow is an empty flow named "".
type Flow struct {
	name   string
	stages []stageDef
	errs   []error // bad options found by Stage and Sharded
}

// stageDef is one stage of a definition.
type stageDef struct {
	name  string
	opts  StageOptions
	run   StageFunc // a plain stage
	count CountFunc // a sharded stage: count and shard are set
	shard ShardFunc
	max   int // MaxShards resolved
	par   int // MaxParallel; 0: all
}

// New returns an empty flow named name (used in errors).
func New(name string) *Flow { return &Flow{name: name} }

// Name returns the flow's name.
func (f *Flow) Name() string { return f.name }

// Stage adds a plain stage: one task that runs run once every stage of
// opts.After succeeded. A nil run or a bad option is reported by [Run] and
// [Flow.Validate]. It returns f, so that calls chain.
func (f *Flow) Stage(name string, run StageFunc, opts *StageOptions) *Flow {
	d := stageDef{name: name, run: run}
	if opts != nil {
		d.opts = *opts
		d.opts.After = append([]string(nil), opts.After...)
	}
	if run == nil {
		f.errs = append(f.errs, &DefError{Flow: f.name, Stage: name, Err: errors.New("flow: nil StageFunc")})
	}
	f.add(d, "flow.StageOptions")
	return f
}

// Sharded adds a sharded stage: once every stage of opts.After succeeded, count
// says how many shards to run, and run runs once per shard, each shard a task of
// its own; the stage succeeds when every shard did. Nil funcs and bad options are
// reported by [Run] and [Flow.Validate]. It returns f.
func (f *Flow) Sharded(name string, count CountFunc, run ShardFunc, opts *ShardOptions) *Flow {
	d := stageDef{name: name, count: count, shard: run, max: maxShardsDefault}
	var o ShardOptions
	if opts != nil {
		o = *opts
		o.After = append([]string(nil), opts.After...)
	}
	d.opts = o.StageOptions
	if count == nil {
		f.errs = append(f.errs, &DefError{Flow: f.name, Stage: name, Err: errors.New("flow: nil CountFunc")})
	}
	if run == nil {
		f.errs = append(f.errs, &DefError{Flow: f.name, Stage: name, Err: errors.New("flow: nil ShardFunc")})
	}
	switch {
	case o.MaxShards < 0 || o.MaxShards > maxShardsMax:
		f.errs = append(f.errs, f.optErr(name, "flow.ShardOptions.MaxShards", o.MaxShards, fmt.Sprintf("must be in [0, %d]", maxShardsMax)))
	case o.MaxShards > 0:
		d.max = o.MaxShards
	}
	if o.MaxParallel < 0 {
		f.errs = append(f.errs, f.optErr(name, "flow.ShardOptions.MaxParallel", o.MaxParallel, "must be >= 0"))
	}
	d.par = o.MaxParallel
	f.add(d, "flow.ShardOptions")
	return f
}

func (f *Flow) optErr(stage, field string, v any, reason string) error {
	return &DefError{Flow: f.name, Stage: stage, Err: &kernel.ConfigError{Field: field, Value: v, Reason: reason}}
}

// add appends d after checking its name and its task options.
func (f *Flow) add(d stageDef, prefix string) {
	if d.name == "" {
		f.errs = append(f.errs, &DefError{Flow: f.name, Err: errors.New("flow: a stage with an empty name")})
	}
	for _, err := range d.opts.validate(prefix) {
		f.errs = append(f.errs, &DefError{Flow: f.name, Stage: d.name, Err: err})
	}
	f.stages = append(f.stages, d)
}

// Validate reports what [Run] would refuse in f: no stage, a stage without a
// name, two stages of one name, a dependency on an unknown stage, a cycle, a
// nil func or a bad option. Each problem is a [*DefError] naming the stage;
// they are joined. It does not block and changes nothing.
func (f *Flow) Validate() error {
	_, err := f.graph()
	return err
}

// graph validates f and returns, for each stage, the indexes of the stages that
// depend on it.
func (f *Flow) graph() ([][]int, error) {
	errs := append([]error(nil), f.errs...)
	if len(f.stages) == 0 {
		return nil, &DefError{Flow: f.name, Err: ErrEmpty}
	}
	if len(f.stages) > maxStages {
		return nil, &DefError{Flow: f.name, Err: fmt.Errorf("flow: %d stages: at most %d", len(f.stages), maxStages)}
	}
	idx := make(map[string]int, len(f.stages))
	for i, d := range f.stages {
		if _, dup := idx[d.name]; dup {
			errs = append(errs, &DefError{Flow: f.name, Stage: d.name, Err: ErrDuplicate})
			continue
		}
		idx[d.name] = i
	}
	next := make([][]int, len(f.stages))
	for i, d := range f.stages {
		seen := make(map[string]bool, len(d.opts.After))
		for _, a := range d.opts.After {
			j, ok := idx[a]
			switch {
			case !ok:
				errs = append(errs, &DefError{Flow: f.name, Stage: d.name, Err: ErrUnknown, Detail: "depends on " + strconv.Quote(a)})
			case seen[a]:
				// Named twice: one edge.
			default:
				seen[a] = true
				next[j] = append(next[j], i)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cyc := cycle(next); cyc != nil {
		names := make([]string, len(cyc))
		for i, s := range cyc {
			names[i] = strconv.Quote(f.stages[s].name)
		}
		return nil, &DefError{Flow: f.name, Stage: f.stages[cyc[0]].name, Err: ErrCycle, Detail: strings.Join(names, " -> ")}
	}
	return next, nil
}

// cycle returns the stages of one cycle of the graph next (edges from a stage
// to those that follow it), the first repeated at the end, or nil when there is
// none. Iterative, so that a long chain does not grow the stack.
func cycle(next [][]int) []int {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(next))
	parent := make([]int, len(next))
	type frame struct{ v, i int }
	for s := range next {
		if color[s] != white {
			continue
		}
		stack := []frame{{s, 0}}
		color[s] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.i == len(next[top.v]) {
				color[top.v] = black
				stack = stack[:len(stack)-1]
				continue
			}
			w := next[top.v][top.i]
			top.i++
			switch color[w] {
			case white:
				color[w] = grey
				parent[w] = top.v
				stack = append(stack, frame{w, 0})
			case grey:
				// top.v -> w closes a cycle: w ... top.v -> w.
				var path []int
				for v := top.v; v != w; v = parent[v] {
					path = append(path, v)
				}
				path = append(path, w)
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return append(path, w)
			}
		}
	}
	return nil
}
