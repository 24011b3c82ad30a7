package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/flow"
)

// fakeFlow is a console.FlowRuns in memory: its runs, by ID, and the calls it
// got.
type fakeFlow struct {
	mu    sync.Mutex
	runs  []flow.RunInfo // sorted by ID
	calls []string
}

func (f *fakeFlow) List(_ context.Context, after string, limit int) ([]flow.RunInfo, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []flow.RunInfo
	for i, r := range f.runs {
		if after != "" && r.ID <= after {
			continue
		}
		if len(out) == limit {
			return out, f.runs[i-1].ID, nil
		}
		out = append(out, r)
	}
	return out, "", nil
}

func (f *fakeFlow) Inspect(_ context.Context, id string) (flow.RunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.runs {
		if r.ID == id {
			return r, nil
		}
	}
	return flow.RunInfo{}, fmt.Errorf("fake: run %q: %w", id, flow.ErrUnknownRun)
}

func (f *fakeFlow) Cancel(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "cancel "+id)
	return nil
}

func (f *fakeFlow) RetryStage(_ context.Context, id, stage string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "retry "+id+" "+stage)
	return nil
}

func (f *fakeFlow) callLog() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, ", ")
}

// etlRuns: a running run with its sharded stage at 40 of 64 shards, a failed
// one whose error clears the screen, a succeeded one, and one named "cancel".
func etlRuns() []flow.RunInfo {
	stages := func(fetch, clean, st flow.StageState, shards, done int, err error) []flow.StageStatus {
		return []flow.StageStatus{
			{Name: "fetch", State: fetch},
			{Name: "clean", State: clean, Shards: shards, ShardsDone: done, Err: err},
			{Name: "store", State: st},
		}
	}
	cleanErr := &flow.StageError{Flow: "etl", Stage: "clean", Shard: 7, Err: errors.New("row 12 \x1b[2J<b>bad</b>")}
	return []flow.RunInfo{
		{ID: "cancel", Flow: "etl", State: flow.Running, Created: t0, Stages: stages(flow.StageRunning, flow.StageWaiting, flow.StageWaiting, 0, 0, nil)},
		{ID: "r1", Flow: "etl", State: flow.Running, Created: t0, Stages: stages(flow.StageSucceeded, flow.StageRunning, flow.StageWaiting, 64, 40, nil)},
		{
			ID: "r2", Flow: "etl", State: flow.Failed, Created: t0, Ended: t0.Add(60e9), Err: cleanErr.Error(),
			Stages: stages(flow.StageSucceeded, flow.StageFailed, flow.StageCanceled, 64, 63, cleanErr),
		},
		{ID: "r3", Flow: "etl", State: flow.Succeeded, Created: t0, Ended: t0.Add(60e9), Stages: stages(flow.StageSucceeded, flow.StageSucceeded, flow.StageSucceeded, 8, 8, nil)},
	}
}

func setupFlows(t *testing.T, actions bool) (*webBundle, *fakeFlow, *fakeFlow) {
	t.Helper()
	etl := &fakeFlow{runs: etlRuns()}
	report := &fakeFlow{runs: []flow.RunInfo{{ID: "q1", Flow: "report", State: flow.Succeeded, Created: t0, Ended: t0, Stages: []flow.StageStatus{{Name: "build", State: flow.StageSucceeded}}}}}
	b := setupWeb(t, console.Options{Actions: actions, Flows: map[string]console.FlowRuns{"etl": etl, "report": report}})
	return b, etl, report
}

