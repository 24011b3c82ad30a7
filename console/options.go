package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store"
)

// Options configure the handler [New] returns. Kernel is required; the zero
// value of every other field is valid.
type Options struct {
	// Kernel is the kernel the console shows and acts on. Required.
	Kernel *kernel.Kernel

	// Scheduler, if set, adds its schedules to the console (the Schedules page and
	// api/v1/schedules). If nil, the console shows no schedules.
	Scheduler *schedule.Scheduler

	// Store, if set, is the store the kernel keeps its durable tasks in (the
	// kernel.Config.Store it was made with, or a store on the same tables): the
	// Tasks pages and api/v1/tasks list its tasks, and the purge action deletes its
	// dead letters, when it implements [store.TaskLister], as storekit.MemoryStore
	// and mysqlstore.Store do; the overview and api/v1/replicas list every live
	// kernel on it with the figures it published, when it is a
	// [store.ReplicaStore]. The console only reads it, but for purges; the other
	// task actions go through the kernel. If nil, the console shows no durable
	// tasks and no other replica.
	Store store.Store

	// Flows, if set, are the durable flows the Flows pages and api/v1/flows show
	// and steer, by the flow's name: each a *flow.Durable ([flow.Register]) or
	// another [FlowRuns]. A name must not be empty. If empty, the console shows no
	// flows.
	Flows map[string]FlowRuns

	// Payloads enables the previews of task payloads and results (their first
	// 1 KiB) on a task's page and in api/v1/tasks/{id}. Payloads and results may
	// hold secrets. If false, the console shows their sizes only.
	Payloads bool

	// Actions enables the state-changing requests: pause and resume of a priority,
	// a group, a key or a durable kind; pause, resume and trigger of a schedule;
	// with a Store, cancel, run now, requeue and purge of a durable task; and with
	// Flows, cancel of a run and retry of a failed stage. If false, the console
	// is read-only and refuses every POST with 403 Forbidden.
	Actions bool

	// Authorize, if set, is called for every request before it is served, with
	// the action it asks for: ActionRead for a page, an API read or an asset, and
	// one of the other Action constants for a POST. It runs before the request's
	// body is read. A non-nil error refuses the request with 403 Forbidden and the
	// error's text. It must be safe for concurrent use. If nil, every read is
	// allowed, and actions are allowed when Actions is set.
	Authorize func(r *http.Request, action string) error

	// Prefix is the path the handler is mounted under when the requests reach it
	// with that prefix still on their path (a mux pattern without
	// [http.StripPrefix]), such as "/console"; it must start with '/'. Requests
	// outside it get 404 Not Found. If empty, paths are served as they arrive,
	// which suits a handler behind http.StripPrefix or mounted at the root.
	Prefix string

	// TrustedOrigins are origins ("https://ops.example.com") besides the
	// request's own host from which a browser may send actions: for a proxy
	// that rewrites the Host header. If empty, only same-origin requests act.
	TrustedOrigins []string

	// Interval is how often the console samples the kernel's Stats for its rates
	// and charts, between 10 ms and 1 min; the pages refresh at the same pace, but
	// at most twice a second. If zero, 1 s.
	Interval time.Duration

	// History is the number of samples the console keeps for its charts, at most
	// 100,000. If zero, 300 (five minutes at the default Interval).
	History int
}

// The actions Options.Authorize is asked about.
const (
	// ActionRead is every GET or HEAD: pages, API reads and the console's assets.
	ActionRead = "read"
	// ActionPause and ActionResume pause and resume a priority, a group, a key or a
	// durable kind ([kernel.Kernel.Pause]).
	ActionPause  = "pause"
	ActionResume = "resume"
	// ActionSchedulePause, ActionScheduleResume and ActionScheduleTrigger act on a
	// schedule ([schedule.Entry.Pause], [schedule.Entry.Resume],
	// [schedule.Entry.Trigger]).
	ActionSchedulePause   = "schedule.pause"
	ActionScheduleResume  = "schedule.resume"
	ActionScheduleTrigger = "schedule.trigger"
	// ActionTaskCancel, ActionTaskRunNow and ActionTaskRequeue cancel a live task,
	// make a waiting one due, and requeue dead letters, through the kernel
	// ([kernel.Kernel.Cancel], [kernel.Kernel.RunNow], [kernel.Kernel.Requeue]).
	ActionTaskCancel  = "task.cancel"
	ActionTaskRunNow  = "task.run_now"
	ActionTaskRequeue = "task.requeue"
	// ActionTaskPurge deletes dead letters from Options.Store
	// ([store.Store.Purge]), once confirmed.
	ActionTaskPurge = "task.purge"
	// ActionFlowCancel cancels a run of one of Options.Flows
	// ([FlowRuns.Cancel]); ActionFlowRetry runs a failed stage of one again
	// ([FlowRuns.RetryStage]).
	ActionFlowCancel = "flow.cancel"
	ActionFlowRetry  = "flow.retry"
)

// Limits and defaults of Options.
const (
	intervalDefault = time.Second
	intervalMin     = 10 * time.Millisecond
	intervalMax     = time.Minute
	refreshMin      = 500 * time.Millisecond
	historyDefault  = 300
	historyMax      = 100_000
)

// Validate returns nil for valid Options, and otherwise a *kernel.ConfigError
// (joined) naming each bad field.
func (o *Options) Validate() error {
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &kernel.ConfigError{Field: "console.Options." + field, Value: v, Reason: reason})
	}
	if o.Kernel == nil {
		bad("Kernel", nil, "is required")
	}
	if o.Prefix != "" && (!strings.HasPrefix(o.Prefix, "/") || strings.ContainsAny(o.Prefix, "?#")) {
		bad("Prefix", o.Prefix, "must start with '/' and hold no '?' or '#'")
	}
	for i, origin := range o.TrustedOrigins {
		if u, err := url.Parse(origin); err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad("TrustedOrigins["+strconv.Itoa(i)+"]", origin, "must be an origin: scheme://host[:port]")
		}
	}
	if o.Interval != 0 && (o.Interval < intervalMin || o.Interval > intervalMax) {
		bad("Interval", o.Interval, "must be 0 or between 10ms and 1m")
	}
	if o.Store != nil {
		if _, ok := o.Store.(store.TaskLister); !ok {
			bad("Store", fmt.Sprintf("%T", o.Store), "must implement store.TaskLister")
		}
	}
	validateFlows(o.Flows, bad)
	if o.History < 0 || o.History > historyMax {
		bad("History", o.History, "must be in [0, 100000]")
	}
	return errors.Join(errs...)
}
