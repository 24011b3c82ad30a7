package kernel

import (
	"errors"
	"io"
	"slices"

	"github.com/VictoriaMetrics/metrics"

	"github.com/axsched/ax/internal/promtext"
	"github.com/axsched/ax/queue"
)

// The metric families, in the order they are written.
const (
	famSubmitted = iota
	famStarted
	famSucceeded
	famFailed
	famTimedOut
	famRetried
	famRejected
	famEvicted
	famCanceled
	famPanics
	famAbandoned
	famRetriesRefused
	famOnTimeoutDropped
	famEventsDropped
	famLogsDropped
	famCallbackPanics
	famQueueDepth
	famDelayed
	famRunning
	famDispatched
	famZombies
	famExecutors
	famCallbacksAbandoned
	famWait
	famExec
	famStoreCommits
	famStoreChanges
	famStoreCommitErrors
	famStoreRefused
	famStorePrestarted
	famStorePending
	famStoreUp
	famStoreJoins
	famStoreLeaseLost
	famStoreRescued
	famStoreClaimed
	famStoreFollowing
	famGroupWaiting
	famGroupRunning
	famGroupKeys
	famGroupThrottledKeys
	famGroupPaused
	famGroupBreakersOpen
	famGroupThrottles
	famGroupRateLimited
	famGroupBreakerTransitions
	famGroupCircuitOpen
	famCount
)

// groupFams is the number of ax_group_* families, written for kernels with
// Config.Groups only.
const groupFams = famCount - famGroupWaiting

// promFamily is one metric family: its name, Prometheus type and help text.
type promFamily struct{ name, typ, help string }