func TestFlows(t *testing.T) {
	b, etl, report := setupFlows(t, true)
	golden(t, "flows", b.r.ok("flows"))
	golden(t, "flow_show", b.r.ok("flow", "r2"))

	// One flow, a page at a time; the cursor is printed on stderr.
	res := b.r.run("flows", "--flow", "etl", "--limit", "2")
	if res.code != exitOK || strings.Count(res.stdout, "\netl ") != 2 || !strings.Contains(res.stderr, `next page of etl: --flow "etl" --after "r1"`) {
		t.Errorf("flows --flow etl --limit 2 = %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	out := b.r.ok("flows", "--flow", "etl", "--limit", "2", "--after", "r1")
	if !strings.Contains(out, "r2") || !strings.Contains(out, "r3") || strings.Contains(out, "r1 ") {
		t.Errorf("flows --flow etl --after r1 =\n%s", out)
	}
	var js struct {
		Flows []struct {
			Name string `json:"name"`
			Runs []struct {
				ID         string `json:"id"`
				ShardsDone int    `json:"shards_done"`
			} `json:"runs"`
		} `json:"flows"`
	}
	b.r.jsonOf(&js, "flows")
	if len(js.Flows) != 2 || len(js.Flows[0].Runs) != 4 || js.Flows[0].Runs[1].ShardsDone != 40 {
		t.Errorf("flows --json = %+v; want the console's JSON", js)
	}

	// A run is found in the flow that has it, or in --flow's.
	if out := b.r.ok("flow", "q1"); !strings.Contains(out, "run q1  flow report  state succeeded") {
		t.Errorf("flow q1 =\n%s", out)
	}
	if out := b.r.ok("flow", "--", "cancel"); !strings.Contains(out, "run cancel  flow etl  state running") {
		t.Errorf("flow -- cancel =\n%s", out)
	}
	var run struct {
		ID     string `json:"id"`
		Stages []struct {
			Name  string `json:"name"`
			Error string `json:"error"`
		} `json:"stages"`
	}
	b.r.jsonOf(&run, "flow", "r2", "--flow", "etl")
	if run.ID != "r2" || len(run.Stages) != 3 || !strings.Contains(run.Stages[1].Error, "\x1b[2J<b>bad</b>") {
		t.Errorf("flow r2 --json = %+v; want the error intact", run)
	}

	// Cancel and retry; refusals say why, with axctl's exit statuses.
	if out := b.r.ok("flow", "cancel", "r1"); out != `flow.cancel: flow "etl" run "r1"`+"\n" {
		t.Errorf("flow cancel r1 = %q", out)
	}
	if out := b.r.ok("flow", "retry", "r2", "clean"); out != `flow.retry: flow "etl" run "r2" stage "clean"`+"\n" {
		t.Errorf("flow retry r2 clean = %q", out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"flow", "cancel", "r3"}, exitRefused, "has ended succeeded"},
		{[]string{"flow", "retry", "r2", "fetch"}, exitRefused, "not failed"},
		{[]string{"flow", "retry", "r2", "nope"}, exitNotFound, `has no stage "nope"`},
		{[]string{"flow", "nope"}, exitNotFound, `no run "nope" in the console's flows ("etl", "report")`},
		{[]string{"flow", "nope", "--flow", "etl"}, exitNotFound, `no run "nope" of flow "etl"`},
		{[]string{"flow", "r1", "--flow", "nope"}, exitNotFound, `no flow named "nope"`},
		{[]string{"flow", "retry", "r2"}, exitUsage, "want RUN STAGE"},
		{[]string{"flows", "--after", "r1"}, exitUsage, "needs --flow"},
		{[]string{"flows", "--limit", "0"}, exitUsage, "--limit"},
	} {
		res := b.r.run(c.args...)
		if res.code != c.code || !strings.Contains(res.stderr, c.want) {
			t.Errorf("axctl %q = %d %q; want %d and %q", c.args, res.code, res.stderr, c.code, c.want)
		}
	}
	if got := etl.callLog() + "|" + report.callLog(); got != "cancel r1, retry r2 clean|" {
		t.Errorf("the flows' calls = %s", got)
	}

	// Flows live in the kernels: --dsn does not serve them.
	db := &runner{t: t, env: map[string]string{"AXCTL_DSN": testDSN()}}
	if res := db.run("flows"); res.code != exitUsage || !strings.Contains(res.stderr, "needs --url") {
		t.Errorf("flows --dsn = %d %q; want %d", res.code, res.stderr, exitUsage)
	}
}

func TestFlowsRefused(t *testing.T) {
	b, etl, _ := setupFlows(t, false)
	for _, args := range [][]string{{"flow", "cancel", "r1"}, {"flow", "retry", "r2", "clean"}} {
		if res := b.r.run(args...); res.code != exitRefused || !strings.Contains(res.stderr, "actions are disabled") {
			t.Errorf("axctl %q on a read-only console = %d %q; want %d", args, res.code, res.stderr, exitRefused)
		}
	}
	if got := etl.callLog(); got != "" {
		t.Errorf("refused actions reached the flow: %s", got)
	}
	none := setupWeb(t, console.Options{})
	for _, args := range [][]string{{"flows"}, {"flow", "r1"}} {
		if res := none.r.run(args...); res.code != exitUsage || !strings.Contains(res.stderr, "has no flows") {
			t.Errorf("axctl %q on a console without flows = %d %q; want %d", args, res.code, res.stderr, exitUsage)
		}
	}
}
