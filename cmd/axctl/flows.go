package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The console's flows (api/v1/flows, api/v1/flows/run), as far as axctl reads
// them; --json prints the console's JSON as it came.

type consoleFlows struct {
	Flows []struct {
		Name string       `json:"name"`
		Runs []consoleRun `json:"runs"`
		Next string       `json:"next"`
	} `json:"flows"`
}

type consoleRun struct {
	ID          string    `json:"id"`
	Flow        string    `json:"flow"`
	State       string    `json:"state"`
	Created     time.Time `json:"created"`
	Ended       time.Time `json:"ended"`
	Error       string    `json:"error"`
	StagesDone  int       `json:"stages_done"`
	StagesTotal int       `json:"stages_total"`
	ShardsDone  int       `json:"shards_done"`
	Shards      int       `json:"shards"`
	Progress    float64   `json:"progress"`
	Stages      []struct {
		Name       string  `json:"name"`
		State      string  `json:"state"`
		Shards     int     `json:"shards"`
		ShardsDone int     `json:"shards_done"`
		Progress   float64 `json:"progress"`
		Error      string  `json:"error"`
	} `json:"stages"`
}

// pctfmt formats a part of 1 as a percentage.
func pctfmt(p float64) string { return strconv.FormatFloat(100*p, 'f', 1, 64) + "%" }

// shardsfmt formats shards done of total, "-" when there are none.
func shardsfmt(done, total int) string {
	if total == 0 {
		return ""
	}
	return itoa(done) + "/" + itoa(total)
}

func flowsCmd(ctx context.Context, c *cli, _ []string) error {
	if err := c.checkLimit(); err != nil {
		return err
	}
	o := &c.o
	q := url.Values{"limit": {itoa(o.limit)}}
	switch {
	case o.flow != "":
		q.Set("flow", o.flow)
		if o.after != "" {
			q.Set("after", o.after)
		}
	case o.after != "":
		return usagef("--after = %q: needs --flow (a cursor is one flow's)", o.after)
	}
	var fs consoleFlows
	if table, err := c.fetch(ctx, "api/v1/flows?"+q.Encode(), &fs); !table {
		return err
	}
	var rows [][]string
	for _, f := range fs.Flows {
		for _, r := range f.Runs {
			rows = append(rows, []string{
				f.Name, r.ID, r.State, itoa(r.StagesDone) + "/" + itoa(r.StagesTotal), shardsfmt(r.ShardsDone, r.Shards),
				pctfmt(r.Progress), shortTime(r.Created), shortTime(r.Ended), firstLine(r.Error),
			})
		}
	}
	err := c.table([]column{
		{title: "FLOW", min: 8},
		{title: "RUN", min: 14},
		{title: "STATE", fixed: true},
		{title: "STAGES", right: true, fixed: true},
		{title: "SHARDS", right: true, fixed: true},
		{title: "DONE", right: true, fixed: true},
		{title: "CREATED (UTC)", fixed: true},
		{title: "ENDED (UTC)", fixed: true},
		{title: "ERROR"},
	}, rows)
	if err != nil {
		return err
	}
	for _, f := range fs.Flows {
		if f.Next != "" {
			_, _ = fmt.Fprintf(c.stderr, "next page of %s: --flow %s --after %s\n", printable(f.Name), strconv.Quote(f.Name), strconv.Quote(f.Next))
		}
	}
	return nil
}

// findRun returns the flow that has the run id and its JSON: --flow's, or the
// one flow of the console's that knows it.
func (c *cli) findRun(ctx context.Context, id string) (string, []byte, error) {
	w := c.b.(*web)
	names := []string{c.o.flow}
	if c.o.flow == "" {
		var fs consoleFlows
		if err := w.do(ctx, "api/v1/flows?limit=1", nil, &fs); err != nil {
			return "", nil, err
		}
		names = names[:0]
		for _, f := range fs.Flows {
			names = append(names, f.Name)
		}
	}
	for _, name := range names {
		m, err := w.raw(ctx, "api/v1/flows/run?"+url.Values{"flow": {name}, "id": {id}}.Encode())
		if err == nil {
			return name, m, nil
		}
		if len(names) == 1 || exitCode(err) != exitNotFound {
			return "", nil, err
		}
	}
	return "", nil, notFoundf("no run %s in the console's flows (%s)", strconv.Quote(id), strings.Join(quoteAll(names), ", "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func flowShow(ctx context.Context, c *cli, args []string) error {
	if args[0] == "" {
		return usagef("flow: an empty run ID")
	}
	_, m, err := c.findRun(ctx, args[0])
	if err != nil {
		return err
	}
	if c.o.json {
		return c.printRaw(m)
	}
	var r consoleRun
	if err := json.Unmarshal(m, &r); err != nil {
		return fmt.Errorf("console: GET api/v1/flows/run: the answer is not the JSON expected: %w", err)
	}
	c.outf("run %s  flow %s  state %s\n", printable(r.ID), printable(r.Flow), r.State)
	c.outf("created %s  ended %s\n", tfmt(r.Created), cmp.Or(tfmt(r.Ended), "-"))
	c.outf("progress %s: %d of %d stages succeeded", pctfmt(r.Progress), r.StagesDone, r.StagesTotal)
	if r.Shards > 0 {
		c.outf(", %d of %d shards", r.ShardsDone, r.Shards)
	}
	c.outf("\n\n")
	rows := make([][]string, len(r.Stages))
	for i, s := range r.Stages {
		rows[i] = []string{s.Name, s.State, shardsfmt(s.ShardsDone, s.Shards), pctfmt(s.Progress), firstLine(s.Error)}
	}
	if err := c.table([]column{
		{title: "STAGE", min: 10},
		{title: "STATE", fixed: true},
		{title: "SHARDS", right: true, fixed: true},
		{title: "DONE", right: true, fixed: true},
		{title: "ERROR"},
	}, rows); err != nil {
		return err
	}
	if r.Error == "" {
		return nil
	}
	c.outln("error:")
	c.wrapped(r.Error)
	return nil
}

// wrapped prints text whole, printable, its lines wrapped to the width and
// indented.
func (c *cli) wrapped(text string) {
	for line := range strings.Lines(text) {
		r := []rune(printable(strings.TrimRight(line, "\r\n")))
		for len(r) > c.o.width-2 {
			c.outf("  %s\n", string(r[:c.o.width-2]))
			r = r[c.o.width-2:]
		}
		c.outf("  %s\n", string(r))
	}
}

// flowAction posts a flow's action on the run id (of --flow, or of the flow
// that knows it).
func flowAction(ctx context.Context, c *cli, action, id, stage string) error {
	if id == "" {
		return usagef("%s: an empty run ID", action)
	}
	name, _, err := c.findRun(ctx, id)
	if err != nil {
		return err
	}
	path := "api/v1/flows/cancel"
	if action == "flow.retry" {
		path = "api/v1/flows/retry"
	}
	var a actionAnswer
	if err := c.b.(*web).do(ctx, path, flowBody{Flow: name, ID: id, Stage: stage}, &a); err != nil {
		return err
	}
	return c.done(action, a.Target)
}

type flowBody struct {
	Flow  string `json:"flow"`
	ID    string `json:"id"`
	Stage string `json:"stage,omitempty"`
}

func flowCancel(ctx context.Context, c *cli, args []string) error {
	return flowAction(ctx, c, "flow.cancel", args[0], "")
}

func flowRetry(ctx context.Context, c *cli, args []string) error {
	if args[1] == "" {
		return usagef("flow retry: an empty stage name")
	}
	return flowAction(ctx, c, "flow.retry", args[0], args[1])
}