var promFamilies = [famCount]promFamily{
	famSubmitted:          {"ax_tasks_submitted_total", "counter", "Tasks accepted by the kernel, by priority."},
	famStarted:            {"ax_tasks_started_total", "counter", "Attempts started, by priority."},
	famSucceeded:          {"ax_tasks_succeeded_total", "counter", "Tasks that ended Succeeded, by priority."},
	famFailed:             {"ax_tasks_failed_total", "counter", "Tasks that ended Failed, by priority."},
	famTimedOut:           {"ax_tasks_timed_out_total", "counter", "Tasks that ended TimedOut, by priority."},
	famRetried:            {"ax_tasks_retried_total", "counter", "Failed attempts scheduled to run again, by priority."},
	famRejected:           {"ax_tasks_rejected_total", "counter", "Submissions refused for want of room, by priority."},
	famEvicted:            {"ax_tasks_evicted_total", "counter", "Queued tasks that a High arrival replaced (Config.EvictLow), by priority."},
	famCanceled:           {"ax_tasks_canceled_total", "counter", "Tasks that ended Canceled, by priority."},
	famPanics:             {"ax_tasks_panics_total", "counter", "Attempts whose function panicked or called runtime.Goexit, by priority."},
	famAbandoned:          {"ax_tasks_abandoned_total", "counter", "Tasks that ended Abandoned (not yet due at Shutdown), by priority."},
	famRetriesRefused:     {"ax_retries_refused_total", "counter", "Retries Config.RetryBudget refused, by priority."},
	famOnTimeoutDropped:   {"ax_ontimeout_dropped_total", "counter", "Task.OnTimeout callbacks dropped because their queue was full."},
	famEventsDropped:      {"ax_events_dropped_total", "counter", "Events dropped because Config.EventBuffer events were waiting for OnEvent."},
	famLogsDropped:        {"ax_logs_dropped_total", "counter", "Log records dropped because 256 were waiting for Config.Logger's handler."},
	famCallbackPanics:     {"ax_callback_panics_total", "counter", "Panics and runtime.Goexit calls recovered from OnEvent, OnTimeout, OnEnd, BackoffFunc and Logger handler callbacks."},
	famQueueDepth:         {"ax_queue_depth", "gauge", "Tasks waiting under each priority's Capacity (Stats.Queued)."},
	famDelayed:            {"ax_tasks_delayed", "gauge", "Tasks waiting to be due: delayed, or waiting for a retry."},
	famRunning:            {"ax_tasks_running", "gauge", "Attempts executing, zombies excluded."},
	famDispatched:         {"ax_tasks_dispatched", "gauge", "Tasks picked and handed to the run queue, not yet started."},
	famZombies:            {"ax_zombies", "gauge", "Timed-out task functions still running on their own goroutine."},
	famExecutors:          {"ax_executors", "gauge", "Executor goroutines, zombies excluded."},
	famCallbacksAbandoned: {"ax_callbacks_abandoned", "gauge", "OnEvent, OnTimeout, OnEnd and Logger handler callbacks still running when Shutdown or Close stopped waiting for them."},
	famWait:               {"ax_task_wait_seconds", "histogram", "Time from submission to the start of each attempt, by priority."},
	famExec:               {"ax_task_exec_seconds", "histogram", "Execution time of each attempt, by priority."},
	famStoreCommits:       {"ax_store_commits_total", "counter", "Group commits of the durable-task journal that landed."},
	famStoreChanges:       {"ax_store_changes_total", "counter", "Changes held by the journal's commits that landed."},
	famStoreCommitErrors:  {"ax_store_commit_errors_total", "counter", "Journal commits that failed."},
	famStoreRefused:       {"ax_store_refused_total", "counter", "Changes the store refused (stale fence, unknown task)."},
	famStorePrestarted:    {"ax_store_prestarted_total", "counter", "Durable tasks started in the commit that stored them."},
	famStorePending:       {"ax_store_pending", "gauge", "Journal changes waiting for a commit."},
	famStoreUp:            {"ax_store_up", "gauge", "1 while the store answers, 0 while it is known to be down."},
	famStoreJoins:         {"ax_store_joins_total", "counter", "Memberships of this kernel in a shared store begun (1, plus one per rejoin)."},
	famStoreLeaseLost:     {"ax_store_lease_lost_total", "counter", "Commits refused because this kernel's lease on a shared store had ended."},
	famStoreRescued:       {"ax_store_rescued_total", "counter", "Tasks taken over from ended owners of a shared store."},
	famStoreClaimed:       {"ax_store_claimed_total", "counter", "Tasks claimed from a shared store's pool."},
	famStoreFollowing:     {"ax_store_pool_following", "gauge", "Tasks this kernel put in a shared store's pool and follows."},

	famGroupWaiting:            {"ax_group_waiting", "gauge", "Tasks of a group waiting for a permit of their key, by group."},
	famGroupRunning:            {"ax_group_running", "gauge", "Attempts of a group holding a permit (in their bucket, running, or zombies), by group."},
	famGroupKeys:               {"ax_group_keys", "gauge", "Keys of a group whose state the kernel holds, by group."},
	famGroupThrottledKeys:      {"ax_group_throttled_keys", "gauge", "Keys of a group waiting for a token, a RetryAfter's end or an open breaker's time, by group."},
	famGroupPaused:             {"ax_group_paused", "gauge", "1 while the group is paused, by group."},
	famGroupBreakersOpen:       {"ax_group_breakers_open", "gauge", "Keys of a group whose breaker is open or half-open, by group."},
	famGroupThrottles:          {"ax_group_throttles_total", "counter", "Times a key of the group had to wait for a token or a RetryAfter, by group."},
	famGroupRateLimited:        {"ax_group_rate_limited_total", "counter", "Attempts of a group that returned a RateLimitedError, by group."},
	famGroupBreakerTransitions: {"ax_group_breaker_transitions_total", "counter", "Transitions of the breakers of a group's keys, by group and the state entered."},
	famGroupCircuitOpen:        {"ax_group_circuit_open_failed_total", "counter", "Tasks of a group ended with ErrCircuitOpen (BreakerConfig.FailFast), by group."},
}

// WritePrometheus writes the kernel's metrics in the Prometheus text format
// (version 0.0.4): counters by priority (ax_tasks_*_total), the dropped and
// panicking callbacks, gauges (ax_queue_depth, ax_tasks_running, ax_tasks_delayed,
// ax_tasks_dispatched, ax_zombies, ax_executors, ax_callbacks_abandoned), the wait
// and execution histograms (ax_task_wait_seconds, ax_task_exec_seconds) and, with
// Config.Store, the journal's ax_store_* figures. Each family has one # HELP and
// one # TYPE line before its samples, and each series the label kernel="<name>"
// when Config.Name is set. Gauges are read at the call. It writes this kernel only,
// with one call to w.Write: to put several kernels on one page, give them one
// Config.Metrics set and write the set (a page made of several WritePrometheus
// outputs repeats the families, which strict parsers refuse). Safe for concurrent
// use, and after the kernel stopped.
func (k *Kernel) WritePrometheus(w io.Writer) {
	writeKernels(w, []*Kernel{k})
}

