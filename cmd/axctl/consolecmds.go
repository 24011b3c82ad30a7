package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The console's answers that the in-memory commands print as tables; --json
// prints the console's JSON as it came (docs/console.md, "The JSON API").

type consoleOverview struct {
	Running    int `json:"running"`
	Dispatched int `json:"dispatched"`
	Delayed    int `json:"delayed"`
	Zombies    int `json:"zombies"`
	Executors  int `json:"executors"`
	Priorities []struct {
		Priority string `json:"priority"`
		Queued   int    `json:"queued"`
		Rates    struct {
			Submitted, Succeeded, Failed, Retried, Rejected float64
			TimedOut                                        float64 `json:"timed_out"`
		} `json:"rates"`
		Wait consolePercentiles `json:"wait"`
		Exec consolePercentiles `json:"exec"`
	} `json:"priorities"`
	Store *struct {
		Owner     string `json:"owner"`
		Epoch     uint64 `json:"epoch"`
		Down      bool   `json:"down"`
		Pending   int    `json:"pending"`
		Commits   uint64 `json:"commits"`
		Errors    uint64 `json:"errors"`
		LeaseLost uint64 `json:"lease_lost"`
		Claimed   uint64 `json:"claimed"`
	} `json:"store"`
}

type consolePercentiles struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// fetch gets an API path: printed as it came with --json, else decoded into v.
// It reports whether the caller should go on to print a table.
func (c *cli) fetch(ctx context.Context, rel string, v any) (bool, error) {
	w := c.b.(*web)
	m, err := w.raw(ctx, rel)
	if err != nil {
		return false, err
	}
	if c.o.json {
		return false, c.printRaw(m)
	}
	if err := json.Unmarshal(m, v); err != nil {
		return false, fmt.Errorf("console: GET %s: the answer is not the JSON expected: %w", rel, err)
	}
	return true, nil
}

func statsCmd(ctx context.Context, c *cli, _ []string) error {
	var ov consoleOverview
	if table, err := c.fetch(ctx, "api/v1/overview", &ov); !table {
		return err
	}
	c.outf("running %d  dispatched %d  delayed %d  zombies %d  executors %d\n\n",
		ov.Running, ov.Dispatched, ov.Delayed, ov.Zombies, ov.Executors)
	rows := make([][]string, len(ov.Priorities))
	for i, p := range ov.Priorities {
		rows[i] = []string{
			p.Priority, itoa(p.Queued), ratefmt(p.Rates.Submitted), ratefmt(p.Rates.Succeeded),
			ratefmt(p.Rates.Failed + p.Rates.TimedOut), ratefmt(p.Rates.Retried), ratefmt(p.Rates.Rejected),
			msfmt(p.Wait.P50), msfmt(p.Wait.P99), msfmt(p.Exec.P50), msfmt(p.Exec.P99),
		}
	}
	r := column{right: true, fixed: true}
	cols := []column{{title: "PRIORITY", fixed: true}, r, r, r, r, r, r, r, r, r, r}
	for i, t := range []string{"QUEUED", "IN/S", "OK/S", "FAIL/S", "RETRY/S", "REJECT/S", "WAIT P50", "WAIT P99", "EXEC P50", "EXEC P99"} {
		cols[i+1].title = t
	}
	if err := c.table(cols, rows); err != nil {
		return err
	}
	if s := ov.Store; s != nil {
		down := ""
		if s.Down {
			down = "  DOWN"
		}
		c.outf("\nstore owner %s  epoch %d  pending %d  commits %d  errors %d  leases lost %d  claimed %d%s\n",
			printable(s.Owner), s.Epoch, s.Pending, s.Commits, s.Errors, s.LeaseLost, s.Claimed, down)
	}
	return nil
}

type consoleGroups struct {
	Groups []struct {
		Name          string `json:"name"`
		Paused        bool   `json:"paused"`
		Waiting       int    `json:"waiting"`
		Running       int    `json:"running"`
		Keys          int    `json:"keys"`
		ThrottledKeys int    `json:"throttled_keys"`
		PausedKeys    int    `json:"paused_keys"`
		OpenBreakers  int    `json:"open_breakers"`
		RateLimited   uint64 `json:"rate_limited"`
	} `json:"groups"`
}

func groupsCmd(ctx context.Context, c *cli, _ []string) error {
	var gs consoleGroups
	if table, err := c.fetch(ctx, "api/v1/groups", &gs); !table {
		return err
	}
	rows := make([][]string, len(gs.Groups))
	for i, g := range gs.Groups {
		state := "running"
		if g.Paused {
			state = "paused"
		}
		rows[i] = []string{g.Name, state, itoa(g.Waiting), itoa(g.Running), itoa(g.Keys), itoa(g.ThrottledKeys), itoa(g.PausedKeys), itoa(g.OpenBreakers), itoa(g.RateLimited)}
	}
	r := column{right: true, fixed: true}
	cols := []column{{title: "GROUP"}, {title: "STATE", fixed: true}, r, r, r, r, r, r, r}
	for i, t := range []string{"WAITING", "RUNNING", "KEYS", "THROTTLED", "PAUSED KEYS", "OPEN BREAKERS", "RATE LIMITED"} {
		cols[i+2].title = t
	}
	return c.table(cols, rows)
}

type consoleZombies struct {
	Zombies []struct {
		TaskID  string    `json:"task_id"`
		Attempt int       `json:"attempt"`
		Since   time.Time `json:"since"`
		AgeMS   float64   `json:"age_ms"`
		Stack   string    `json:"stack"`
	} `json:"zombies"`
}

