package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// commands are axctl's commands, in the order the usage lists them.
var commands = []command{
	{
		name: "tasks list", help: "list durable tasks by ID, filtered, a page at a time", max: 0,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.state, "state", "", "only tasks in this state (queued, running, failed, ...; live, dead)")
			fs.StringVar(&o.kind, "kind", "", "only tasks of this kind")
			fs.StringVar(&o.group, "group", "", "only tasks of this group")
			fs.StringVar(&o.key, "key", "", "only tasks of this key (with --group)")
			fs.StringVar(&o.owner, "owner", "", "only tasks this owner holds: its name or epoch, or pool (no owner)")
			pageFlags(fs, o)
			fs.StringVar(&o.before, "before", "", "the page before this cursor (the prev a page printed)")
		},
		run: tasksList,
	},
	{name: "tasks show", args: "ID", help: "show one task (never its payload)", min: 1, max: 1, run: tasksShow},
	{name: "dead list", help: "list the dead letters by ID, a page at a time", flags: pageFlags, run: deadList},
	{
		name: "dead requeue", args: "ID... or --all", help: "requeue dead letters: queued, due now, in the pool", max: -1,
		flags: func(fs *flag.FlagSet, o *options) { fs.BoolVar(&o.all, "all", false, "every dead letter") },
		run:   deadRequeue,
	},
	{
		name: "dead purge", args: "ID... or --all", help: "delete dead letters (asks first, unless --yes)", max: -1, confirm: true,
		flags: func(fs *flag.FlagSet, o *options) { fs.BoolVar(&o.all, "all", false, "every dead letter") },
		run:   deadPurge,
	},
	{name: "owners", help: "the kernels that joined the store (a console: the live ones)", run: ownersCmd},
	{name: "schedules list", help: "list the schedules", run: schedulesList},
	{name: "schedules pause", args: "NAME", help: "pause a schedule", min: 1, max: 1, run: schedulePause},
	{name: "schedules resume", args: "NAME", help: "resume a schedule", min: 1, max: 1, run: scheduleResume},
	{name: "schedules trigger", args: "NAME", help: "fire one occurrence of a schedule now", min: 1, max: 1, run: scheduleTrigger},
	{
		name: "migrate", help: "create the store's tables, or upgrade them", target: dbOnly, run: migrateCmd,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.listIndexes, "list-indexes", false, "add the indexes that list a kind's or a group's tasks directly (mysqlstore.Options.ListIndexes)")
		},
	},
	{name: "stats", help: "the overview: queues, rates, percentiles, the store owner", target: urlOnly, run: statsCmd},
	{name: "replicas", help: "every live kernel on the store, with its figures", target: urlOnly, run: replicasCmd},
	{name: "groups", help: "the groups: waiting, running, keys, throttles, breakers", target: urlOnly, run: groupsCmd},
	{
		name: "zombies", help: "the functions still running past their timeout", target: urlOnly, run: zombiesCmd,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.stacks, "stacks", false, "print each zombie's stack")
		},
	},
	{
		name: "flows", help: "the runs of the durable flows: state, stages and shards done", target: urlOnly, run: flowsCmd,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.flow, "flow", "", "only the runs of this flow")
			pageFlags(fs, o)
		},
	},
	{name: "flow cancel", args: "RUN", help: "cancel a flow's run", min: 1, max: 1, target: urlOnly, flags: flowFlag, run: flowCancel},
	{name: "flow retry", args: "RUN STAGE", help: "run a failed stage of a flow's run again", min: 2, max: 2, target: urlOnly, flags: flowFlag, run: flowRetry},
	{name: "flow", args: "RUN", help: "one run of a flow: its stages in order, their states and shards", min: 1, max: 1, target: urlOnly, flags: flowFlag, run: flowShow},
	{name: "pause", help: "pause a group, a key of a group, a priority or a kind", target: urlOnly, flags: selectorFlags, run: pauseCmd},
	{name: "resume", help: "resume a group, a key of a group, a priority or a kind", target: urlOnly, flags: selectorFlags, run: resumeCmd},
}

func pageFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.after, "after", "", "the page after this cursor (the next a page printed)")
	fs.IntVar(&o.limit, "limit", limitDefault, fmt.Sprintf("the page's size, 1 to %d", limitMax))
}

