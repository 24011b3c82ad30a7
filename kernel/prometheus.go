package kernel

import (
	"cmp"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"weak"

	"github.com/VictoriaMetrics/metrics"

	"github.com/axsched/ax/internal/hist"
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
	famOnTimeoutDropped:   {"ax_ontimeout_dropped_total", "counter", "Task.OnTimeout callbacks dropped because their queue was full."},
	famEventsDropped:      {"ax_events_dropped_total", "counter", "Events dropped because Config.EventBuffer events were waiting for OnEvent."},
	famLogsDropped:        {"ax_logs_dropped_total", "counter", "Log records dropped because 256 were waiting for Config.Logger's handler."},
	famCallbackPanics:     {"ax_callback_panics_total", "counter", "Panics and runtime.Goexit calls recovered from OnEvent, OnTimeout, OnEnd, BackoffFunc and Logger handler callbacks."},
	famQueueDepth:         {"ax_queue_depth", "gauge", "Tasks queued in the bucket of each priority."},
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
		prio[l] = joinLabels(kl, `priority="`+levelNames[l]+`"`)
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
	} {
		for l := range queue.NumLevels {
			fams[c.fam] = appendSample(fams[c.fam], promFamilies[c.fam].name, prio[l], c.c[l].Get())
		}
	}
	submitted, lazies := k.intakeCounts()
	for l := range queue.NumLevels {
		fams[famSubmitted] = appendSample(fams[famSubmitted], promFamilies[famSubmitted].name, prio[l], submitted[l])
	}
	one := func(fam int, v uint64) {
		fams[fam] = appendSample(fams[fam], promFamilies[fam].name, kl, v)
	}
	one(famOnTimeoutDropped, m.onTimeoutDropped.Get())
	one(famEventsDropped, m.eventsDropped.Get())
	one(famLogsDropped, m.logsDropped.Get())
	one(famCallbackPanics, m.callbackPanics.Get())
	for l := range queue.NumLevels {
		fams[famQueueDepth] = appendSample(fams[famQueueDepth], promFamilies[famQueueDepth].name, prio[l], nonNeg(m.depth[l].Load()))
	}
	one(famDelayed, nonNeg(m.delayed.Load()+int64(lazies)))
	// Read live under the run queue's lock, as Stats reads them: executors change
	// them without a loop pass, and a figure the loop published would go stale.
	lv := k.rq.live()
	one(famRunning, nonNeg(int64(lv.running)))
	one(famDispatched, nonNeg(int64(lv.dispatched)))
	one(famZombies, nonNeg(int64(lv.zombies)))
	one(famExecutors, nonNeg(int64(lv.workers)))
	one(famCallbacksAbandoned, nonNeg(m.callbacksAbandoned.Load()))
	for l := range queue.NumLevels {
		fams[famWait] = appendHist(fams[famWait], &m.wait[l], promFamilies[famWait].name, prio[l])
		fams[famExec] = appendHist(fams[famExec], &m.exec[l], promFamilies[famExec].name, prio[l])
	}
	if d := k.dur; d != nil {
		j := d.j.Counts()
		one(famStoreCommits, j.Commits)
		one(famStoreChanges, j.Changes)
		one(famStoreCommitErrors, j.CommitErrors)
		one(famStoreRefused, j.Refused)
		one(famStorePrestarted, j.Prestarted)
		one(famStorePending, nonNeg(j.Pending))
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
		one(famStoreFollowing, nonNeg(following))
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
		gl := joinLabels(kl, `group="`+name+`"`) // validateGroups admits nothing that needs escaping
		add := func(fam int, labels string, v uint64) {
			fams[fam] = appendSample(fams[fam], promFamilies[fam].name, labels, v)
		}
		add(famGroupWaiting, gl, nonNeg(p.waiting.Load()))
		add(famGroupRunning, gl, nonNeg(p.running.Load()))
		add(famGroupKeys, gl, nonNeg(p.keys.Load()))
		add(famGroupThrottledKeys, gl, nonNeg(p.throttled.Load()))
		paused := uint64(0)
		if p.paused.Load() {
			paused = 1
		}
		add(famGroupPaused, gl, paused)
		add(famGroupBreakersOpen, gl, nonNeg(p.openBreakers.Load()))
		add(famGroupThrottles, gl, p.throttles.Load())
		add(famGroupRateLimited, gl, p.rateLimited.Load())
		add(famGroupBreakerTransitions, joinLabels(gl, `to="open"`), p.breakerOpened.Load())
		add(famGroupBreakerTransitions, joinLabels(gl, `to="half_open"`), p.breakerHalfOpened.Load())
		add(famGroupBreakerTransitions, joinLabels(gl, `to="closed"`), p.breakerClosed.Load())
		add(famGroupCircuitOpen, gl, p.circuitOpenFailed.Load())
	}
}

