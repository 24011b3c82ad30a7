package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// The durable scenario's shape.
const (
	// DurableKind is the kind the durable scenarios register: a task that does
	// nothing. Tasks a DurableSetup.TxSubmit inserts must be of it.
	DurableKind = "axbench.noop"
	// durableChunk is how many tasks one SubmitDurableMany of the bulk shape
	// carries (fewer when the queue is smaller).
	durableChunk = 1000
	// durableCallers is how many goroutines submit one task at a time in the
	// callers shape.
	durableCallers = 50
	// durableSampleGets is how many tasks are read back one by one to
	// cross-check a store's count of succeeded tasks.
	durableSampleGets = 100
)

func durableScenario() Scenario {
	return Scenario{
		Name:    "durable",
		Key:     "tasks_per_sec_bulk",
		Durable: true,
		Doc: "100,000 durable no-op tasks end to end (acknowledged submit → run → completion stored), " +
			"bulk (SubmitDurableMany of 1,000, one submitter) and callers (50 goroutines, SubmitDurable one at a time), " +
			"each on a fresh store: tasks/s, ack latency, rows per commit, CPU per task of the client (this process) " +
			"and of the database server (its processes under /proc), lost",
		Defaults: Params{N: 100_000, Conc: 100},
		Run:      runDurable,
	}
}

// durableTxScenario is the durable scenario's callers shape with each task
// submitted in a transaction of the caller's own (DurableSetup.TxSubmit).
func durableTxScenario() Scenario {
	return Scenario{
		Name:    "durable-tx",
		Key:     "tasks_per_sec_tx",
		Durable: true,
		Doc: "20,000 durable no-op tasks end to end, each submitted by one of 50 goroutines in a transaction of its own " +
			"that also inserts a row of the caller's table (ax: mysqlstore SubmitTx, then Notify; river: InsertTx): " +
			"tasks/s, ack (commit) latency, CPU per task, lost",
		Defaults: Params{N: 20_000, Conc: 100},
		Accepts:  func(f Factory) bool { return f.DurableTx },
		Run: func(ctx context.Context, f Factory, p Params) (*Sample, error) {
			out := newSample()
			smp := startSampler(nil, time.Now(), false)
			err := runDurableShape(ctx, f, p, durableShape{"tx", submitCallers}, out)
			smp.finish(out)
			if err != nil {
				return nil, err
			}
			out.Metrics["lost"] = out.Metrics["lost_tx"]
			return out, nil
		},
	}
}

// txTarget is a target whose one-task submits run in the caller's
// transactions (DurableSetup.TxSubmit).
type txTarget struct {
	durableTarget
	setup *DurableSetup
	acked atomic.Int64
}

func (t *txTarget) submit(ctx context.Context, payload []byte) (string, error) {
	id, err := t.setup.TxSubmit(ctx, payload)
	if err == nil {
		t.acked.Add(1)
	}
	return id, err
}