func flowFlag(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.flow, "flow", "", "the run's flow (default: the console's flow that has the run)")
}

func selectorFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.group, "group", "", "a group of kernel.Config.Groups")
	fs.StringVar(&o.key, "key", "", "a key of --group")
	fs.StringVar(&o.priority, "priority", "", "high, normal or low")
	fs.StringVar(&o.kind, "kind", "", "a task kind")
}

// usage writes the commands and the global flags.
func (c *cli) usage(w io.Writer) {
	_, _ = fmt.Fprint(w, `axctl: the operator's command line for ax.

usage: axctl [global flags] COMMAND [ARGS] [flags]

Against the database (--dsn) or a kernel's console (--url):
`)
	for i := range commands {
		cmd := &commands[i]
		if cmd.target == urlOnly && (i == 0 || commands[i-1].target != urlOnly) {
			_, _ = fmt.Fprintln(w, "\nAgainst a console only (--url): the in-memory figures and controls:")
		}
		suffix := ""
		if cmd.target == dbOnly {
			suffix = " (--dsn only)"
		}
		_, _ = fmt.Fprintf(w, "  %-34s %s%s\n", cmd.name+" "+cmd.args, cmd.help, suffix)
	}
	_, _ = fmt.Fprint(w, "\nGlobal flags:\n")
	fs := flag.NewFlagSet("axctl", flag.ContinueOnError)
	var o options
	o.registerGlobal(fs, &globalDefaults)
	fs.SetOutput(w)
	fs.PrintDefaults()
	_, _ = fmt.Fprint(w, `
Exit status: 0 done; 1 error; 2 usage (a bad flag or argument); 3 not found;
4 refused (by the console, at the prompt, or by the tasks' states).
'axctl COMMAND -h' shows a command's flags.
`)
}

func (c *cli) commandUsage(w io.Writer, cmd *command, fs *flag.FlagSet) {
	_, _ = fmt.Fprintf(w, "usage: axctl %s %s [flags]\n\n%s.\n\nFlags (the global ones too):\n", cmd.name, cmd.args, cmd.help)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	e := json.NewEncoder(c.stdout)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// printRaw writes a console's JSON as it came, indented.
func (c *cli) printRaw(m json.RawMessage) error {
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		return err
	}
	return c.printJSON(v)
}

func (c *cli) table(cols []column, rows [][]string) error {
	return writeTable(c.stdout, c.o.width, cols, rows)
}

// tfmt formats a time for a table: UTC, to the second.
func tfmt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// shortTime formats a time for a list: UTC, without the year.
func shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("01-02 15:04:05")
}

// msfmt formats milliseconds for a table.
func msfmt(ms float64) string {
	switch {
	case ms == 0:
		return "0"
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	case ms < 60_000:
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + "s"
	}
	return sinceMS(ms).Round(time.Second).String()
}

func ratefmt(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) }

func itoa[T ~int | ~int64 | ~uint64](n T) string { return strconv.FormatInt(int64(n), 10) }

// --- tasks

var taskCols = []column{
	{title: "ID", min: 14},
	{title: "KIND", min: 12},
	{title: "STATE", fixed: true},
	{title: "PRI", fixed: true},
	{title: "GROUP/KEY", min: 10},
	{title: "OWNER", min: 8},
	{title: "ATT", right: true, fixed: true},
	{title: "RUN AT (UTC)", fixed: true},
	{title: "LAST ERROR"},
}

func taskCells(t *taskRow) []string {
	gk := t.Group
	if t.Key != "" {
		gk += "/" + t.Key
	}
	att := itoa(t.Attempt)
	if t.MaxAttempts > 0 {
		att += "/" + itoa(t.MaxAttempts)
	}
	owner := t.Owner
	if owner == "" && contains([]string{"delayed", "queued", "retrying"}, t.State) {
		owner = "pool"
	}
	return []string{t.ID, t.Kind, t.State, t.Priority, gk, owner, att, shortTime(t.RunAt), firstLine(t.LastError)}
}

