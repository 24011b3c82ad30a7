package console

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/axsched/ax/flow"
	"github.com/axsched/ax/kernel"
)

// FlowRuns is what the console reads and steers of one flow's durable runs;
// a *flow.Durable satisfies it. Its methods must be safe for concurrent use.
type FlowRuns interface {
	// List returns up to limit runs after the cursor after ("" for the first
	// page), and the cursor of the next page ("" when there is none).
	List(ctx context.Context, after string, limit int) ([]flow.RunInfo, string, error)
	// Inspect returns the run runID, or an error wrapping [flow.ErrUnknownRun]
	// when the flow has no such run.
	Inspect(ctx context.Context, runID string) (flow.RunInfo, error)
	// Cancel ends the run runID Canceled.
	Cancel(ctx context.Context, runID string) error
	// RetryStage runs the failed stage again in the run runID.
	RetryStage(ctx context.Context, runID, stage string) error
}

// Limits of a page of runs.
const (
	flowLimitDefault = 20
	flowLimitMax     = 1000
)

var errNoFlows = errors.New("console: no flows are attached (console.Options.Flows)")

// flowsData is GET api/v1/flows: the runs of each flow, a page of each.
type flowsData struct {
	Time  time.Time      `json:"time"`
	Limit int            `json:"limit"`
	Flows []flowRunsData `json:"flows"`

	Names []string `json:"-"` // every flow's name, for the page's links
	One   string   `json:"-"` // the flow the page shows alone, if one is asked for
}

// flowRunsData is one flow's page of runs.
type flowRunsData struct {
	Name string    `json:"name"`
	Runs []runData `json:"runs"`
	// Next is the cursor of the next page (the after parameter, with flow),
	// empty when there is none.
	Next string `json:"next,omitempty"`

	NextURL string `json:"-"`
}