// drain waits until the store holds every acknowledged task as succeeded (a
// kernel's Shutdown drains only the tasks it claimed), then drains the target.
func (t *txTarget) drain(ctx context.Context) error {
	tick := time.NewTicker(txDrainPoll)
	defer tick.Stop()
	for {
		n, err := t.setup.Succeeded(ctx)
		if err != nil {
			return err
		}
		if int64(n) >= t.acked.Load() {
			return t.durableTarget.drain(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d tasks succeeded: %w", n, t.acked.Load(), ctx.Err())
		case <-tick.C:
		}
	}
}

// txDrainPoll is how often the durable-tx scenario counts the succeeded tasks
// while it drains.
const txDrainPoll = 5 * time.Millisecond

// durableShape is one way of submitting the run's tasks.
type durableShape struct {
	name   string // the metrics' suffix, after an underscore
	submit func(ctx context.Context, t durableTarget, n, chunk int) (acks []int64, ids []string, err error)
}

var durableShapes = []durableShape{
	{"bulk", submitBulk},
	{"callers", submitCallers},
}

// durableTarget is what the scenario submits to: ax on a store, or a peer.
type durableTarget interface {
	// submitMany stores tasks for payloads and returns their IDs, if known.
	submitMany(ctx context.Context, payloads [][]byte) ([]string, error)
	// submit stores one task and returns its ID, if known.
	submit(ctx context.Context, payload []byte) (string, error)
	// drain returns once every acknowledged task ran and its completion is stored.
	drain(ctx context.Context) error
	// executed returns how many task runs there were.
	executed() int64
	// report adds the target's own figures, with suffix sfx.
	report(out *Sample, sfx string, el time.Duration)
}

func runDurable(ctx context.Context, f Factory, p Params) (*Sample, error) {
	if f.Durable == nil {
		return nil, fmt.Errorf("bench: durable: %s is not a durable configuration", f.Name)
	}
	out := newSample()
	smp := startSampler(nil, time.Now(), false)
	lost := 0.0
	for _, sh := range durableShapes {
		if err := runDurableShape(ctx, f, p, sh, out); err != nil {
			smp.finish(out)
			return nil, err
		}
		lost += out.Metrics["lost_"+sh.name]
	}
	smp.finish(out)
	out.Metrics["lost"] = lost
	return out, nil
}

// runDurableShape measures one shape on a fresh store: from the first submit
// until every completion is stored (for ax, the return of Shutdown, which
// drains the tasks and flushes the journal). It then counts the succeeded
// tasks in the store.
func runDurableShape(ctx context.Context, f Factory, p Params, sh durableShape, out *Sample) (err error) {
	setup, err := f.Durable(ctx, p)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", f.Name, err)
	}
	defer func() {
		if cerr := setup.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: %s: close store: %w", f.Name, cerr))
		}
	}()
	var t durableTarget
	switch {
	case setup.Peer != nil:
		if setup.Succeeded == nil {
			return fmt.Errorf("bench: %s: DurableSetup.Peer needs Succeeded", f.Name)
		}
		t = peerTarget{setup.Peer}
	case setup.Store != nil:
		at, err := newAxTarget(setup, p, "")
		if err != nil {
			return fmt.Errorf("bench: %s: %w", f.Name, err)
		}
		defer at.close()
		t = at
	default:
		return fmt.Errorf("bench: %s: DurableSetup has neither Store nor Peer", f.Name)
	}

	if sh.name == "tx" {
		if setup.TxSubmit == nil || setup.Succeeded == nil {
			return fmt.Errorf("bench: %s: durable-tx needs DurableSetup.TxSubmit and Succeeded", f.Name)
		}
		t = &txTarget{durableTarget: t, setup: setup}
	}
	chunk := max(1, min(durableChunk, p.Queue))
	if sh.name == "bulk" && chunk < durableChunk {
		out.note(fmt.Sprintf("bulk submits chunks of %d tasks (the queue's capacity)", chunk))
	}
	cpu := startCPU(setup.ServerCPU)
	t0 := time.Now()
	acks, ids, err := sh.submit(ctx, t, p.N, chunk)
	submitted := time.Since(t0)
	if err != nil {
		return fmt.Errorf("bench: %s: %s submit: %w", f.Name, sh.name, err)
	}
	if err := t.drain(ctx); err != nil {
		return fmt.Errorf("bench: %s: %s: drain: %w", f.Name, sh.name, err)
	}
	el := time.Since(t0)
	acked := len(ids)
	cpu.put(out, "_"+sh.name, acked, el)

	stored, read, bad, err := countSucceeded(ctx, setup, ids)
	if err != nil {
		return fmt.Errorf("bench: %s: %s: count stored tasks: %w", f.Name, sh.name, err)
	}

	m, sfx := out.Metrics, "_"+sh.name
	m["tasks_per_sec"+sfx] = float64(acked) / el.Seconds()
	m["elapsed_ms"+sfx] = float64(el.Microseconds()) / 1e3
	m["submit_ms"+sfx] = float64(submitted.Microseconds()) / 1e3
	m["acks_per_sec"+sfx] = float64(acked) / submitted.Seconds()
	m["drain_ms"+sfx] = float64((el - submitted).Microseconds()) / 1e3
	QuantilesOf(acks).put(m, "ack", sfx)
	t.report(out, sfx, el)
	m["acked"+sfx] = float64(acked)
	m["executed"+sfx] = float64(t.executed())
	m["stored"+sfx] = float64(stored)
	m["lost"+sfx] = float64(acked - stored)
	if acked != stored {
		out.note(fmt.Sprintf("%s: lost %d: %d tasks acknowledged, %d stored as succeeded", sh.name, acked-stored, acked, stored))
	}
	if n := t.executed(); n != int64(acked) {
		out.note(fmt.Sprintf("%s: %d tasks acknowledged, %d runs", sh.name, acked, n))
	}
	if bad > 0 {
		out.note(fmt.Sprintf("%s: %d of %d tasks read back are not stored as succeeded", sh.name, bad, read))
	}
	return nil
}

// cpuMeter measures the CPU time the client (this process) and the database
// server spend over a measured phase.
type cpuMeter struct {
	client0, server0 time.Duration
	server           func() (time.Duration, error) // nil without a server
	serverErr        error                         // why the server's CPU is not measured
}

