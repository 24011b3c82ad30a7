package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// ChildArg is the hidden first argument with which [Run] re-runs the
// executable for one repetition. A main that sees it must call [ServeChild]
// with the registry it passed to Run, and exit.
const ChildArg = "-axbench-child"

// childJob is what the parent writes to a child's standard input.
type childJob struct {
	Scenario string `json:"scenario"`
	Executor string `json:"executor"`
	Params   Params `json:"params"`
	// Profile, if not empty, is the file the child writes its CPU profile of
	// the run to.
	Profile string `json:"profile,omitempty"`
	// Member, if not nil, makes the child a member process of a durable-multi
	// run instead (see serveMember).
	Member *memberJob `json:"member,omitempty"`
}

// childResult is what a child writes to its standard output.
type childResult struct {
	Sample *Sample       `json:"sample,omitempty"`
	Error  string        `json:"error,omitempty"`
	Ready  bool          `json:"ready,omitempty"`  // a member joined and waits for the start
	Member *memberResult `json:"member,omitempty"` // a member's figures
}

// ServeChild reads one job from in, runs it and writes its result to out. A
// failed run is reported in the result, not as an error; ServeChild returns an
// error only when it cannot read the job or write the result.
func ServeChild(ctx context.Context, reg *Registry, in io.Reader, out io.Writer) error {
	var job childJob
	dec := json.NewDecoder(in)
	if err := dec.Decode(&job); err != nil {
		return fmt.Errorf("bench: child: read job: %w", err)
	}
	if job.Member != nil {
		return serveMember(ctx, reg, job, dec, out)
	}
	var res childResult
	if s, err := runJob(ctx, reg, job); err != nil {
		res.Error = err.Error()
	} else {
		res.Sample = s
	}
	if err := json.NewEncoder(out).Encode(res); err != nil {
		return fmt.Errorf("bench: child: write result: %w", err)
	}
	return nil
}

func runJob(ctx context.Context, reg *Registry, job childJob) (*Sample, error) {
	sc, ok := reg.Scenario(job.Scenario)
	if !ok {
		return nil, fmt.Errorf("bench: child: unknown scenario %q", job.Scenario)
	}
	f, ok := reg.Executor(job.Executor)
	if !ok {
		return nil, fmt.Errorf("bench: child: unknown executor %q", job.Executor)
	}
	if err := job.Params.Validate(); err != nil {
		return nil, err
	}
	if job.Profile != "" {
		stop, err := startProfile(job.Profile)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	s, err := sc.Run(ctx, f, job.Params)
	if err != nil {
		return nil, err
	}
	s.clean()
	return s, nil
}

// startProfile starts a CPU profile to path and returns the func that ends it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("bench: profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