// joinLabels joins two label lists, either of which may be empty.
func joinLabels(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// appendSample appends the line `name{labels} v`.
func appendSample(b []byte, name, labels string, v uint64) []byte {
	b = appendSeries(b, name, labels)
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

// appendSeries appends `name{labels} ` (without braces for no labels).
func appendSeries(b []byte, name, labels string) []byte {
	b = append(b, name...)
	if labels != "" {
		b = append(b, '{')
		b = append(b, labels...)
		b = append(b, '}')
	}
	return append(b, ' ')
}

func nonNeg(v int64) uint64 { return uint64(max(v, 0)) }

// promGroup is the kernels whose series one metrics set writes: its writer,
// registered once on the set, writes their families together, so that kernels
// sharing a set make one valid page.
type promGroup struct {
	shared bool // the set came from Config.Metrics: members leave when they stop

	mu      sync.Mutex
	members []promMember // guarded by mu; sorted by name
}

// promMember is a name taken on a set: k is nil while New is still setting the
// kernel up.
type promMember struct {
	name string
	k    *Kernel
}

// sharedSets maps each set given as Config.Metrics to its group. The keys are
// weak, and a group holds only kernels that have not stopped, so neither keeps a
// set alive: a set the program dropped leaves the map (see joinMetrics).
var sharedSets struct {
	mu sync.Mutex
	m  map[weak.Pointer[metrics.Set]]*promGroup
}

// joinMetrics takes name on set s for a kernel that New is setting up: on a set of
// the kernel's own (shared false) a group of one; on a set given as Config.Metrics
// the set's group, made and registered on first use. It returns a *ConfigError for
// Config.Name when the name cannot be had there.
func joinMetrics(s *metrics.Set, shared bool, name string) (*promGroup, error) {
	if !shared {
		g := &promGroup{members: []promMember{{name: name}}}
		s.RegisterMetricsWriter(g.write)
		return g, nil
	}
	key := weak.Make(s)
	sharedSets.mu.Lock()
	defer sharedSets.mu.Unlock()
	g := sharedSets.m[key]
	if g == nil {
		g = &promGroup{shared: true}
		if sharedSets.m == nil {
			sharedSets.m = make(map[weak.Pointer[metrics.Set]]*promGroup)
		}
		sharedSets.m[key] = g
		s.RegisterMetricsWriter(g.write)
		runtime.AddCleanup(s, func(key weak.Pointer[metrics.Set]) {
			sharedSets.mu.Lock()
			delete(sharedSets.m, key)
			sharedSets.mu.Unlock()
		}, key)
	}
	return g, g.take(name)
}

// take adds name to g, unless a member has it or the set would mix named and
// unnamed kernels.
func (g *promGroup) take(name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		switch {
		case name == "":
			return &ConfigError{Field: "Config.Name", Reason: "must be set: Config.Metrics holds another kernel, and kernels sharing a set must all be named"}
		case m.name == "":
			return &ConfigError{Field: "Config.Name", Value: name, Reason: "Config.Metrics holds an unnamed kernel, and kernels sharing a set must all be named"}
		case m.name == name:
			return &ConfigError{Field: "Config.Name", Value: name, Reason: "another kernel on Config.Metrics has this name"}
		}
	}
	i, _ := slices.BinarySearchFunc(g.members, name, func(m promMember, n string) int { return cmp.Compare(m.name, n) })
	g.members = slices.Insert(g.members, i, promMember{name: name})
	return nil
}

// activate makes the member named name write k's series.
func (g *promGroup) activate(name string, k *Kernel) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.members {
		if g.members[i].name == name {
			g.members[i].k = k
		}
	}
}

// leave gives name up. On a set of the kernel's own it does nothing: the set
// keeps writing the kernel.
func (g *promGroup) leave(name string) {
	if !g.shared {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = slices.DeleteFunc(g.members, func(m promMember) bool { return m.name == name })
}

// write is the set's metrics writer.
func (g *promGroup) write(w io.Writer) {
	g.mu.Lock()
	ks := make([]*Kernel, 0, len(g.members))
	for _, m := range g.members {
		if m.k != nil {
			ks = append(ks, m.k)
		}
	}
	g.mu.Unlock()
	if len(ks) > 0 {
		writeKernels(w, ks)
	}
}

// The Prometheus buckets' bounds are the powers of two from 2^histLeMin to
// 2^histLeMax ns (about 1 µs to 68 s); histLe holds their le labels in seconds.
const (
	histLeMin = 10
	histLeMax = 36
)

var histLe = func() (le [histLeMax - histLeMin + 1]string) {
	for e := histLeMin; e <= histLeMax; e++ {
		le[e-histLeMin] = `le="` + strconv.FormatFloat(float64(uint64(1)<<e)/1e9, 'g', -1, 64) + `"`
	}
	return le
}()

// appendHist appends h as the samples of a Prometheus histogram in seconds,
// with the buckets of histLe and +Inf, _sum and _count; labels (possibly empty) go
// on every sample, before le.
func appendHist(b []byte, h *hist.Hist, name, labels string) []byte {
	var cum uint64
	i := 0
	bucket := name + "_bucket"
	for e := histLeMin; e <= histLeMax; e++ {
		bound := uint64(1) << e
		for i < hist.Buckets && hist.Lower(i+1) <= bound {
			cum += h.Count(i)
			i++
		}
		b = appendSample(b, bucket, joinLabels(labels, histLe[e-histLeMin]), cum)
	}
	for ; i < hist.Buckets; i++ {
		cum += h.Count(i)
	}
	sum, _ := h.SumMax()
	b = appendSample(b, bucket, joinLabels(labels, `le="+Inf"`), cum)
	b = appendSeries(b, name+"_sum", labels)
	b = strconv.AppendFloat(b, float64(sum)/1e9, 'g', -1, 64)
	b = append(b, '\n')
	return appendSample(b, name+"_count", labels, cum)
}