// firstLine is s up to its first line break, marked when it goes on.
func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// printPage prints a page of tasks, and on stderr how to get the next one.
func (c *cli) printPage(p taskPage, cols []column, cells func(*taskRow) []string) error {
	if p.Tasks == nil {
		p.Tasks = []taskRow{}
	}
	if c.o.json {
		return c.printJSON(p)
	}
	rows := make([][]string, len(p.Tasks))
	for i := range p.Tasks {
		rows[i] = cells(&p.Tasks[i])
	}
	if err := c.table(cols, rows); err != nil {
		return err
	}
	if p.Prev != "" {
		_, _ = fmt.Fprintf(c.stderr, "previous page: --before %s\n", strconv.Quote(p.Prev))
	}
	if p.Next != "" {
		_, _ = fmt.Fprintf(c.stderr, "next page: --after %s\n", strconv.Quote(p.Next))
	}
	if p.hint != "" {
		_, _ = fmt.Fprintln(c.stderr, p.hint)
	}
	return nil
}

var taskStates = []string{"delayed", "queued", "running", "retrying", "succeeded", "failed", "timed_out", "canceled", "evicted", "abandoned"}

// deadStates are the states of dead letters.
var deadStates = []string{"failed", "timed_out", "evicted", "abandoned"}

func tasksList(ctx context.Context, c *cli, _ []string) error {
	o := &c.o
	if err := c.checkLimit(); err != nil {
		return err
	}
	if o.state != "" && !contains(taskStates, o.state) {
		return usagef("--state = %q: must be one of %s", o.state, strings.Join(taskStates, ", "))
	}
	if o.key != "" && o.group == "" {
		return usagef("--key = %q: needs --group (a key belongs to a group)", o.key)
	}
	if o.after != "" && o.before != "" {
		return usagef("--before: give --after or --before, not both")
	}
	p, err := c.b.tasks(ctx, taskFilter{
		state: o.state, kind: o.kind, group: o.group, key: o.key, owner: o.owner, after: o.after, before: o.before, limit: o.limit,
	})
	if err != nil {
		return err
	}
	return c.printPage(p, taskCols, taskCells)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func tasksShow(ctx context.Context, c *cli, args []string) error {
	t, err := c.b.task(ctx, args[0])
	if err != nil {
		return err
	}
	if c.o.json {
		return c.printJSON(t)
	}
	timeout := "default"
	if t.TimeoutMS > 0 {
		timeout = (time.Duration(t.TimeoutMS) * time.Millisecond).String()
	}
	maxAtt := "default"
	if t.MaxAttempts > 0 {
		maxAtt = itoa(t.MaxAttempts)
	}
	rows := [][]string{
		{"id", t.ID},
		{"kind", t.Kind},
		{"state", t.State},
		{"priority", t.Priority},
		{"group", t.Group},
		{"key", t.Key},
		{"unique key", t.UniqueKey},
		{"owner", t.Owner},
		{"attempt", itoa(t.Attempt)},
		{"max attempts", maxAtt},
		{"fence", itoa(t.Fence)},
		{"run at", tfmt(t.RunAt)},
		{"timeout", timeout},
		{"payload", itoa(t.PayloadBytes) + " bytes"},
		{"created", tfmt(t.CreatedAt)},
		{"updated", tfmt(t.UpdatedAt)},
	}
	if err := c.table([]column{{title: "FIELD", fixed: true}, {title: "VALUE (UTC)"}}, rows); err != nil {
		return err
	}
	if t.LastError == "" {
		return nil
	}
	// The last error whole, its lines wrapped to the width.
	c.outln("last error:")
	c.wrapped(t.LastError)
	return nil
}

// --- dead letters

var deadCols = []column{
	{title: "ID", min: 20},
	{title: "KIND", min: 16},
	{title: "STATE", fixed: true},
	{title: "ATT", right: true, fixed: true},
	{title: "UPDATED (UTC)", fixed: true},
	{title: "LAST ERROR", min: 16},
}

func deadCells(t *taskRow) []string {
	return []string{t.ID, t.Kind, t.State, itoa(t.Attempt), tfmt(t.UpdatedAt), firstLine(t.LastError)}
}

func deadList(ctx context.Context, c *cli, _ []string) error {
	if err := c.checkLimit(); err != nil {
		return err
	}
	p, err := c.b.deadLetters(ctx, c.o.limit, c.o.after)
	if err != nil {
		return err
	}
	return c.printPage(p, deadCols, deadCells)
}

// idsOrAll checks that a command got IDs or --all, not both.
func (c *cli) idsOrAll(name string, ids []string) error {
	switch {
	case c.o.all && len(ids) > 0:
		return usagef("%s: give IDs or --all, not both", name)
	case !c.o.all && len(ids) == 0:
		return usagef("%s: give the IDs of dead letters, or --all", name)
	}
	for _, id := range ids {
		if id == "" {
			return usagef("%s: an empty ID", name)
		}
	}
	return nil
}

// allDead returns the IDs of every dead letter, walking each dead state's pages.
func (c *cli) allDead(ctx context.Context) ([]string, error) {
	var ids []string
	for _, st := range deadStates {
		f := taskFilter{state: st, limit: limitMax}
		for {
			p, err := c.b.tasks(ctx, f)
			if err != nil {
				return nil, err
			}
			for i := range p.Tasks {
				ids = append(ids, p.Tasks[i].ID)
			}
			if p.Next == "" {
				break
			}
			f.after = p.Next
		}
	}
	return ids, nil
}

// skipped is an ID a dead-letter command left alone, and why.
type skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"` // "unknown", or the task's state
}

