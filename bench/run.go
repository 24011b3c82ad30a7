package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of [Options].
const (
	RepsDefault       = 3
	RunTimeoutDefault = 10 * time.Minute
)

// Options say what [Run] runs.
type Options struct {
	// Scenarios names the scenarios; "all" means every one. Required.
	Scenarios []string
	// Executors names the executors; empty or "all" means every registered one.
	// A scenario runs on those it accepts.
	Executors []string
	// Params override the scenarios' defaults where not zero.
	Params Params
	// Reps is how often each scenario runs on each executor. If zero, RepsDefault.
	Reps int
	// InProcess runs every repetition in this process instead of a fresh one
	// (for tests; figures are then disturbed by earlier runs).
	InProcess bool
	// Executable is the program re-run for each repetition with [ChildArg];
	// it must call [ServeChild] then. If empty, os.Executable().
	Executable string
	// RunTimeout bounds one repetition. If zero, RunTimeoutDefault.
	RunTimeout time.Duration
	// ProfileDir, if not empty, is a directory where each repetition in a fresh
	// process writes its CPU profile, as SCENARIO-EXECUTOR-REP.pprof (for
	// `go tool pprof`). It is ignored with InProcess.
	ProfileDir string
	// Stderr receives the children's standard error. If nil, os.Stderr.
	Stderr io.Writer
	// Progress, if not nil, is called after each repetition, from Run's goroutine.
	Progress func(Progress)
}

// Progress is where a [Run] stands.
type Progress struct {
	Done, Total        int
	Scenario, Executor string
	Rep                int
	Err                error // the repetition's error, if it failed
}

// Plan is what [Run] will run: each scenario with its resolved parameters and
// the executors it accepts.
type Plan struct {
	Scenario  Scenario
	Params    Params
	Executors []Factory
}

// NewPlan checks opts against reg and returns the plan of a run.
func NewPlan(reg *Registry, opts Options) ([]Plan, error) {
	if err := opts.Params.Validate(); err != nil {
		return nil, err
	}
	if opts.Reps < 0 {
		return nil, fmt.Errorf("bench: Options.Reps = %d: must be >= 0", opts.Reps)
	}
	if len(opts.Scenarios) == 0 {
		return nil, errors.New("bench: no scenario named")
	}
	var scs []Scenario
	for _, name := range opts.Scenarios {
		if name == "all" {
			scs = reg.Scenarios()
			break
		}
		sc, ok := reg.Scenario(name)
		if !ok {
			return nil, fmt.Errorf("bench: unknown scenario %q (have %s)", name, names(reg.Scenarios(), func(s Scenario) string { return s.Name }))
		}
		scs = append(scs, sc)
	}
	var fs []Factory
	if len(opts.Executors) == 0 || slices.Contains(opts.Executors, "all") {
		fs = reg.Executors()
	} else {
		for _, name := range opts.Executors {
			f, ok := reg.Executor(name)
			if !ok {
				return nil, fmt.Errorf("bench: unknown executor %q (have %s)", name, names(reg.Executors(), func(f Factory) string { return f.Name }))
			}
			if !slices.ContainsFunc(fs, func(g Factory) bool { return g.Name == name }) {
				fs = append(fs, f)
			}
		}
	}
	plans := make([]Plan, 0, len(scs))
	for _, sc := range scs {
		pl := Plan{Scenario: sc, Params: opts.Params.resolve(sc.Defaults)}
		if sc.Fix != nil {
			pl.Params = sc.Fix(pl.Params)
		}
		for _, f := range fs {
			if runsOn(sc, f) {
				pl.Executors = append(pl.Executors, f)
			}
		}
		plans = append(plans, pl)
	}
	return plans, nil
}

func names[T any](xs []T, name func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = name(x)
	}
	return strings.Join(s, ", ")
}

// Run runs every planned scenario opts.Reps times on each of its executors,
// each repetition in a fresh process unless opts.InProcess, interleaving the
// executors (the order rotates from one repetition to the next) so that a
// drift of the machine's load spreads over all of them. It blocks until done
// or ctx is done, and returns one [Report] per scenario. A failed repetition is
// recorded in its Result's Errors and does not stop the run; an invalid
// option or ctx's end does.
func Run(ctx context.Context, reg *Registry, opts Options) ([]Report, error) {
	plans, err := NewPlan(reg, opts)
	if err != nil {
		return nil, err
	}
	reps := cmp.Or(opts.Reps, RepsDefault)
	if opts.ProfileDir != "" && !opts.InProcess {
		if err := os.MkdirAll(opts.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	if !opts.InProcess && opts.Executable == "" {
		if opts.Executable, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	total := 0
	for _, pl := range plans {
		total += reps * len(pl.Executors)
	}
	machine := ThisMachine()
	done := 0
	reports := make([]Report, 0, len(plans))
	for _, pl := range plans {
		samples := make([][]*Sample, len(pl.Executors))
		errs := make([][]string, len(pl.Executors))
		for rep := range reps {
			for k := range pl.Executors {
				i := (k + rep) % len(pl.Executors)
				f := pl.Executors[i]
				s, err := runOne(ctx, opts, pl.Scenario, f, pl.Params, rep+1)
				if ctx.Err() != nil {
					return reports, ctx.Err()
				}
				if err != nil {
					errs[i] = append(errs[i], fmt.Sprintf("rep %d: %v", rep+1, err))
				} else {
					samples[i] = append(samples[i], s)
				}
				done++
				if opts.Progress != nil {
					opts.Progress(Progress{Done: done, Total: total, Scenario: pl.Scenario.Name, Executor: f.Name, Rep: rep + 1, Err: err})
				}
			}
		}
		rp := Report{Scenario: pl.Scenario.Name, Doc: pl.Scenario.Doc, Params: pl.Params, Machine: machine, Reps: reps}
		for i, f := range pl.Executors {
			rp.Results = append(rp.Results, fold(f.Name, f.Mode, pl.Scenario.Key, samples[i], errs[i]))
		}
		reports = append(reports, rp)
	}
	return reports, nil
}

// runOne runs one repetition, in this process or a child.
func runOne(ctx context.Context, opts Options, sc Scenario, f Factory, p Params, rep int) (*Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(opts.RunTimeout, RunTimeoutDefault))
	defer cancel()
	if opts.InProcess {
		s, err := sc.Run(ctx, f, p)
		if err != nil {
			return nil, err
		}
		s.clean()
		return s, nil
	}
	cj := childJob{Scenario: sc.Name, Executor: f.Name, Params: p}
	if opts.ProfileDir != "" {
		cj.Profile = filepath.Join(opts.ProfileDir, fmt.Sprintf("%s-%s-%d.pprof", sc.Name, f.Name, rep))
	}
	job, err := json.Marshal(cj)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cmd := exec.CommandContext(ctx, opts.Executable, ChildArg)
	cmd.Stdin = bytes.NewReader(job)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = cmp.Or[io.Writer](opts.Stderr, os.Stderr)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bench: %s on %s: %w", sc.Name, f.Name, ctx.Err())
		}
		return nil, fmt.Errorf("bench: %s on %s: child: %w", sc.Name, f.Name, err)
	}
	var res childResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("bench: %s on %s: child output: %w", sc.Name, f.Name, err)
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	if res.Sample == nil {
		return nil, fmt.Errorf("bench: %s on %s: child gave no result", sc.Name, f.Name)
	}
	return res.Sample, nil
}
