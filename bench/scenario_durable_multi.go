package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// durableMultiProcs are the process counts of one durable-multi run, in order.
var durableMultiProcs = []int{1, 2, 3}

func durableMultiScenario() Scenario {
	return Scenario{
		Name:    "durable-multi",
		Key:     "tasks_per_sec_p3",
		Durable: true,
		Doc: "the durable scenario's callers shape (50 goroutines submitting one task at a time, 100,000 tasks) shared by 1, 2 and 3 " +
			"OS processes, each a kernel of its own (an owner, MaxConcurrency conc) on one table: tasks/s end to end, ack latency, and 3 processes ÷ 1",
		Defaults: Params{N: 100_000, Conc: 100},
		Accepts:  func(f Factory) bool { return f.DurableJoin != nil },
		Run:      runDurableMulti,
	}
}

// memberJob is what a durable-multi member process runs: its share of the
// callers and tasks, on the store the parent opened.
type memberJob struct {
	Shared  string `json:"shared"`  // DurableSetup.Shared of the parent's store
	Owner   string `json:"owner"`   // the kernel's Config.Owner
	N       int    `json:"n"`       // tasks to submit
	Callers int    `json:"callers"` // goroutines submitting them
}

// memberResult is what a member reports: each submit's duration (ns), the runs,
// and the journal's commits.
type memberResult struct {
	Acks    []int64 `json:"acks"`
	Runs    int64   `json:"runs"`
	Commits uint64  `json:"commits"`
	Changes uint64  `json:"changes"`
}

// runDurableMulti runs the callers shape once per process count, each time on a
// fresh store (table) that every member process opens: from the moment all
// members are ready (joined as owners) until every member's kernel shut down,
// its tasks run and their completions stored.
func runDurableMulti(ctx context.Context, f Factory, p Params) (*Sample, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: durable-multi: %w", err)
	}
	out := newSample()
	smp := startSampler(nil, time.Now(), false)
	defer smp.finish(out)
	lost := 0.0
	for _, procs := range durableMultiProcs {
		if err := runDurableProcs(ctx, exe, f, p, procs, out); err != nil {
			return nil, err
		}
		lost += out.Metrics["lost_p"+strconv.Itoa(procs)]
	}
	m := out.Metrics
	if m["tasks_per_sec_p1"] > 0 {
		m["ratio_p3_p1"] = m["tasks_per_sec_p3"] / m["tasks_per_sec_p1"]
	}
	m["lost"] = lost
	return out, nil
}

// member is one member process of a run.
type member struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
}