func zombiesCmd(ctx context.Context, c *cli, _ []string) error {
	var zs consoleZombies
	if table, err := c.fetch(ctx, "api/v1/zombies", &zs); !table {
		return err
	}
	rows := make([][]string, len(zs.Zombies))
	for i, z := range zs.Zombies {
		rows[i] = []string{z.TaskID, itoa(z.Attempt), tfmt(z.Since), msfmt(z.AgeMS)}
	}
	err := c.table([]column{{title: "TASK"}, {title: "ATTEMPT", right: true, fixed: true}, {title: "SINCE (UTC)", fixed: true}, {title: "AGE", right: true, fixed: true}}, rows)
	if err != nil || !c.o.stacks {
		return err
	}
	for _, z := range zs.Zombies {
		c.outf("\n%s (attempt %d):\n", printable(z.TaskID), z.Attempt)
		if z.Stack == "" {
			c.outln("  (no stack yet: it has not outlived kernel.Config.ZombieGrace)")
			continue
		}
		for line := range strings.Lines(z.Stack) {
			c.outf("  %s\n", printable(strings.TrimRight(line, "\n")))
		}
	}
	return nil
}

// selector checks the selector flags of pause and resume.
func (c *cli) selector(name string) (actionBody, error) {
	o := &c.o
	n := 0
	for _, v := range []string{o.group, o.priority, o.kind} {
		if v != "" {
			n++
		}
	}
	switch {
	case n != 1:
		return actionBody{}, usagef("%s: give exactly one of --group, --priority and --kind", name)
	case o.key != "" && o.group == "":
		return actionBody{}, usagef("--key = %q: needs --group (a key belongs to a group)", o.key)
	case o.priority != "" && !contains([]string{"high", "normal", "low"}, o.priority):
		return actionBody{}, usagef("--priority = %q: must be high, normal or low", o.priority)
	}
	return actionBody{Group: o.group, Key: o.key, Priority: o.priority, Kind: o.kind}, nil
}

func pauseCmd(ctx context.Context, c *cli, _ []string) error { return pauseResume(ctx, c, true) }

func resumeCmd(ctx context.Context, c *cli, _ []string) error { return pauseResume(ctx, c, false) }

func pauseResume(ctx context.Context, c *cli, paused bool) error {
	name := "resume"
	if paused {
		name = "pause"
	}
	sel, err := c.selector(name)
	if err != nil {
		return err
	}
	target, err := c.b.(*web).pause(ctx, sel, paused)
	if err != nil {
		return err
	}
	return c.done(name, target)
}

// consoleReplicas is GET api/v1/replicas: every live kernel on the console's
// store, with the figures it published last.
type consoleReplicas struct {
	Store    bool   `json:"store"`
	Error    string `json:"error"`
	Replicas []struct {
		Owner         string    `json:"owner"`
		Epoch         uint64    `json:"epoch"`
		Self          bool      `json:"self"`
		LeaseMS       float64   `json:"lease_ms"`
		LeaseLeftMS   float64   `json:"lease_left_ms"`
		LastHeartbeat time.Time `json:"last_heartbeat"`
		Published     time.Time `json:"published"`
		AgeMS         float64   `json:"age_ms"`
		Version       string    `json:"version"`
		Degraded      bool      `json:"degraded"`
		Zombies       int       `json:"zombies"`
		Sum           struct {
			Queued    int     `json:"queued"`
			Running   int     `json:"running"`
			Delayed   int     `json:"delayed"`
			WaitP99MS float64 `json:"wait_p99_ms"`
			Rates     struct {
				Submitted, Succeeded, Failed float64
				TimedOut                     float64 `json:"timed_out"`
			} `json:"rates"`
		} `json:"sum"`
	} `json:"replicas"`
}

func replicasCmd(ctx context.Context, c *cli, _ []string) error {
	var rs consoleReplicas
	if table, err := c.fetch(ctx, "api/v1/replicas", &rs); !table {
		return err
	}
	if !rs.Store {
		return usagef("replicas: the console at %s has no store that keeps replicas (console.Options.Store)", c.o.url)
	}
	if rs.Error != "" {
		return fmt.Errorf("replicas: the console's store did not answer: %s", rs.Error)
	}
	rows := make([][]string, len(rs.Replicas))
	for i, r := range rs.Replicas {
		owner := r.Owner
		if r.Self {
			owner += " *"
		}
		state := "ok"
		if r.Degraded {
			state = "degraded"
		}
		age := ""
		if !r.Published.IsZero() {
			age = msfmt(r.AgeMS)
		}
		s := &r.Sum
		rows[i] = []string{
			owner, itoa(r.Epoch), msfmt(r.LeaseLeftMS), age, state, itoa(s.Queued), itoa(s.Running),
			ratefmt(s.Rates.Submitted), ratefmt(s.Rates.Succeeded), ratefmt(s.Rates.Failed + s.Rates.TimedOut), msfmt(s.WaitP99MS),
		}
	}
	r := column{right: true, fixed: true}
	cols := []column{{title: "OWNER (* this one)", min: 10}, r, r, r, {title: "STATE", fixed: true}, r, r, r, r, r, r}
	for i, t := range map[int]string{
		1: "EPOCH", 2: "LEASE", 3: "AGE", 5: "QUEUED", 6: "RUNNING", 7: "IN/S", 8: "OK/S", 9: "FAIL/S", 10: "WAIT P99",
	} {
		cols[i].title = t
	}
	return c.table(cols, rows)
}