// writeKernels writes the families of ks, each family once with the samples of
// every kernel in it.
func writeKernels(w io.Writer, ks []*Kernel) {
	var fams [famCount][]byte
	for _, k := range ks {
		k.appendSamples(&fams)
	}
	n := 0
	for i := range fams {
		n += len(fams[i])
	}
	out := make([]byte, 0, n+famCount*128)
	for i, f := range promFamilies {
		if len(fams[i]) == 0 {
			continue
		}
		out = append(out, "# HELP "...)
		out = append(out, f.name...)
		out = append(out, ' ')
		out = append(out, f.help...)
		out = append(out, "\n# TYPE "...)
		out = append(out, f.name...)
		out = append(out, ' ')
		out = append(out, f.typ...)
		out = append(out, '\n')
		out = append(out, fams[i]...)
	}
	_, _ = w.Write(out)
}

// appendSamples appends k's samples to the families in fams. It reads the figures
// in the order Stats does (outcomes before submissions), so no scrape shows more
// tasks ended than submitted.
func (k *Kernel) appendSamples(fams *[famCount][]byte) {
	m := k.m
	kl := ""
	if name := m.name; name != "" {
		kl = `kernel="` + name + `"` // validName admits nothing that needs escaping
	}
	var prio [queue.NumLevels]string
	for l := range queue.NumLevels {
		prio[l] = promtext.JoinLabels(kl, `priority="`+levelNames[l]+`"`)
	}
	for _, c := range []struct {
		fam int
		c   *[queue.NumLevels]*metrics.Counter
	}{
		{famStarted, &m.started},
		{famSucceeded, &m.succeeded},
		{famFailed, &m.failed},
		{famTimedOut, &m.timedOut},
		{famRetried, &m.retried},
		{famRejected, &m.rejected},
		{famEvicted, &m.evicted},
		{famCanceled, &m.canceled},
		{famPanics, &m.panics},
		{famAbandoned, &m.abandoned},
		{famRetriesRefused, &m.retriesRefused},
	} {
		for l := range queue.NumLevels {
			fams[c.fam] = promtext.AppendSample(fams[c.fam], promFamilies[c.fam].name, prio[l], c.c[l].Get())
		}
	}
	submitted, lazies := k.intakeCounts()
	for l := range queue.NumLevels {
		fams[famSubmitted] = promtext.AppendSample(fams[famSubmitted], promFamilies[famSubmitted].name, prio[l], submitted[l])
	}
	one := func(fam int, v uint64) {
		fams[fam] = promtext.AppendSample(fams[fam], promFamilies[fam].name, kl, v)
	}
	one(famOnTimeoutDropped, m.onTimeoutDropped.Get())
	one(famEventsDropped, m.eventsDropped.Get())
	one(famLogsDropped, m.logsDropped.Get())
	one(famCallbackPanics, m.callbackPanics.Get())
	one(famDelayed, promtext.NonNeg(m.delayed.Load()+int64(lazies)))
	// Read live under the run queue's lock, as Stats reads them: executors change
	// them without a loop pass, and a figure the loop published would go stale.
	lv := k.rq.live()
	for l := range queue.NumLevels {
		fams[famQueueDepth] = promtext.AppendSample(fams[famQueueDepth], promFamilies[famQueueDepth].name, prio[l], uint64(lv.queued[l]))
	}
	one(famRunning, promtext.NonNeg(int64(lv.running)))
	one(famDispatched, promtext.NonNeg(int64(lv.dispatched)))
	one(famZombies, promtext.NonNeg(int64(lv.zombies)))
	one(famExecutors, promtext.NonNeg(int64(lv.workers)))
	one(famCallbacksAbandoned, promtext.NonNeg(m.callbacksAbandoned.Load()))
	for l := range queue.NumLevels {
		fams[famWait] = promtext.AppendHist(fams[famWait], &m.wait[l], promFamilies[famWait].name, prio[l])
		fams[famExec] = promtext.AppendHist(fams[famExec], &m.exec[l], promFamilies[famExec].name, prio[l])
	}
	if d := k.dur; d != nil {
		j := d.j.Counts()
		one(famStoreCommits, j.Commits)
		one(famStoreChanges, j.Changes)
		one(famStoreCommitErrors, j.CommitErrors)
		one(famStoreRefused, j.Refused)
		one(famStorePrestarted, j.Prestarted)
		one(famStorePending, promtext.NonNeg(j.Pending))
		up := uint64(1)
		if j.Down {
			up = 0
		}
		one(famStoreUp, up)
		var joins, lost, rescued, claimed uint64
		var following int64
		if o := d.own; o != nil {
			c := o.Counts()
			joins, lost, rescued, claimed = c.Joins, c.LeaseLost, c.Rescued, c.Claimed
			following = int64(c.Following)
		}
		one(famStoreJoins, joins)
		one(famStoreLeaseLost, lost)
		one(famStoreRescued, rescued)
		one(famStoreClaimed, claimed)
		one(famStoreFollowing, promtext.NonNeg(following))
	}
	k.appendGroupSamples(fams, kl)
}