func runDurableProcs(ctx context.Context, exe string, f Factory, p Params, procs int, out *Sample) (err error) {
	setup, err := f.Durable(ctx, p)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", f.Name, err)
	}
	defer func() {
		if cerr := setup.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: %s: close store: %w", f.Name, cerr))
		}
	}()
	if setup.Shared == "" || setup.Succeeded == nil {
		return fmt.Errorf("bench: %s: durable-multi needs DurableSetup.Shared and Succeeded", f.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	members := make([]*member, 0, procs)
	defer func() {
		for _, mb := range members {
			_ = mb.in.Close()
			if werr := mb.cmd.Wait(); werr != nil && err == nil {
				err = fmt.Errorf("bench: durable-multi member: %w", werr)
			}
		}
	}()
	for i := range procs {
		job := childJob{Scenario: "durable-multi", Executor: f.Name, Params: p, Member: &memberJob{
			Shared: setup.Shared, Owner: fmt.Sprintf("axbench-%d-%d", procs, i),
			N: share(p.N, procs, i), Callers: share(durableCallers, procs, i),
		}}
		mb, err := startMember(ctx, exe, job)
		if err != nil {
			return err
		}
		members = append(members, mb)
	}
	for _, mb := range members {
		var res childResult
		if err := mb.out.Decode(&res); err != nil {
			return fmt.Errorf("bench: durable-multi member not ready: %w", err)
		}
		if !res.Ready {
			return fmt.Errorf("bench: durable-multi member not ready: %s", res.Error)
		}
	}
	t0 := time.Now()
	for _, mb := range members {
		if _, err := io.WriteString(mb.in, "{}\n"); err != nil {
			return fmt.Errorf("bench: durable-multi: start member: %w", err)
		}
	}
	var acks []int64
	var runs int64
	var commits, changes uint64
	for _, mb := range members {
		var res childResult
		if err := mb.out.Decode(&res); err != nil {
			return fmt.Errorf("bench: durable-multi member: %w", err)
		}
		if res.Error != "" || res.Member == nil {
			return fmt.Errorf("bench: durable-multi member: %s", res.Error)
		}
		acks = append(acks, res.Member.Acks...)
		runs += res.Member.Runs
		commits += res.Member.Commits
		changes += res.Member.Changes
	}
	el := time.Since(t0)
	stored, err := setup.Succeeded(ctx)
	if err != nil {
		return fmt.Errorf("bench: %s: count stored tasks: %w", f.Name, err)
	}
	m, sfx := out.Metrics, "_p"+strconv.Itoa(procs)
	m["tasks_per_sec"+sfx] = float64(len(acks)) / el.Seconds()
	m["elapsed_ms"+sfx] = float64(el.Microseconds()) / 1e3
	QuantilesOf(acks).put(m, "ack", sfx)
	m["executed"+sfx] = float64(runs)
	m["stored"+sfx] = float64(stored)
	m["lost"+sfx] = float64(len(acks) - stored)
	if commits > 0 {
		m["rows_per_commit"+sfx] = float64(changes) / float64(commits)
	}
	if len(acks) != stored || runs != int64(len(acks)) {
		out.note(fmt.Sprintf("%d processes: %d tasks acknowledged, %d runs, %d stored as succeeded", procs, len(acks), runs, stored))
	}
	return nil
}

// share is member i's part of n split among procs.
func share(n, procs, i int) int {
	s := n / procs
	if i < n%procs {
		s++
	}
	return s
}

// startMember starts a member process and hands it job.
func startMember(ctx context.Context, exe string, job childJob) (*member, error) {
	cmd := exec.CommandContext(ctx, exe, ChildArg)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 5 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: durable-multi: %w", err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: durable-multi: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: durable-multi: start member: %w", err)
	}
	if err := json.NewEncoder(in).Encode(job); err != nil {
		_ = in.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("bench: durable-multi: write job: %w", err)
	}
	return &member{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReader(outp))}, nil
}

// serveMember runs a member's job: it opens the shared store, joins it as an
// owner, reports ready, waits for the start (a second JSON value on dec), submits
// its share and shuts the kernel down.
func serveMember(ctx context.Context, reg *Registry, job childJob, dec *json.Decoder, out io.Writer) error {
	f, ok := reg.Executor(job.Executor)
	if !ok || f.DurableJoin == nil {
		return fmt.Errorf("bench: member: %q opens no shared store", job.Executor)
	}
	enc := json.NewEncoder(out)
	mj := job.Member
	setup, err := f.DurableJoin(ctx, job.Params, mj.Shared)
	if err != nil {
		return enc.Encode(childResult{Error: err.Error()})
	}
	defer func() { _ = setup.close() }()
	at, err := newAxTarget(setup, job.Params, mj.Owner)
	if err != nil {
		return enc.Encode(childResult{Error: err.Error()})
	}
	defer at.close()
	if err := enc.Encode(childResult{Ready: true}); err != nil {
		return err
	}
	var start struct{}
	if err := dec.Decode(&start); err != nil {
		return fmt.Errorf("bench: member: read start: %w", err)
	}
	acks, _, err := submitConcurrent(ctx, at, mj.N, mj.Callers)
	if err == nil {
		err = at.drain(ctx)
	}
	if err != nil {
		return enc.Encode(childResult{Error: err.Error()})
	}
	st := at.k.Stats().Store
	return enc.Encode(childResult{Member: &memberResult{Acks: acks, Runs: at.executed(), Commits: st.Commits, Changes: st.Changes}})
}
