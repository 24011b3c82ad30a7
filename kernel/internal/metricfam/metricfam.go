// Package metricfam lists the kernel's Prometheus metric families (name, type,
// help text) in the order a page writes them, and holds one page's samples by
// family. It knows the names, not where the figures come from: the kernel reads
// its counters and gauges and adds them here (kernel/prometheus.go). The figures
// of the kernel's groups live here ([GroupSet]): the loop stores their gauges and
// the gates add to their counters, Stats and the page read them.
package metricfam

import (
	"io"

	"github.com/axsched/ax/internal/hist"
	"github.com/axsched/ax/internal/promtext"
)

// Fam is a metric family, by its place on the page.
type Fam int

// The families, in the order they are written. The ax_store_* families come for
// kernels with a store only, the ax_group_* ones (GroupWaiting on) for kernels
// with groups only.
const (
	Submitted Fam = iota
	Started
	Succeeded
	Failed
	TimedOut
	Retried
	Rejected
	Evicted
	Canceled
	Panics
	Abandoned
	RetriesRefused
	OnTimeoutDropped
	EventsDropped
	LogsDropped
	CallbackPanics
	QueueDepth
	Delayed
	Running
	Dispatched
	Zombies
	Executors
	CallbacksAbandoned
	Wait
	Exec
	StoreCommits
	StoreChanges
	StoreCommitErrors
	StoreRefused
	StorePrestarted
	StorePending
	StoreUp
	StoreJoins
	StoreLeaseLost
	StoreRescued
	StoreClaimed
	StoreFollowing
	GroupWaiting
	GroupRunning
	GroupKeys
	GroupThrottledKeys
	GroupPaused
	GroupBreakersOpen
	GroupThrottles
	GroupRateLimited
	GroupBreakerTransitions
	GroupCircuitOpen
	Count
)

// Groups is the number of ax_group_* families.
const Groups = Count - GroupWaiting

// Family is one metric family: its name, Prometheus type and help text.
type Family struct{ Name, Type, Help string }