// appendGroupSamples appends the ax_group_* samples of k's groups, by name.
func (k *Kernel) appendGroupSamples(fams *[famCount][]byte, kl string) {
	k.gpubMu.Lock()
	names := make([]string, 0, len(k.gpub))
	for name := range k.gpub {
		names = append(names, name)
	}
	pubs := make([]*groupPub, len(names))
	slices.Sort(names)
	for i, name := range names {
		pubs[i] = k.gpub[name]
	}
	k.gpubMu.Unlock()
	for i, name := range names {
		p := pubs[i]
		gl := promtext.JoinLabels(kl, `group="`+name+`"`) // validateGroups admits nothing that needs escaping
		add := func(fam int, labels string, v uint64) {
			fams[fam] = promtext.AppendSample(fams[fam], promFamilies[fam].name, labels, v)
		}
		add(famGroupWaiting, gl, promtext.NonNeg(p.waiting.Load()))
		add(famGroupRunning, gl, promtext.NonNeg(p.running.Load()))
		add(famGroupKeys, gl, promtext.NonNeg(p.keys.Load()))
		add(famGroupThrottledKeys, gl, promtext.NonNeg(p.throttled.Load()))
		paused := uint64(0)
		if p.paused.Load() {
			paused = 1
		}
		add(famGroupPaused, gl, paused)
		add(famGroupBreakersOpen, gl, promtext.NonNeg(p.openBreakers.Load()))
		add(famGroupThrottles, gl, p.throttles.Load())
		add(famGroupRateLimited, gl, p.rateLimited.Load())
		add(famGroupBreakerTransitions, promtext.JoinLabels(gl, `to="open"`), p.breakerOpened.Load())
		add(famGroupBreakerTransitions, promtext.JoinLabels(gl, `to="half_open"`), p.breakerHalfOpened.Load())
		add(famGroupBreakerTransitions, promtext.JoinLabels(gl, `to="closed"`), p.breakerClosed.Load())
		add(famGroupCircuitOpen, gl, p.circuitOpenFailed.Load())
	}
}

// promGroup is the kernels whose series one metrics set writes.
type promGroup = promtext.Group[*Kernel]

// joinMetrics takes name on set s for a kernel that New is setting up: on a set of
// the kernel's own (shared false) a group of one; on a set given as Config.Metrics
// the set's group. It returns a *ConfigError for Config.Name when the name cannot be
// had there.
func joinMetrics(s *metrics.Set, shared bool, name string) (*promGroup, error) {
	g, err := promtext.Join(s, shared, name, writeKernels)
	switch {
	case errors.Is(err, promtext.ErrNameRequired):
		return g, &ConfigError{Field: "Config.Name", Reason: "must be set: Config.Metrics holds another kernel, and kernels sharing a set must all be named"}
	case errors.Is(err, promtext.ErrUnnamedMember):
		return g, &ConfigError{Field: "Config.Name", Value: name, Reason: "Config.Metrics holds an unnamed kernel, and kernels sharing a set must all be named"}
	case errors.Is(err, promtext.ErrNameTaken):
		return g, &ConfigError{Field: "Config.Name", Value: name, Reason: "another kernel on Config.Metrics has this name"}
	}
	return g, err
}
