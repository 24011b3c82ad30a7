package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// The durable-flow kill test's knobs, and the environment of its child,
// TestFlowKillChild.
const (
	envFlowKills = "AX_E2E_FLOW_KILLS" // SIGKILLs; default flowKillsDefault

	envFlowProcs = "AX_E2E_FLOW_PROCS" // processes on the store at once; default flowProcsDefault

	envFlowChild = "AX_E2E_FLOW_CHILD" // "run", "serve" or "drain": TestFlowKillChild runs
	envFlowTable = "AX_E2E_FLOW_TABLE"
	envFlowOwner = "AX_E2E_FLOW_OWNER"

	flowKillsDefault = 20
	flowProcsDefault = 1
	flowName         = "flowkill"
	flowShards       = 16
	flowStartEvery   = 60 * time.Millisecond // the children start a run this often between them
	flowWorkMax      = 40 * time.Millisecond // the longest work of a stage's or shard's attempt
	flowKillDelayMax = 800 * time.Millisecond
	flowPoll         = 100 * time.Millisecond
)

// flowKillFlow is the flow of the kill test, fetch → flowShards shards of clean →
// store, whose every execution logs (run, stage, shard, attempt, ok) into the
// table execs as it returns. fetch's result is the shard count, which clean's
// CountFunc reads.
func flowKillFlow(side *sql.DB, execs string) *flow.Flow {
	log := func(ctx context.Context, in flow.Inputs, stage string, shard int, err error) error {
		info, _ := kernel.TaskInfo(ctx)
		rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		sideExec(rec, side, "INSERT INTO `"+execs+"` (run, stage, shard, attempt, ok, pid) VALUES (?, ?, ?, ?, ?, ?)",
			in.RunID(), stage, shard, info.Attempt, err == nil, os.Getpid())
		return err
	}
	work := func(ctx context.Context) error {
		w := time.NewTimer(rand.N(flowWorkMax + 1))
		defer w.Stop()
		select {
		case <-w.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	retry := flow.StageOptions{Retry: &kernel.RetryPolicy{MaxAttempts: 50}}
	after := func(s string) flow.StageOptions {
		o := retry
		o.After = []string{s}
		return o
	}
	cleanOpts := &flow.ShardOptions{StageOptions: after("fetch"), MaxShards: 64}
	storeOpts := after("clean")
	return flow.New(flowName).
		Stage("fetch", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
			err := log(ctx, in, "fetch", -1, work(ctx))
			return []byte(strconv.Itoa(flowShards)), err
		}, &retry).
		Sharded("clean", func(ctx context.Context, in flow.Inputs) (int, error) {
			n, err := strconv.Atoi(string(in.Result("fetch")))
			if err == nil {
				err = work(ctx)
			}
			return n, log(ctx, in, "count", -1, err)
		}, func(ctx context.Context, s flow.Shard, in flow.Inputs) error {
			err := work(ctx)
			if err == nil && s.Total != flowShards {
				err = kernel.Permanent(fmt.Errorf("shard total %d", s.Total))
			}
			return log(ctx, in, "clean", s.Index, err)
		}, cleanOpts).
		Stage("store", func(ctx context.Context, in flow.Inputs) ([]byte, error) {
			return nil, log(ctx, in, "store", -1, work(ctx))
		}, &storeOpts)
}

// TestFlowKillChild is the child process of TestFlowKill; without AX_E2E_FLOW_CHILD it
// returns at once. It runs a kernel as owner AX_E2E_FLOW_OWNER on the table
// AX_E2E_FLOW_TABLE with flowKillFlow registered (its tasks in the pool when
// AX_E2E_FLOW_PROCS > 1), and writes a byte to fd 3 once it did. In "run" mode it
// then starts a run every flowStartEvery times AX_E2E_FLOW_PROCS, inserting each
// run's ID into <table>_acks once Start returned, until it is killed. In "drain"
// mode it waits for every run of <table>_acks to end and fails for one that did
// not succeed, then writes a byte to fd 3. In "drain" and "serve" modes it returns
// when its stdin closes.
func TestFlowKillChild(t *testing.T) {
	mode := os.Getenv(envFlowChild)
	if mode == "" {
		return
	}
	table := os.Getenv(envFlowTable)
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()
	side, err := sql.Open("mysql", testDSN())
	if err != nil {
		t.Fatal(err)
	}
	side.SetMaxOpenConns(8)
	defer func() { _ = side.Close() }()
	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	fast := kernel.RetryPolicy{Base: 5 * time.Millisecond, Max: 50 * time.Millisecond}
	k, err := kernel.New(kernel.Config{
		Store: s, Owner: os.Getenv(envFlowOwner), MaxConcurrency: 8,
		Retry: kernel.ByPriority[kernel.RetryPolicy]{High: fast, Normal: fast, Low: fast},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	d, err := flow.Register(k, s, flowKillFlow(side, table+"_execs"), &flow.DurableOptions{Poll: flowPoll, Pool: envInt(t, envFlowProcs, flowProcsDefault) > 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	_, _ = progress.Write([]byte{'u'})
	ctx := context.Background()
	if mode == "serve" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	if mode == "run" {
		tick := time.NewTicker(flowStartEvery * time.Duration(envInt(t, envFlowProcs, flowProcsDefault)))
		defer tick.Stop()
		for range tick.C {
			run, err := d.Start(ctx, []byte("rows"), nil)
			if err != nil {
				t.Errorf("Start() = %v", err)
				continue
			}
			sideExec(ctx, side, "INSERT INTO `"+table+"_acks` (run) VALUES (?)", run)
		}
	}
	rows, err := side.QueryContext(ctx, "SELECT run FROM `"+table+"_acks`")
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, r := range runs {
		if err := d.Wait(wctx, r); err != nil {
			t.Errorf("Wait(%s) = %v, want nil", r, err)
		}
	}
	_, _ = progress.Write([]byte{'d'})
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestFlowKill runs the durable flow fetch → 16 shards of clean → store in
// AX_E2E_FLOW_PROCS child processes (TestFlowKillChild; 1 by default; with more, on
// one table with the stages' tasks in the shared pool, so that the processes run the
// shards of one run between them) that start a run every flowStartEvery between
// them. It kills a random one with SIGKILL AX_E2E_FLOW_KILLS times (20 by default)
// at random moments, restarting it under its owner's name each time, then kills
// every process and restarts them to start nothing: one waits for every
// acknowledged run to end. Then:
//
//   - no acknowledged run is lost: each ended Succeeded (the final child's Wait), and
//     its head is stored Succeeded;
//   - each stage, count and shard of a run was stored once (one task per unique key),
//     Succeeded;
//   - nothing ran after its success was stored: every execution of a task has an
//     attempt at most the attempt the store shows it succeeded with, and exactly one
//     execution has that attempt and returned nil;
//   - every execution belongs to an acknowledged run, or to a run whose Start the
//     kill cut after it stored the run (then it ran to its end too).
func TestFlowKill(t *testing.T) {
	kills := envInt(t, envFlowKills, flowKillsDefault)
	procs := envInt(t, envFlowProcs, flowProcsDefault)
	if procs < 1 {
		t.Fatalf("%s = %d: want at least 1", envFlowProcs, procs)
	}
	db := openDB(t)
	table := ownTable(t, db, "flow")
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE `" + table + "_execs` (id BIGINT AUTO_INCREMENT PRIMARY KEY, run VARCHAR(64) NOT NULL, stage VARCHAR(16) NOT NULL, " +
			"shard INT NOT NULL, attempt INT NOT NULL, ok BOOL NOT NULL, pid INT NOT NULL)",
		"CREATE TABLE `" + table + "_acks` (run VARCHAR(64) PRIMARY KEY)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, sfx := range []string{"_execs", "_acks"} {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+sfx+"`")
		}
	})
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	env := []string{envFlowTable + "=" + table, envFlowProcs + "=" + strconv.Itoa(procs)}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29))
	began := time.Now()
	seq := 0
	spawn := func(p int, mode string) *child {
		c := spawnChild(t, "TestFlowKillChild", seq, append(env, envFlowChild+"="+mode, envFlowOwner+"="+flowName+"-"+strconv.Itoa(p))...)
		seq++
		c.waitSignal(t)
		return c
	}
	cur := make([]*child, procs)
	for p := range cur {
		cur[p] = spawn(p, "run")
	}
	for range kills {
		p := rng.IntN(procs)
		cur[p].kill(t, time.Duration(rng.Int64N(int64(flowKillDelayMax))))
		cur[p] = spawn(p, "run") // under the same owner: it takes its tasks back at once
	}
	for _, c := range cur { // every process, to start no more runs
		c.kill(t, 0)
	}
	for p := 1; p < procs; p++ {
		cur[p] = spawn(p, "serve")
	}
	final := spawn(0, "drain")
	pollUntil(t, "the final child's waits for the acknowledged runs", 20*time.Millisecond, 90*time.Second, func() (bool, error) {
		select {
		case <-final.exited:
			return false, fmt.Errorf("final child exited: %w\n%s", final.err, tail(final.out.String(), 4000))
		default:
		}
		return final.bytes.Load() >= 2, nil // registered, then every run ended
	})
	var acks int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"_acks`").Scan(&acks); err != nil {
		t.Fatal(err)
	}
	if acks < kills {
		t.Fatalf("%d runs acknowledged over %d kills: the children did not get to start runs", acks, kills)
	}
	// The heads end once their runs ended, within a poll of the final child; the
	// loop logs those that do not.
	headKind := "axflow.run/" + flowName
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE kind = ? AND state <> ?", headKind, codeSucceeded).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			rows, qerr := db.QueryContext(ctx, "SELECT id, unique_key, state, attempt, owner, run_at FROM `"+table+"` WHERE kind = ? AND state <> ? LIMIT 10", headKind, codeSucceeded)
			if qerr != nil {
				t.Fatal(qerr)
			}
			for rows.Next() {
				var id, key, runAt string
				var state, attempt int
				var owner uint64
				_ = rows.Scan(&id, &key, &state, &attempt, &owner, &runAt)
				t.Logf("head %s %s: state %d, attempt %d, owner %d, run_at %s", id, key, state, attempt, owner, runAt)
			}
			_ = rows.Close()
			t.Fatalf("%d heads not ended 30 s after the acknowledged runs ended\n%s", n, tail(final.out.String(), 3000))
		}
		<-time.After(20 * time.Millisecond) // the table, which no channel announces
	}
	for _, c := range append(cur[1:], final) {
		_ = c.stdin.Close()
		c.waitExit(t)
	}

	// Every acknowledged run's head, by its key.
	var runs []string
	rows, err := db.QueryContext(ctx, "SELECT run FROM `"+table+"_acks`")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	_ = rows.Close()
	keyed := make([]string, len(runs))
	for i, r := range runs {
		keyed[i] = "axflow/" + r
	}
	for len(keyed) > 0 {
		n := min(len(keyed), store.StatesMax)
		heads, err := s.TasksByKey(ctx, keyed[:n])
		if err != nil {
			t.Fatal(err)
		}
		if len(heads) != n {
			t.Errorf("%d heads of %d acknowledged runs found", len(heads), n)
		}
		for _, h := range heads {
			if h.State != store.Succeeded || !strings.HasPrefix(string(h.Result), "succeeded") {
				t.Errorf("head %s (%s) = %s, result %q; want succeeded", h.ID, h.UniqueKey, h.State, h.Result)
			}
		}
		keyed = keyed[n:]
	}

	// The stored tasks of the stages: one per key, each Succeeded, with its attempt.
	type stored struct {
		state   int
		attempt int
	}
	tasks := map[string]stored{}
	rows, err = db.QueryContext(ctx, "SELECT unique_key, state, attempt FROM `"+table+"` WHERE kind LIKE ?", "axflow.stage/%")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			key string
			st  stored
		)
		if err := rows.Scan(&key, &st.state, &st.attempt); err != nil {
			t.Fatal(err)
		}
		if _, dup := tasks[key]; dup {
			t.Errorf("key %s stored twice", key)
		}
		tasks[key] = st
	}
	_ = rows.Close()
	runSet := map[string]bool{}
	for _, r := range runs {
		runSet[r] = true
	}
	for key, st := range tasks {
		if st.state != codeSucceeded {
			t.Errorf("task %s: state code %d, want succeeded (%d)", key, st.state, codeSucceeded)
		}
	}

	// The executions against what the store says succeeded.
	type exec struct{ attempts, okAtStored, beyond int }
	byKey := map[string]*exec{}
	rows, err = db.QueryContext(ctx, "SELECT run, stage, shard, attempt, ok FROM `"+table+"_execs`")
	if err != nil {
		t.Fatal(err)
	}
	execs, beyond := 0, 0
	for rows.Next() {
		var (
			run, stage     string
			shard, attempt int
			ok             bool
		)
		if err := rows.Scan(&run, &stage, &shard, &attempt, &ok); err != nil {
			t.Fatal(err)
		}
		execs++
		key := "axflow/" + run + "/" + stage
		switch stage {
		case "count":
			key = "axflow/" + run + "/clean"
		case "clean":
			key += "#" + strconv.Itoa(shard)
		}
		st, found := tasks[key]
		if !found {
			t.Errorf("execution of %s (attempt %d): no stored task", key, attempt)
			continue
		}
		e := byKey[key]
		if e == nil {
			e = &exec{}
			byKey[key] = e
		}
		e.attempts++
		switch {
		case attempt > st.attempt:
			e.beyond++
			beyond++
			t.Errorf("%s ran attempt %d after its success was stored with attempt %d", key, attempt, st.attempt)
		case attempt == st.attempt && ok:
			e.okAtStored++
		}
	}
	_ = rows.Close()
	reruns := 0
	for key, st := range tasks {
		e := byKey[key]
		switch {
		case e == nil:
			t.Errorf("%s stored succeeded (attempt %d) with no execution logged", key, st.attempt)
		case e.okAtStored != 1:
			t.Errorf("%s: %d successful executions of the stored attempt %d, want 1", key, e.okAtStored, st.attempt)
		default:
			reruns += e.attempts - 1
		}
	}
	// Every run in the table is acknowledged, or was stored by a Start the kill cut.
	var allRuns int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE kind = ?", headKind).Scan(&allRuns); err != nil {
		t.Fatal(err)
	}
	if cuts := kills + procs; allRuns < len(runs) || allRuns > len(runs)+cuts {
		t.Errorf("%d runs stored, %d acknowledged over %d kills: want between %d and %d", allRuns, len(runs), cuts, len(runs), len(runs)+cuts)
	}
	t.Logf("%d processes, %d kills in %v: %d runs acknowledged (%d stored), %d stage tasks, %d executions, %d re-runs of interrupted attempts, %d beyond a stored success",
		procs, kills, time.Since(began).Round(time.Millisecond), len(runs), allRuns, len(tasks), execs, reruns, beyond)
	if want := allRuns * (3 + flowShards); len(tasks) != want {
		t.Errorf("%d stage tasks stored, want %d (%d runs × %d)", len(tasks), want, allRuns, 3+flowShards)
	}
}