// deadOf reads the tasks named ids (each once) and returns those that are dead
// letters, and the others with why they are left alone, which it reports on
// stderr. Its error is the exit status the command ends with once it acted on
// the dead letters: not found when an ID is unknown, else refused.
func (c *cli) deadOf(ctx context.Context, what string, ids []string) (dead []string, left []skipped, exit error, err error) {
	seen := make(map[string]bool, len(ids))
	unknown := false
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		t, err := c.b.task(ctx, id)
		switch {
		case exitCode(err) == exitNotFound:
			left = append(left, skipped{ID: id, Reason: "unknown"})
			unknown = true
		case err != nil:
			return nil, nil, nil, err
		case isDead(t.State):
			dead = append(dead, id)
		default:
			left = append(left, skipped{ID: id, Reason: t.State})
		}
	}
	for _, s := range left {
		reason := "no such task"
		if s.Reason != "unknown" {
			reason = "not a dead letter: " + s.Reason
		}
		_, _ = fmt.Fprintf(c.stderr, "axctl: %s %s: %s\n", what, strconv.Quote(s.ID), reason)
	}
	switch {
	case unknown:
		exit = notFoundf("%s: %d of the IDs were left alone (above)", what, len(left))
	case len(left) > 0:
		exit = refusedf("%s: %d of the IDs were left alone (above)", what, len(left))
	}
	return dead, left, exit, nil
}

// deadIDs returns the dead letters a command acts on: every one with --all, else
// those among ids.
func (c *cli) deadIDs(ctx context.Context, what string, ids []string) (dead []string, left []skipped, exit error, err error) {
	if err := c.idsOrAll(what, ids); err != nil {
		return nil, nil, nil, err
	}
	if c.o.all {
		dead, err = c.allDead(ctx)
		return dead, nil, nil, err
	}
	return c.deadOf(ctx, what, ids)
}

func deadRequeue(ctx context.Context, c *cli, ids []string) error {
	dead, left, exit, err := c.deadIDs(ctx, "dead requeue", ids)
	if err != nil {
		return err
	}
	n := 0
	if len(dead) > 0 {
		if n, err = c.b.requeue(ctx, dead); err != nil {
			return err
		}
	}
	if c.o.json {
		err = c.printJSON(struct {
			Requeued int       `json:"requeued"`
			Skipped  []skipped `json:"skipped,omitempty"`
		}{n, left})
	} else {
		_, err = fmt.Fprintf(c.stdout, "requeued %d dead letter(s)\n", n)
	}
	return cmp.Or(err, exit)
}

func deadPurge(ctx context.Context, c *cli, ids []string) error {
	dead, left, exit, err := c.deadIDs(ctx, "dead purge", ids)
	if err != nil {
		return err
	}
	n := 0
	if len(dead) > 0 {
		what := fmt.Sprintf("%d dead letter(s)", len(dead))
		if c.o.all {
			what = fmt.Sprintf("all %d dead letters", len(dead))
		}
		if err := c.confirm("purge " + what + "? They are deleted for good."); err != nil {
			return err
		}
		// The operator's time to answer does not count in --timeout.
		var cancel context.CancelFunc
		ctx, cancel = c.withTimeout()
		defer cancel()
		if n, err = c.b.purge(ctx, dead); err != nil {
			return err
		}
	}
	if c.o.json {
		err = c.printJSON(struct {
			Purged  int       `json:"purged"`
			Skipped []skipped `json:"skipped,omitempty"`
		}{n, left})
	} else {
		_, err = fmt.Fprintf(c.stdout, "purged %d dead letter(s)\n", n)
	}
	return cmp.Or(err, exit)
}