// runData is one run of a flow: an item of api/v1/flows and GET
// api/v1/flows/run.
type runData struct {
	ID      string    `json:"id"`
	Flow    string    `json:"flow"`
	State   string    `json:"state"`
	Created time.Time `json:"created,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	Error   string    `json:"error,omitempty"`
	// StagesDone counts the stages that succeeded, of StagesTotal; ShardsDone
	// the shards that succeeded, of Shards, over the sharded stages whose count
	// is known.
	StagesDone  int `json:"stages_done"`
	StagesTotal int `json:"stages_total"`
	ShardsDone  int `json:"shards_done"`
	Shards      int `json:"shards"`
	// Progress is the part of the run done, from 0 to 1: each stage weighs
	// one, a sharded stage its shards done over its shards.
	Progress float64     `json:"progress"`
	Stages   []stageData `json:"stages"`
	// Actions are the actions that apply to the run, when Options.Actions is
	// set: "cancel" while it runs.
	Actions []string `json:"actions,omitempty"`

	Key string `json:"-"` // the flow's name in Options.Flows, which the pages' links use
}

// stageData is one stage of a run.
type stageData struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Shards is the shard count of a sharded stage once known (0 before, and
	// for a plain stage); ShardsDone the shards that succeeded.
	Shards     int     `json:"shards"`
	ShardsDone int     `json:"shards_done"`
	Progress   float64 `json:"progress"`
	Error      string  `json:"error,omitempty"`
	// Actions are "retry" for a failed stage, when Options.Actions is set.
	Actions []string `json:"actions,omitempty"`
}

// runOf is ri, a run of the flow key of Options.Flows, as the console shows it.
func (c *console) runOf(key string, ri *flow.RunInfo) runData {
	r := runData{
		Key: key, ID: ri.ID, Flow: ri.Flow, State: ri.State.String(), Created: ri.Created, Ended: ri.Ended, Error: ri.Err,
		StagesTotal: len(ri.Stages), Stages: make([]stageData, len(ri.Stages)),
	}
	sum := 0.0
	for i, s := range ri.Stages {
		d := stageData{Name: s.Name, State: s.State.String(), Shards: s.Shards, ShardsDone: s.ShardsDone}
		switch {
		case s.State == flow.StageSucceeded:
			d.Progress = 1
			r.StagesDone++
		case s.Shards > 0:
			d.Progress = float64(min(s.ShardsDone, s.Shards)) / float64(s.Shards)
		}
		if s.Err != nil {
			d.Error = s.Err.Error()
		}
		if c.actions && s.State == flow.StageFailed {
			d.Actions = []string{"retry"}
		}
		r.Shards += s.Shards
		r.ShardsDone += s.ShardsDone
		sum += d.Progress
		r.Stages[i] = d
	}
	if len(ri.Stages) > 0 {
		r.Progress = sum / float64(len(ri.Stages))
	}
	if c.actions && ri.State == flow.Running {
		r.Actions = []string{"cancel"}
	}
	return r
}

// serveFlows serves the Flows pages and their API: the runs (flows,
// api/v1/flows) and one run (flow?flow=&id=, api/v1/flows/run?flow=&id=).
func (c *console) serveFlows(w http.ResponseWriter, r *http.Request, rel, _ string) {
	if len(c.flows) == 0 {
		c.fail(w, r, rel, http.StatusNotFound, errNoFlows)
		return
	}
	q := r.URL.Query()
	if rel == "flow" || rel == "api/v1/flows/run" {
		c.serveRun(w, r, rel, q)
		return
	}
	d, err := c.flowRuns(r.Context(), q)
	if err != nil {
		c.fail(w, r, rel, flowStatus(err), err)
		return
	}
	if isAPI(rel) {
		writeJSON(w, http.StatusOK, d)
		return
	}
	c.render(w, http.StatusOK, "flows", pageData{
		Title: "Flows", Nav: "flows", Back: backURL("flows", q), Flash: flashes[q.Get("done")], Flows: &d,
	})
}

// flowRuns lists the runs the parameters q ask for: a page of each flow, or
// with flow=, of that flow alone (after= its next page); limit= runs a page.
func (c *console) flowRuns(ctx context.Context, q url.Values) (flowsData, error) {
	d := flowsData{Time: c.clk.Now(), Limit: flowLimitDefault, Flows: []flowRunsData{}, Names: c.flowNames, One: q.Get("flow")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > flowLimitMax {
			return d, &paramError{msg: "console: parameter limit = " + quote(s) + ": must be 1 to " + strconv.Itoa(flowLimitMax)}
		}
		d.Limit = n
	}
	after := q.Get("after")
	names := c.flowNames
	if q.Has("flow") {
		if _, ok := c.flows[d.One]; !ok {
			return d, c.noFlow(d.One)
		}
		names = []string{d.One}
	} else if after != "" {
		return d, &paramError{msg: "console: parameter after = " + quote(after) + ": needs flow (a cursor is one flow's)"}
	}
	for _, name := range names {
		runs, next, err := c.flows[name].List(ctx, after, d.Limit)
		if err != nil {
			return d, err
		}
		f := flowRunsData{Name: name, Runs: make([]runData, 0, len(runs)), Next: next}
		for i := range runs {
			f.Runs = append(f.Runs, c.runOf(name, &runs[i]))
		}
		if next != "" {
			v := url.Values{"flow": {name}, "after": {next}}
			if d.Limit != flowLimitDefault {
				v.Set("limit", strconv.Itoa(d.Limit))
			}
			f.NextURL = "flows?" + v.Encode()
		}
		d.Flows = append(d.Flows, f)
	}
	return d, nil
}

// noFlow is the error of a flow name that Options.Flows lacks.
func (c *console) noFlow(name string) error {
	return &paramError{msg: "console: no flow named " + quote(name) + " (console.Options.Flows)", err: errUnknownFlow}
}

// errUnknownFlow marks an unknown flow or run: 404 Not Found.
var errUnknownFlow = errors.New("unknown flow or run")

// serveRun serves one run's page or JSON.
func (c *console) serveRun(w http.ResponseWriter, r *http.Request, rel string, q url.Values) {
	ri, err := c.inspect(r.Context(), q.Get("flow"), q.Get("id"))
	if err != nil {
		c.fail(w, r, rel, flowStatus(err), err)
		return
	}
	run := c.runOf(q.Get("flow"), &ri)
	if isAPI(rel) {
		writeJSON(w, http.StatusOK, run)
		return
	}
	c.render(w, http.StatusOK, "flow", pageData{
		Title: "Flow run", Nav: "flows", Back: "flow?" + url.Values{"flow": {q.Get("flow")}, "id": {q.Get("id")}}.Encode(),
		Flash: flashes[q.Get("done")], Run: &run,
	})
}

// inspect returns the run id of the flow name, or an error naming what is
// missing or unknown.
func (c *console) inspect(ctx context.Context, name, id string) (flow.RunInfo, error) {
	fr, ok := c.flows[name]
	switch {
	case !ok:
		return flow.RunInfo{}, c.noFlow(name)
	case id == "":
		return flow.RunInfo{}, &paramError{msg: "console: parameter id (the run's ID) is required"}
	}
	ri, err := fr.Inspect(ctx, id)
	if isUnknownRun(err) {
		return ri, &paramError{msg: "console: no run " + quote(id) + " of flow " + quote(name) + ": " + err.Error(), err: errUnknownFlow}
	}
	return ri, err
}

// isUnknownRun reports whether err says that a flow has no such run.
func isUnknownRun(err error) bool {
	return errors.Is(err, flow.ErrUnknownRun)
}

// flowStatus is the HTTP status of a flow's, a store's or a parameter's error.
func flowStatus(err error) int {
	switch {
	case errors.Is(err, errUnknownFlow), errors.Is(err, flow.ErrUnknownRun):
		return http.StatusNotFound
	case errors.Is(err, kernel.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return taskStatus(err)
}

// applyFlow carries out a flow's action: cancel a run, or retry a failed stage
// of one. It returns what it acted on, or the status and the error that
// refused it. The run is read first, so that a refusal says why.
func (c *console) applyFlow(ctx context.Context, action string, req *actionRequest) (string, int, error) {
	if len(c.flows) == 0 {
		return "", http.StatusNotFound, errNoFlows
	}
	if action == ActionFlowRetry && req.Stage == "" {
		return "", http.StatusBadRequest, errors.New("console: stage is required (the failed stage to retry)")
	}
	ri, err := c.inspect(ctx, req.Flow, req.ID)
	if err != nil {
		return "", flowStatus(err), err
	}
	fr := c.flows[req.Flow]
	target := "flow " + quote(req.Flow) + " run " + quote(req.ID)
	if action == ActionFlowCancel {
		if ri.State.Terminal() {
			return "", http.StatusConflict, errors.New("console: " + target + " has ended " + ri.State.String() + ": nothing to cancel")
		}
		if err := fr.Cancel(ctx, req.ID); err != nil {
			return "", actionFlowStatus(err), err
		}
		return target, 0, nil
	}
	i := slices.IndexFunc(ri.Stages, func(s flow.StageStatus) bool { return s.Name == req.Stage })
	if i < 0 {
		return "", http.StatusNotFound, &paramError{msg: "console: " + target + " has no stage " + quote(req.Stage), err: errUnknownFlow}
	}
	if st := ri.Stages[i].State; st != flow.StageFailed {
		return "", http.StatusConflict, errors.New("console: stage " + quote(req.Stage) + " of " + target + " is " + st.String() + ", not failed: only a failed stage is retried")
	}
	if err := fr.RetryStage(ctx, req.ID, req.Stage); err != nil {
		return "", actionFlowStatus(err), err
	}
	return target + " stage " + quote(req.Stage), 0, nil
}

// actionFlowStatus is the HTTP status of the error of a flow's Cancel or
// RetryStage: 409 Conflict when the run or the stage is not in a state the
// action applies to, as far as the console can tell.
func actionFlowStatus(err error) int {
	if code := flowStatus(err); code != http.StatusInternalServerError {
		return code
	}
	return http.StatusConflict
}

// validateFlows checks Options.Flows.
func validateFlows(flows map[string]FlowRuns, bad func(field string, v any, reason string)) {
	for _, name := range slices.Sorted(maps.Keys(flows)) {
		switch fr := flows[name]; {
		case name == "":
			bad("Flows", name, "a flow's name must not be empty")
		case fr == nil:
			bad("Flows["+strconv.Quote(name)+"]", nil, "must not be nil")
		}
	}
}