// startCPU starts a phase: it reads the server's CPU, then the client's, so
// that reading the server's (a walk of /proc) is not the client's.
func startCPU(server func() (time.Duration, error)) *cpuMeter {
	c := &cpuMeter{server: server}
	if server != nil {
		c.server0, c.serverErr = server()
	}
	c.client0 = processCPU()
	return c
}

// put ends the phase, in which n tasks ran in el: it adds the client's and the
// server's CPU per task (client_cpu_us_per_task, server_cpu_us_per_task) and
// their share of one core (client_cpu_pct, server_cpu_pct), with suffix sfx.
// A figure that cannot be read is left out, with a note saying why.
func (c *cpuMeter) put(out *Sample, sfx string, n int, el time.Duration) {
	client1 := processCPU()
	if c.client0 >= 0 && client1 >= c.client0 {
		putCPU(out.Metrics, "client", sfx, client1-c.client0, n, el)
	} else {
		out.note("client CPU not measured: the process's CPU time is not read on this platform")
	}
	if c.server == nil {
		return
	}
	if c.serverErr == nil {
		var server1 time.Duration
		server1, c.serverErr = c.server()
		if c.serverErr == nil && server1 < c.server0 {
			c.serverErr = fmt.Errorf("its CPU time fell from %v to %v over the run (a server process restarted?)", c.server0, server1)
		}
		if c.serverErr == nil {
			putCPU(out.Metrics, "server", sfx, server1-c.server0, n, el)
			return
		}
	}
	out.note("server CPU not measured: " + c.serverErr.Error())
}

// putCPU adds who's CPU time cpu over n tasks run in el: per task in µs and as
// a percentage of one core.
func putCPU(m map[string]float64, who, sfx string, cpu time.Duration, n int, el time.Duration) {
	if us, ok := perTaskMicros(cpu, n); ok {
		m[who+"_cpu_us_per_task"+sfx] = us
	}
	if el > 0 {
		m[who+"_cpu_pct"+sfx] = 100 * cpu.Seconds() / el.Seconds()
	}
}

// perTaskMicros returns cpu ÷ n in microseconds, or false when there is no
// task or cpu is negative (not read).
func perTaskMicros(cpu time.Duration, n int) (float64, bool) {
	if n <= 0 || cpu < 0 {
		return 0, false
	}
	return float64(cpu.Nanoseconds()) / 1e3 / float64(n), true
}

// axTarget is ax on a store: a kernel of its own, its journal timed.
type axTarget struct {
	k    *kernel.Kernel
	ts   *commitTimes
	runs atomic.Int64
}

// newAxTarget starts a kernel on setup's store; owner is its Config.Owner.
func newAxTarget(setup *DurableSetup, p Params, owner string) (*axTarget, error) {
	a := new(axTarget)
	store, ts := newTimedStore(setup.Store)
	a.ts = ts
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: p.Conc,
		Capacity:       kernel.ByPriority[int]{High: p.Queue, Normal: p.Queue, Low: p.Queue},
		Store:          store,
		SnapshotEvery:  setup.SnapshotEvery,
		Owner:          owner,
	})
	if err != nil {
		return nil, err
	}
	a.k = k
	if err := k.Register(DurableKind, func(context.Context, []byte) error {
		a.runs.Add(1)
		return nil
	}); err != nil {
		_ = k.Close()
		return nil, err
	}
	return a, nil
}

func (a *axTarget) submitMany(ctx context.Context, payloads [][]byte) ([]string, error) {
	ts := make([]kernel.DurableTask, len(payloads))
	for i, p := range payloads {
		ts[i] = kernel.DurableTask{Kind: DurableKind, Payload: p}
	}
	hs, err := a.k.SubmitDurableMany(ctx, ts)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.ID()
	}
	return ids, nil
}

func (a *axTarget) submit(ctx context.Context, payload []byte) (string, error) {
	h, err := a.k.SubmitDurable(ctx, kernel.DurableTask{Kind: DurableKind, Payload: payload})
	if err != nil {
		return "", err
	}
	return h.ID(), nil
}

// drain shuts the kernel down: it runs what is queued and flushes the journal.
func (a *axTarget) drain(ctx context.Context) error { return a.k.Shutdown(ctx) }

func (a *axTarget) executed() int64 { return a.runs.Load() }

func (a *axTarget) close() { _ = a.k.Close() }

