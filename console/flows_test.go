package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// fakeFlow is a FlowRuns in memory: its runs, by ID, and the calls it got.
type fakeFlow struct {
	mu      sync.Mutex
	runs    []flow.RunInfo // sorted by ID
	calls   []string       // "cancel ID", "retry ID STAGE"
	listErr error
	actErr  error // returned by Cancel and RetryStage, when set
}

func (f *fakeFlow) List(_ context.Context, after string, limit int) ([]flow.RunInfo, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, "", f.listErr
	}
	var out []flow.RunInfo
	for i, r := range f.runs {
		if r.ID <= after && after != "" {
			continue
		}
		if len(out) == limit {
			return out, f.runs[i-1].ID, nil
		}
		out = append(out, clone(r))
	}
	return out, "", nil
}

func clone(r flow.RunInfo) flow.RunInfo {
	r.Stages = slices.Clone(r.Stages)
	return r
}

func (f *fakeFlow) find(id string) (int, error) {
	for i, r := range f.runs {
		if r.ID == id {
			return i, nil
		}
	}
	return 0, fmt.Errorf("fake flow: run %q: %w", id, flow.ErrUnknownRun)
}

func (f *fakeFlow) Inspect(_ context.Context, id string) (flow.RunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(id)
	if err != nil {
		return flow.RunInfo{}, err
	}
	return clone(f.runs[i]), nil
}

func (f *fakeFlow) Cancel(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "cancel "+id)
	if f.actErr != nil {
		return f.actErr
	}
	i, err := f.find(id)
	if err != nil {
		return err
	}
	r := &f.runs[i]
	r.State, r.Ended = flow.Canceled, time.Now()
	for j := range r.Stages {
		if !r.Stages[j].State.Terminal() {
			r.Stages[j].State = flow.StageCanceled
		}
	}
	return nil
}

func (f *fakeFlow) RetryStage(_ context.Context, id, stage string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "retry "+id+" "+stage)
	if f.actErr != nil {
		return f.actErr
	}
	i, err := f.find(id)
	if err != nil {
		return err
	}
	r := &f.runs[i]
	r.State, r.Ended, r.Err = flow.Running, time.Time{}, ""
	for j := range r.Stages {
		if r.Stages[j].Name == stage {
			r.Stages[j].State, r.Stages[j].Err = flow.StageRunning, nil
		}
	}
	return nil
}

func (f *fakeFlow) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeFlow) run(id string) flow.RunInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(id)
	if err != nil {
		panic(err)
	}
	return clone(f.runs[i])
}

var flowT0 = time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)

// etlRuns are five runs of a fetch → clean (sharded) → store flow, by ID: one
// running with clean at 40 of 64 shards, one failed in clean, one succeeded,
// one canceled, one waiting to start.
func etlRuns() []flow.RunInfo {
	stages := func(fetch, clean, st flow.StageState, shards, done int, err error) []flow.StageStatus {
		return []flow.StageStatus{
			{Name: "fetch", State: fetch},
			{Name: "clean", State: clean, Shards: shards, ShardsDone: done, Err: err},
			{Name: "store", State: st},
		}
	}
	cleanErr := &flow.StageError{Flow: "etl", Stage: "clean", Shard: 7, Err: errors.New("row 12 <b>bad</b>")}
	return []flow.RunInfo{
		{ID: "r1", Flow: "etl", State: flow.Running, Created: flowT0, Stages: stages(flow.StageSucceeded, flow.StageRunning, flow.StageWaiting, 64, 40, nil)},
		{
			ID: "r2", Flow: "etl", State: flow.Failed, Created: flowT0, Ended: flowT0.Add(time.Minute), Err: cleanErr.Error(),
			Stages: stages(flow.StageSucceeded, flow.StageFailed, flow.StageCanceled, 64, 63, cleanErr),
		},
		{ID: "r3", Flow: "etl", State: flow.Succeeded, Created: flowT0, Ended: flowT0.Add(time.Minute), Stages: stages(flow.StageSucceeded, flow.StageSucceeded, flow.StageSucceeded, 8, 8, nil)},
		{ID: "r4", Flow: "etl", State: flow.Canceled, Created: flowT0, Ended: flowT0.Add(time.Minute), Stages: stages(flow.StageSucceeded, flow.StageCanceled, flow.StageCanceled, 0, 0, nil)},
		{ID: "r5", Flow: "etl", State: flow.Running, Created: flowT0, Stages: stages(flow.StageRunning, flow.StageWaiting, flow.StageWaiting, 0, 0, nil)},
	}
}