// Families holds every family, by Fam.
var Families = [Count]Family{
	Submitted:          {"ax_tasks_submitted_total", "counter", "Tasks accepted by the kernel, by priority."},
	Started:            {"ax_tasks_started_total", "counter", "Attempts started, by priority."},
	Succeeded:          {"ax_tasks_succeeded_total", "counter", "Tasks that ended Succeeded, by priority."},
	Failed:             {"ax_tasks_failed_total", "counter", "Tasks that ended Failed, by priority."},
	TimedOut:           {"ax_tasks_timed_out_total", "counter", "Tasks that ended TimedOut, by priority."},
	Retried:            {"ax_tasks_retried_total", "counter", "Failed attempts scheduled to run again, by priority."},
	Rejected:           {"ax_tasks_rejected_total", "counter", "Submissions refused for want of room, by priority."},
	Evicted:            {"ax_tasks_evicted_total", "counter", "Queued tasks that a High arrival replaced (Config.EvictLow), by priority."},
	Canceled:           {"ax_tasks_canceled_total", "counter", "Tasks that ended Canceled, by priority."},
	Panics:             {"ax_tasks_panics_total", "counter", "Attempts whose function panicked or called runtime.Goexit, by priority."},
	Abandoned:          {"ax_tasks_abandoned_total", "counter", "Tasks that ended Abandoned (not yet due at Shutdown), by priority."},
	RetriesRefused:     {"ax_retries_refused_total", "counter", "Retries Config.RetryBudget refused, by priority."},
	OnTimeoutDropped:   {"ax_ontimeout_dropped_total", "counter", "Task.OnTimeout callbacks dropped because their queue was full."},
	EventsDropped:      {"ax_events_dropped_total", "counter", "Events dropped because Config.EventBuffer events were waiting for OnEvent."},
	LogsDropped:        {"ax_logs_dropped_total", "counter", "Log records dropped because 256 were waiting for Config.Logger's handler."},
	CallbackPanics:     {"ax_callback_panics_total", "counter", "Panics and runtime.Goexit calls recovered from OnEvent, OnTimeout, OnEnd, BackoffFunc and Logger handler callbacks."},
	QueueDepth:         {"ax_queue_depth", "gauge", "Tasks waiting under each priority's Capacity (Stats.Queued)."},
	Delayed:            {"ax_tasks_delayed", "gauge", "Tasks waiting to be due: delayed, or waiting for a retry."},
	Running:            {"ax_tasks_running", "gauge", "Attempts executing, zombies excluded."},
	Dispatched:         {"ax_tasks_dispatched", "gauge", "Tasks picked and handed to the run queue, not yet started."},
	Zombies:            {"ax_zombies", "gauge", "Timed-out task functions still running on their own goroutine."},
	Executors:          {"ax_executors", "gauge", "Executor goroutines, zombies excluded."},
	CallbacksAbandoned: {"ax_callbacks_abandoned", "gauge", "OnEvent, OnTimeout, OnEnd and Logger handler callbacks still running when Shutdown or Close stopped waiting for them."},
	Wait:               {"ax_task_wait_seconds", "histogram", "Time from submission to the start of each attempt, by priority."},
	Exec:               {"ax_task_exec_seconds", "histogram", "Execution time of each attempt, by priority."},
	StoreCommits:       {"ax_store_commits_total", "counter", "Group commits of the durable-task journal that landed."},
	StoreChanges:       {"ax_store_changes_total", "counter", "Changes held by the journal's commits that landed."},
	StoreCommitErrors:  {"ax_store_commit_errors_total", "counter", "Journal commits that failed."},
	StoreRefused:       {"ax_store_refused_total", "counter", "Changes the store refused (stale fence, unknown task)."},
	StorePrestarted:    {"ax_store_prestarted_total", "counter", "Durable tasks started in the commit that stored them."},
	StorePending:       {"ax_store_pending", "gauge", "Journal changes waiting for a commit."},
	StoreUp:            {"ax_store_up", "gauge", "1 while the store answers, 0 while it is known to be down."},
	StoreJoins:         {"ax_store_joins_total", "counter", "Memberships of this kernel in a shared store begun (1, plus one per rejoin)."},
	StoreLeaseLost:     {"ax_store_lease_lost_total", "counter", "Commits refused because this kernel's lease on a shared store had ended."},
	StoreRescued:       {"ax_store_rescued_total", "counter", "Tasks taken over from ended owners of a shared store."},
	StoreClaimed:       {"ax_store_claimed_total", "counter", "Tasks claimed from a shared store's pool."},
	StoreFollowing:     {"ax_store_pool_following", "gauge", "Tasks this kernel put in a shared store's pool and follows."},

	GroupWaiting:            {"ax_group_waiting", "gauge", "Tasks of a group waiting for a permit of their key, by group."},
	GroupRunning:            {"ax_group_running", "gauge", "Attempts of a group holding a permit (in their bucket, running, or zombies), by group."},
	GroupKeys:               {"ax_group_keys", "gauge", "Keys of a group whose state the kernel holds, by group."},
	GroupThrottledKeys:      {"ax_group_throttled_keys", "gauge", "Keys of a group waiting for a token, a RetryAfter's end or an open breaker's time, by group."},
	GroupPaused:             {"ax_group_paused", "gauge", "1 while the group is paused, by group."},
	GroupBreakersOpen:       {"ax_group_breakers_open", "gauge", "Keys of a group whose breaker is open or half-open, by group."},
	GroupThrottles:          {"ax_group_throttles_total", "counter", "Times a key of the group had to wait for a token or a RetryAfter, by group."},
	GroupRateLimited:        {"ax_group_rate_limited_total", "counter", "Attempts of a group that returned a RateLimitedError, by group."},
	GroupBreakerTransitions: {"ax_group_breaker_transitions_total", "counter", "Transitions of the breakers of a group's keys, by group and the state entered."},
	GroupCircuitOpen:        {"ax_group_circuit_open_failed_total", "counter", "Tasks of a group ended with ErrCircuitOpen (BreakerConfig.FailFast), by group."},
}

// Page is one page's samples, by family. The zero value is an empty page.
type Page [Count][]byte

// Add appends the sample v of family f with labels.
func (p *Page) Add(f Fam, labels string, v uint64) {
	p[f] = promtext.AppendSample(p[f], Families[f].Name, labels, v)
}

// AddHist appends the histogram h of family f with labels.
func (p *Page) AddHist(f Fam, labels string, h *hist.Hist) {
	p[f] = promtext.AppendHist(p[f], h, Families[f].Name, labels)
}

// Write writes the families that have samples, each with one # HELP and one
// # TYPE line before them, in one call to w.Write.
func (p *Page) Write(w io.Writer) {
	n := 0
	for i := range p {
		n += len(p[i])
	}
	out := make([]byte, 0, n+int(Count)*128)
	for i, f := range Families {
		if len(p[i]) == 0 {
			continue
		}
		out = append(out, "# HELP "...)
		out = append(out, f.Name...)
		out = append(out, ' ')
		out = append(out, f.Help...)
		out = append(out, "\n# TYPE "...)
		out = append(out, f.Name...)
		out = append(out, ' ')
		out = append(out, f.Type...)
		out = append(out, '\n')
		out = append(out, p[i]...)
	}
	_, _ = w.Write(out)
}