// report adds the journal's figures: commits, rows per commit, commit times
// and how busy the journal kept the store.
func (a *axTarget) report(out *Sample, sfx string, el time.Duration) {
	m := out.Metrics
	st := a.k.Stats().Store
	m["commits"+sfx] = float64(st.Commits)
	if st.Commits > 0 {
		m["rows_per_commit"+sfx] = float64(st.Changes) / float64(st.Commits)
	}
	durs := a.ts.commits()
	var busy int64
	for _, d := range durs {
		busy += d
	}
	QuantilesOf(durs).put(m, "commit", sfx)
	m["store_busy_pct"+sfx] = 100 * float64(busy) / float64(el.Nanoseconds())
	m["commit_errors"+sfx] = float64(st.Errors)
	if st.Errors > 0 || st.Refused > 0 {
		out.note(fmt.Sprintf("%s: %d commits failed, %d changes refused by the store", sfx[1:], st.Errors, st.Refused))
	}
}

// peerTarget is a [DurablePeer].
type peerTarget struct{ p DurablePeer }

func (t peerTarget) submitMany(ctx context.Context, payloads [][]byte) ([]string, error) {
	return make([]string, len(payloads)), t.p.SubmitMany(ctx, payloads)
}

func (t peerTarget) submit(ctx context.Context, payload []byte) (string, error) {
	return "", t.p.Submit(ctx, payload)
}

func (t peerTarget) drain(ctx context.Context) error       { return t.p.Drain(ctx) }
func (t peerTarget) executed() int64                       { return t.p.Executed() }
func (t peerTarget) report(*Sample, string, time.Duration) {}

// payload is task i's input, a few bytes of JSON, as small jobs carry.
func payload(i int) []byte { return append(strconv.AppendInt([]byte(`{"n":`), int64(i), 10), '}') }

// submitBulk submits n tasks from one goroutine, chunk at a time in one call
// (SubmitDurableMany); acks are the calls' durations.
func submitBulk(ctx context.Context, t durableTarget, n, chunk int) ([]int64, []string, error) {
	acks := make([]int64, 0, (n+chunk-1)/chunk)
	ids := make([]string, 0, n)
	batch := make([][]byte, 0, chunk)
	for i := 0; i < n; i += chunk {
		batch = batch[:0]
		for j := i; j < min(i+chunk, n); j++ {
			batch = append(batch, payload(j))
		}
		t0 := time.Now()
		got, err := t.submitMany(ctx, batch)
		acks = append(acks, int64(time.Since(t0)))
		if err != nil {
			return acks, ids, err
		}
		ids = append(ids, got...)
	}
	return acks, ids, nil
}

// submitCallers submits n tasks from durableCallers goroutines (see
// submitConcurrent).
func submitCallers(ctx context.Context, t durableTarget, n, _ int) ([]int64, []string, error) {
	return submitConcurrent(ctx, t, n, durableCallers)
}

// submitConcurrent submits n tasks from callers goroutines, each submitting one
// task at a time (SubmitDurable); acks are the calls' durations.
func submitConcurrent(ctx context.Context, t durableTarget, n, callers int) ([]int64, []string, error) {
	acks := make([]int64, n)
	ids := make([]string, n)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range min(callers, n) {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return nil
				}
				t0 := time.Now()
				id, err := t.submit(gctx, payload(i))
				acks[i] = int64(time.Since(t0))
				if err != nil {
					return err
				}
				ids[i] = id
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return acks, ids, nil
}

// countSucceeded returns how many of ids the store holds as Succeeded, how
// many tasks it read back one by one and, when it counted otherwise, how many
// of those are not Succeeded. With setup.Succeeded it counts with it and reads
// back a sample of ids as a cross-check; otherwise it reads back every one.
func countSucceeded(ctx context.Context, setup *DurableSetup, ids []string) (stored, read, bad int, err error) {
	get := func(id string) (bool, error) {
		t, err := setup.Store.Get(ctx, id)
		if errors.Is(err, store.ErrUnknownTask) {
			return false, nil
		}
		return err == nil && t.State == kernel.Succeeded, err
	}
	if setup.Succeeded == nil {
		for _, id := range ids {
			ok, err := get(id)
			if err != nil {
				return 0, 0, 0, err
			}
			if ok {
				stored++
			}
		}
		return stored, len(ids), 0, nil // the lost figure says it
	}
	if stored, err = setup.Succeeded(ctx); err != nil {
		return 0, 0, 0, err
	}
	if setup.Store == nil {
		return stored, 0, 0, nil
	}
	step := max(1, len(ids)/durableSampleGets)
	for i := 0; i < len(ids); i += step {
		ok, err := get(ids[i])
		if err != nil {
			return 0, 0, 0, err
		}
		read++
		if !ok {
			bad++
		}
	}
	return stored, read, bad, nil
}