// setupFlows is a console with the flows "etl" (etlRuns) and "report" (one
// succeeded run).
func setupFlows(t *testing.T, o Options) (*bundle, *fakeFlow, *fakeFlow) {
	t.Helper()
	etl := &fakeFlow{runs: etlRuns()}
	report := &fakeFlow{runs: []flow.RunInfo{{ID: "q1", Flow: "report", State: flow.Succeeded, Created: flowT0, Stages: []flow.StageStatus{{Name: "build", State: flow.StageSucceeded}}}}}
	o.Flows = map[string]FlowRuns{"etl": etl, "report": report}
	if o.Interval == 0 {
		o.Interval = time.Minute
	}
	return setup(t, o), etl, report
}

func runIDs(rs []runData) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestFlowsListAndPages(t *testing.T) {
	b, _, _ := setupFlows(t, Options{Actions: true})

	var all flowsData
	b.getJSON(t, "api/v1/flows", &all)
	if len(all.Flows) != 2 || all.Flows[0].Name != "etl" || all.Flows[1].Name != "report" || all.Limit != 20 {
		t.Fatalf("api/v1/flows = %+v, want etl and report, 20 a page", all)
	}
	if got := strings.Join(runIDs(all.Flows[0].Runs), " "); got != "r1 r2 r3 r4 r5" || all.Flows[0].Next != "" {
		t.Errorf("etl's runs = %s next %q, want r1 to r5 and no next page", got, all.Flows[0].Next)
	}
	r1 := all.Flows[0].Runs[0]
	// fetch done (1) + clean at 40/64 + store waiting (0), over 3 stages.
	if wantP := (1 + 40.0/64) / 3; r1.State != "running" || r1.StagesDone != 1 || r1.StagesTotal != 3 || r1.ShardsDone != 40 || r1.Shards != 64 ||
		r1.Progress != wantP || strings.Join(r1.Actions, ",") != "cancel" || r1.Flow != "etl" {
		t.Errorf("r1 = %+v, want running, 1/3 stages, 40/64 shards, progress %v, cancel", r1, wantP)
	}
	if s := r1.Stages[1]; s.Name != "clean" || s.State != "running" || s.Shards != 64 || s.ShardsDone != 40 || s.Progress != 40.0/64 || s.Actions != nil {
		t.Errorf("r1's clean = %+v", s)
	}
	r2 := all.Flows[0].Runs[1]
	if r2.State != "failed" || r2.Actions != nil || r2.Error == "" || r2.Ended.IsZero() {
		t.Errorf("r2 = %+v, want failed with its error, no cancel", r2)
	}
	if s := r2.Stages[1]; s.State != "failed" || !strings.Contains(s.Error, "shard 7: row 12 <b>bad</b>") || strings.Join(s.Actions, ",") != "retry" {
		t.Errorf("r2's clean = %+v, want failed, its error's text, retry", s)
	}
	if r3 := all.Flows[0].Runs[2]; r3.Progress != 1 || r3.StagesDone != 3 {
		t.Errorf("r3 = %+v, want all done", r3)
	}

	// Paging one flow, two runs at a time.
	var got []string
	pages := 0
	path := "api/v1/flows?flow=etl&limit=2"
	for {
		var d flowsData
		b.getJSON(t, path, &d)
		pages++
		if len(d.Flows) != 1 || d.Flows[0].Name != "etl" || len(d.Flows[0].Runs) > 2 {
			t.Fatalf("GET %s = %+v, want etl alone, at most 2 runs", path, d)
		}
		got = append(got, runIDs(d.Flows[0].Runs)...)
		if d.Flows[0].Next == "" {
			break
		}
		path = "api/v1/flows?flow=etl&limit=2&after=" + url.QueryEscape(d.Flows[0].Next)
	}
	if strings.Join(got, " ") != "r1 r2 r3 r4 r5" || pages != 3 {
		t.Errorf("paged: %v in %d pages, want r1 to r5 in 3", got, pages)
	}

	// One run, its stages in order.
	var one runData
	b.getJSON(t, "api/v1/flows/run?flow=etl&id=r2", &one)
	var names []string
	for _, s := range one.Stages {
		names = append(names, s.Name+":"+s.State)
	}
	if strings.Join(names, " ") != "fetch:succeeded clean:failed store:canceled" || one.ShardsDone != 63 {
		t.Errorf("api/v1/flows/run r2 = %+v", one)
	}

	// The JSON shapes.
	_, raw := b.get(t, "api/v1/flows?flow=etl&limit=1")
	if got := strings.Join(keysOf(t, []byte(raw)), " "); got != strings.Join(sortedFields("time limit flows"), " ") {
		t.Errorf("api/v1/flows keys = %s", got)
	}
	var top struct {
		Flows []json.RawMessage `json:"flows"`
	}
	_ = json.Unmarshal([]byte(raw), &top)
	if got := strings.Join(keysOf(t, top.Flows[0]), " "); got != strings.Join(sortedFields("name runs next"), " ") {
		t.Errorf("a flow's keys = %s", got)
	}
	_, raw = b.get(t, "api/v1/flows/run?flow=etl&id=r2")
	if got := strings.Join(keysOf(t, []byte(raw)), " "); got != strings.Join(sortedFields(
		"id flow state created ended error stages_done stages_total shards_done shards progress stages"), " ") {
		t.Errorf("a run's keys = %s", got)
	}
	var rm struct {
		Stages []json.RawMessage `json:"stages"`
	}
	_ = json.Unmarshal([]byte(raw), &rm)
	if got := strings.Join(keysOf(t, rm.Stages[1]), " "); got != strings.Join(sortedFields("name state shards shards_done progress error actions"), " ") {
		t.Errorf("a stage's keys = %s", got)
	}

	// Bad parameters name themselves; unknown flows and runs are 404.
	for path, want := range map[string]struct {
		code int
		text string
	}{
		"api/v1/flows?after=r2":             {http.StatusBadRequest, "parameter after"},
		"api/v1/flows?limit=0":              {http.StatusBadRequest, "parameter limit"},
		"api/v1/flows?limit=1001":           {http.StatusBadRequest, "parameter limit"},
		"api/v1/flows?flow=nope":            {http.StatusNotFound, `no flow named \"nope\"`},
		"api/v1/flows/run?flow=etl":         {http.StatusBadRequest, "parameter id"},
		"api/v1/flows/run?flow=etl&id=zz":   {http.StatusNotFound, `no run \"zz\" of flow \"etl\"`},
		"api/v1/flows/run?flow=nope&id=r1":  {http.StatusNotFound, `no flow named \"nope\"`},
		"flow?flow=etl&id=zz":               {http.StatusNotFound, "no run &#34;zz&#34;"},
		"flows?flow=etl&limit=x":            {http.StatusBadRequest, "parameter limit"},
		"api/v1/flows?flow=report&after=q1": {http.StatusOK, `"runs":[]`},
	} {
		if code, body := b.get(t, path); code != want.code || !strings.Contains(body, want.text) {
			t.Errorf("GET %s = %d %s, want %d and %q", path, code, body, want.code, want.text)
		}
	}

	// The pages.
	_, body := b.get(t, "flows")
	for _, want := range []string{
		`aria-current="page">Flows</a>`, `href="./flow?flow=etl&amp;id=r1"`, "40/64", "1/3", `<progress value="0.5416666666666666" max="1"`,
		"shard 7: row 12 &lt;b&gt;bad&lt;/b&gt;", "api/v1/flows/cancel?flow=etl&amp;id=r1", `<h2><a href="./flows?flow=report"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("flows page: no %q", want)
		}
	}
	if strings.Contains(body, "api/v1/flows/cancel?flow=etl&amp;id=r2") {
		t.Error("flows page: a cancel button on a failed run")
	}
	_, body = b.get(t, "flows?flow=etl&limit=2")
	if !strings.Contains(body, `href="./flows?after=r2&amp;flow=etl&amp;limit=2" rel="next"`) || strings.Contains(body, "q1") {
		t.Errorf("flows page of etl, 2 a page: no next link, or report's run:\n%s", body)
	}
	_, body = b.get(t, "flow?flow=etl&id=r2")
	fetch, clean, st := strings.Index(body, ">fetch<"), strings.Index(body, ">clean<"), strings.Index(body, ">store<")
	if fetch < 0 || clean < fetch || st < clean {
		t.Errorf("run page: the stages are not in order (%d %d %d)", fetch, clean, st)
	}
	for _, want := range []string{
		"63/64", `<span class="bad">failed</span>`, "api/v1/flows/retry?flow=etl&amp;id=r2&amp;stage=clean", "shard 7: row 12 &lt;b&gt;bad&lt;/b&gt;",
		"1 of 3 stages succeeded, 63 of 64 shards", `id="stages" data-live`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page: no %q", want)
		}
	}
	if strings.Count(body, "api/v1/flows/retry") != 1 || strings.Contains(body, "api/v1/flows/cancel") {
		t.Error("run page of a failed run: want one retry (the failed stage) and no cancel")
	}
	_, body = b.get(t, "flow?flow=etl&id=r1")
	if !strings.Contains(body, "api/v1/flows/cancel?flow=etl&amp;id=r1") || strings.Contains(body, "api/v1/flows/retry") {
		t.Error("run page of a running run: want cancel and no retry")
	}
}

func TestFlowsAbsent(t *testing.T) {
	b := setup(t, Options{Actions: true, Interval: time.Minute})
	if _, body := b.get(t, ""); strings.Contains(body, ">Flows</a>") {
		t.Error("the menu links to Flows without Options.Flows")
	}
	for _, path := range []string{"flows", "flow?flow=etl&id=r1", "api/v1/flows", "api/v1/flows/run?flow=etl&id=r1"} {
		if code, body := b.get(t, path); code != http.StatusNotFound || !strings.Contains(body, "console.Options.Flows") {
			t.Errorf("GET %s without flows = %d %s, want 404", path, code, body)
		}
	}
	if code, body := b.postJSON(t, "api/v1/flows/cancel", map[string]string{"flow": "etl", "id": "r1"}, b.c.token); code != http.StatusNotFound || !strings.Contains(body, "no flows are attached") {
		t.Errorf("POST api/v1/flows/cancel without flows = %d %s, want 404", code, body)
	}
	_, err := New(Options{Kernel: b.k, Flows: map[string]FlowRuns{"": &fakeFlow{}, "etl": nil}})
	var ce *kernel.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "console.Options.Flows") || !strings.Contains(err.Error(), `console.Options.Flows["etl"]`) {
		t.Errorf("New with an unnamed and a nil flow = %v, want ConfigErrors naming console.Options.Flows and Flows[\"etl\"]", err)
	}
}

func TestFlowListErrors(t *testing.T) {
	b, etl, _ := setupFlows(t, Options{})
	etl.mu.Lock()
	etl.listErr = fmt.Errorf("runs: %w", store.ErrStoreUnavailable)
	etl.mu.Unlock()
	if code, body := b.get(t, "api/v1/flows"); code != http.StatusServiceUnavailable || !strings.Contains(body, "runs: ") {
		t.Errorf("GET api/v1/flows with the store down = %d %s, want 503", code, body)
	}
	if code, _ := b.get(t, "flows?flow=report"); code != http.StatusOK {
		t.Errorf("GET flows?flow=report while etl's store is down = %d, want 200", code)
	}
}

func TestFlowActions(t *testing.T) {
	b, etl, report := setupFlows(t, Options{Actions: true})
	post := func(path string, v any, want int, text string) actionResult {
		t.Helper()
		code, body := b.postJSON(t, path, v, b.c.token)
		if code != want || !strings.Contains(body, text) {
			t.Fatalf("POST %s %v = %d %s, want %d and %q", path, v, code, body, want, text)
		}
		var res actionResult
		_ = json.Unmarshal([]byte(body), &res)
		return res
	}

	// Refusals that reach no flow: unknown flow, run, stage; a stage that did
	// not fail; a run that ended.
	post("api/v1/flows/cancel", map[string]string{"flow": "nope", "id": "r1"}, http.StatusNotFound, `no flow named \"nope\"`)
	post("api/v1/flows/cancel", map[string]string{"flow": "etl"}, http.StatusBadRequest, "parameter id")
	post("api/v1/flows/cancel", map[string]string{"flow": "etl", "id": "zz"}, http.StatusNotFound, `no run \"zz\"`)
	post("api/v1/flows/cancel", map[string]string{"flow": "etl", "id": "r3"}, http.StatusConflict, "has ended succeeded")
	post("api/v1/flows/retry", map[string]string{"flow": "etl", "id": "r2"}, http.StatusBadRequest, "stage is required")
	post("api/v1/flows/retry", map[string]string{"flow": "etl", "id": "r2", "stage": "nope"}, http.StatusNotFound, `has no stage \"nope\"`)
	post("api/v1/flows/retry", map[string]string{"flow": "etl", "id": "r2", "stage": "fetch"}, http.StatusConflict, "is succeeded, not failed")
	post("api/v1/flows/retry", map[string]string{"flow": "etl", "id": "zz", "stage": "clean"}, http.StatusNotFound, `no run \"zz\"`)
	if calls := append(etl.callLog(), report.callLog()...); len(calls) != 0 {
		t.Fatalf("refused actions reached the flows: %v", calls)
	}

	// Cancel a running run; retry a failed stage.
	res := post("api/v1/flows/cancel", map[string]string{"flow": "etl", "id": "r1"}, http.StatusOK, `"ok":true`)
	if res != (actionResult{OK: true, Action: ActionFlowCancel, Target: `flow "etl" run "r1"`}) {
		t.Errorf("cancel's answer = %+v", res)
	}
	if r := etl.run("r1"); r.State != flow.Canceled {
		t.Errorf("r1 after the cancel: %v, want canceled", r.State)
	}
	res = post("api/v1/flows/retry", map[string]string{"flow": "etl", "id": "r2", "stage": "clean"}, http.StatusOK, `"ok":true`)
	if res.Target != `flow "etl" run "r2" stage "clean"` || res.Action != ActionFlowRetry {
		t.Errorf("retry's answer = %+v", res)
	}
	if got := strings.Join(etl.callLog(), ", "); got != "cancel r1, retry r2 clean" {
		t.Errorf("etl's calls = %s", got)
	}
	var one runData
	b.getJSON(t, "api/v1/flows/run?flow=etl&id=r2", &one)
	if one.State != "running" || one.Stages[1].State != "running" || one.Stages[1].Actions != nil || strings.Join(one.Actions, ",") != "cancel" {
		t.Errorf("r2 after the retry = %+v", one)
	}

	// A flow's refusal: 409 with its text.
	etl.mu.Lock()
	etl.actErr = errors.New("flow: run r5 <i>is</i> busy")
	etl.mu.Unlock()
	post("api/v1/flows/cancel", map[string]string{"flow": "etl", "id": "r5"}, http.StatusConflict, `run r5 \u003ci\u003eis\u003c/i\u003e busy`)
	etl.mu.Lock()
	etl.actErr = fmt.Errorf("store: %w", store.ErrStoreUnavailable)
	etl.mu.Unlock()
	post("api/v1/flows/cancel", map[string]string{"flow": "etl", "id": "r5"}, http.StatusServiceUnavailable, "store: ")
	etl.mu.Lock()
	etl.actErr = nil
	etl.mu.Unlock()

	// By the pages' forms: back to the run's page, which says what was done.
	etl.mu.Lock()
	etl.runs[1].State, etl.runs[1].Stages[1].State = flow.Failed, flow.StageFailed
	etl.mu.Unlock()
	_, body := b.get(t, "flow?flow=etl&id=r2")
	action := formAction(t, body, "api/v1/flows/retry")
	resp := b.postForm(t, action, url.Values{"token": {b.c.token}, "back": {"flow?flow=etl&id=r2"}}, b.srv.URL)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "../../../flow?done=flow.retry&flow=etl&id=r2" {
		t.Fatalf("retry by the form = %d to %q, want 303 back to the run", resp.StatusCode, loc)
	}
	if _, body := b.get(t, "flow?done=flow.retry&flow=etl&id=r2"); !strings.Contains(body, "Stage retried.") {
		t.Error("the run's page after the form's retry does not say so")
	}
	_, body = b.get(t, "flows")
	action = formAction(t, body, "api/v1/flows/cancel?flow=etl&amp;id=r5") // as the page writes it
	resp = b.postForm(t, action, url.Values{"token": {b.c.token}, "back": {"flows"}}, b.srv.URL)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "../../../flows?done=flow.cancel" {
		t.Fatalf("cancel by the form = %d to %q, want 303 back to the list", resp.StatusCode, loc)
	}
	if got := strings.Join(etl.callLog(), ", "); got != "cancel r1, retry r2 clean, cancel r5, cancel r5, retry r2 clean, cancel r5" {
		t.Errorf("etl's calls = %s", got)
	}
}

// TestFlowActionsRefused: with actions disabled, without the token, from
// another origin or refused by Authorize, the flows' actions reach no flow; the
// pages show no forms when actions are off; Authorize is asked with the flows'
// actions.
func TestFlowActionsRefused(t *testing.T) {
	bodies := map[string]map[string]string{
		"api/v1/flows/cancel": {"flow": "etl", "id": "r1"},
		"api/v1/flows/retry":  {"flow": "etl", "id": "r2", "stage": "clean"},
	}
	off, etl, _ := setupFlows(t, Options{})
	for path, body := range bodies {
		if code, out := off.postJSON(t, path, body, off.c.token); code != http.StatusForbidden || !strings.Contains(out, "actions are disabled") {
			t.Errorf("POST %s with actions disabled = %d %s, want 403", path, code, out)
		}
	}
	for _, page := range []string{"flows", "flow?flow=etl&id=r1", "flow?flow=etl&id=r2"} {
		if _, body := off.get(t, page); strings.Contains(body, "<form method=\"post\"") || strings.Contains(body, off.c.token) {
			t.Errorf("%s with actions disabled shows a form or the token", page)
		}
	}
	var run runData
	off.getJSON(t, "api/v1/flows/run?flow=etl&id=r2", &run)
	if run.Actions != nil || run.Stages[1].Actions != nil {
		t.Errorf("api/v1/flows/run with actions disabled lists actions: %+v", run)
	}

	var mu sync.Mutex
	var asked []string
	deny := false
	on, etl2, _ := setupFlows(t, Options{Actions: true, Authorize: func(r *http.Request, action string) error {
		mu.Lock()
		defer mu.Unlock()
		if action != ActionRead {
			asked = append(asked, action)
			if deny {
				return errors.New("no")
			}
		}
		return nil
	}})
	for path, body := range bodies {
		form := url.Values{"token": {on.c.token}}
		for k, v := range body {
			form.Set(k, v)
		}
		cases := []struct {
			name string
			code func() int
		}{
			{"JSON, no token", func() int { c, _ := on.postJSON(t, path, body, ""); return c }},
			{"JSON, another handler's token", func() int { c, _ := on.postJSON(t, path, body, off.c.token); return c }},
			{"JSON, another Origin", func() int { c, _ := on.postJSON(t, path, body, on.c.token, "Origin", "http://evil.example"); return c }},
			{"JSON, cross-site", func() int { c, _ := on.postJSON(t, path, body, on.c.token, "Sec-Fetch-Site", "cross-site"); return c }},
			{"form, another origin", func() int { return on.postForm(t, path, form, "https://evil.example").StatusCode }},
			{"GET", func() int { c, _ := on.get(t, path); return c }},
		}
		for _, c := range cases {
			want := http.StatusForbidden
			if c.name == "GET" {
				want = http.StatusMethodNotAllowed
			}
			if code := c.code(); code != want {
				t.Errorf("POST %s (%s) = %d, want %d", path, c.name, code, want)
			}
		}
	}
	mu.Lock()
	deny = true
	mu.Unlock()
	for path, body := range bodies {
		if code, _ := on.postJSON(t, path, body, on.c.token); code != http.StatusForbidden {
			t.Errorf("POST %s refused by Authorize = %d, want 403", path, code)
		}
	}
	if calls := append(etl.callLog(), etl2.callLog()...); len(calls) != 0 {
		t.Fatalf("refused actions reached the flow: %v", calls)
	}
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	slices.Sort(got)
	if n := len(got); n < 2 || !slices.Contains(got, ActionFlowCancel) || !slices.Contains(got, ActionFlowRetry) {
		t.Errorf("Authorize saw %v, want flow.cancel and flow.retry", got)
	}
}

// TestHostileFlows: flows, runs and stages whose names, IDs and errors are
// hostile strings: the pages show them as text, the API returns them intact,
// and the pages' forms retry the exact stage of the exact run of the exact
// flow, bytes that are not UTF-8 included.
func TestHostileFlows(t *testing.T) {
	flows := map[string]FlowRuns{}
	fakes := map[string]*fakeFlow{}
	for _, s := range hostile {
		f := &fakeFlow{runs: []flow.RunInfo{{
			ID: s, Flow: s, State: flow.Failed, Created: flowT0, Ended: flowT0, Err: s,
			Stages: []flow.StageStatus{{Name: s, State: flow.StageFailed, Err: errors.New(s), Shards: 3, ShardsDone: 1}},
		}}}
		flows[s], fakes[s] = f, f
	}
	b := setup(t, Options{Actions: true, Interval: time.Minute, Flows: flows})
	_, body := b.get(t, "flows")
	checkHTML(t, "flows", body, hostile)
	var all flowsData
	b.getJSON(t, "api/v1/flows", &all)
	if len(all.Flows) != len(hostile) {
		t.Fatalf("api/v1/flows: %d flows, want %d", len(all.Flows), len(hostile))
	}
	_, raw := b.get(t, "api/v1/flows")
	if strings.Contains(raw, "<script") || strings.Contains(raw, "<img") || !json.Valid([]byte(raw)) {
		t.Errorf("the JSON holds raw markup or is invalid: %s", raw)
	}
	for i, s := range hostile {
		q := "flow=" + url.QueryEscape(s) + "&id=" + url.QueryEscape(s)
		_, body := b.get(t, "flow?"+q)
		checkHTML(t, "run "+strconv.Itoa(i), body, []string{s})
		var run runData
		b.getJSON(t, "api/v1/flows/run?"+q, &run)
		if run.ID != asJSON(s) || run.Flow != asJSON(s) || run.Error != asJSON(s) || run.Stages[0].Name != asJSON(s) || run.Stages[0].Error != asJSON(s) {
			t.Errorf("api/v1/flows/run %q = %+v, want its strings intact", s, run)
		}
		action := formAction(t, body, "api/v1/flows/retry")
		res := b.postForm(t, action, url.Values{"token": {b.c.token}, "back": {"flow?" + q}}, b.srv.URL)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("retry of %q by its form = %d, want 303", s, res.StatusCode)
		}
		if got := fakes[s].callLog(); len(got) != 1 || got[0] != "retry "+s+" "+s {
			t.Errorf("retry of %q by its form reached %q", s, got)
		}
		// An error quoting a hostile stage name. (JSON carries no invalid UTF-8:
		// such a flow is steered by the pages' forms.)
		if !utf8.ValidString(s) {
			continue
		}
		code, out := b.postJSON(t, "api/v1/flows/retry", map[string]string{"flow": s, "id": s, "stage": s + "-missing"}, b.c.token)
		var e errorData
		if err := json.Unmarshal([]byte(out), &e); err != nil || code != http.StatusNotFound || !strings.Contains(e.Error, strconv.Quote(asJSON(s)+"-missing")) {
			t.Errorf("retry of a missing stage %q = %d %s", s, code, out)
		}
	}
}