func isDead(state string) bool {
	switch state {
	case "failed", "timed_out", "evicted", "abandoned":
		return true
	}
	return false
}

// --- owners, schedules, migrate

func ownersCmd(ctx context.Context, c *cli, _ []string) error {
	os, err := c.b.owners(ctx)
	if err != nil {
		return err
	}
	if os == nil {
		os = []ownerRow{}
	}
	if c.o.json {
		return c.printJSON(struct {
			Owners []ownerRow `json:"owners"`
		}{os})
	}
	rows := make([][]string, len(os))
	for i, o := range os {
		live := "ended"
		if o.Live {
			live = "live"
		}
		tasks := ""
		if o.Tasks != nil {
			tasks = itoa(*o.Tasks)
		}
		rows[i] = []string{o.Name, itoa(o.Epoch), live, tfmt(o.Expires), (time.Duration(o.LeaseMS) * time.Millisecond).String(), tasks}
	}
	return c.table([]column{
		{title: "NAME"},
		{title: "EPOCH", right: true, fixed: true},
		{title: "LEASE", fixed: true},
		{title: "EXPIRES (UTC)", fixed: true},
		{title: "LENGTH", right: true, fixed: true},
		{title: "TASKS", right: true, fixed: true},
	}, rows)
}

func scheduleState(s *scheduleRow) string {
	switch {
	case s.Paused:
		return "paused"
	case s.Ended:
		return "ended"
	}
	return "active"
}

func schedulesList(ctx context.Context, c *cli, _ []string) error {
	ss, err := c.b.schedules(ctx)
	if err != nil {
		return err
	}
	if ss == nil {
		ss = []scheduleRow{}
	}
	if c.o.json {
		return c.printJSON(struct {
			Schedules []scheduleRow `json:"schedules"`
		}{ss})
	}
	cols := []column{{title: "NAME"}, {title: "SPEC"}, {title: "STATE", fixed: true}, {title: "NEXT (UTC)", fixed: true}, {title: "LAST (UTC)", fixed: true}}
	if c.o.url != "" {
		cols = append(cols, column{title: "FIRES", right: true, fixed: true}, column{title: "OUTCOME"})
	}
	rows := make([][]string, len(ss))
	for i := range ss {
		s := &ss[i]
		rows[i] = []string{s.Name, s.Spec, scheduleState(s), tfmt(s.Next), tfmt(s.Last)}
		if c.o.url != "" {
			rows[i] = append(rows[i], itoa(s.Fires), s.LastOutcome)
		}
	}
	return c.table(cols, rows)
}

func (c *cli) done(action, target string) error {
	if c.o.json {
		return c.printJSON(actionAnswer{OK: true, Action: action, Target: target})
	}
	_, err := fmt.Fprintf(c.stdout, "%s: %s\n", action, printable(target))
	return err
}

func schedulePause(ctx context.Context, c *cli, args []string) error {
	if err := c.b.pauseSchedule(ctx, args[0], true); err != nil {
		return err
	}
	return c.done("schedule.pause", args[0])
}

func scheduleResume(ctx context.Context, c *cli, args []string) error {
	if err := c.b.pauseSchedule(ctx, args[0], false); err != nil {
		return err
	}
	return c.done("schedule.resume", args[0])
}

func scheduleTrigger(ctx context.Context, c *cli, args []string) error {
	if err := c.b.triggerSchedule(ctx, args[0]); err != nil {
		return err
	}
	return c.done("schedule.trigger", args[0])
}

func migrateCmd(ctx context.Context, c *cli, _ []string) error {
	d := c.b.(*db)
	if err := d.migrate(ctx); err != nil {
		return d.wrap(err)
	}
	return c.done("migrate", d.s.Table())
}
