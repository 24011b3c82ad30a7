package kernel

import (
	"errors"
	"io"

	"github.com/VictoriaMetrics/metrics"

	"github.com/axsched/ax/internal/promtext"
	"github.com/axsched/ax/kernel/internal/metricfam"
	"github.com/axsched/ax/queue"
)

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
	var page metricfam.Page
	for _, k := range ks {
		k.appendSamples(&page)
	}
	page.Write(w)
}

// appendSamples appends k's samples to the families in fams. It reads the figures
// in the order Stats does (outcomes before submissions), so no scrape shows more
// tasks ended than submitted.
func (k *Kernel) appendSamples(p *metricfam.Page) {
	m := k.m
	kl := ""
	if name := m.name; name != "" {
		kl = `kernel="` + name + `"` // check.Name admits nothing that needs escaping
	}
	var prio [queue.NumLevels]string
	for l := range queue.NumLevels {
		prio[l] = promtext.JoinLabels(kl, `priority="`+levelNames[l]+`"`)
	}
	for _, c := range []struct {
		fam metricfam.Fam
		c   *[queue.NumLevels]*metrics.Counter
	}{
		{metricfam.Started, &m.started},
		{metricfam.Succeeded, &m.succeeded},
		{metricfam.Failed, &m.failed},
		{metricfam.TimedOut, &m.timedOut},
		{metricfam.Retried, &m.retried},
		{metricfam.Rejected, &m.rejected},
		{metricfam.Evicted, &m.evicted},
		{metricfam.Canceled, &m.canceled},
		{metricfam.Panics, &m.panics},
		{metricfam.Abandoned, &m.abandoned},
		{metricfam.RetriesRefused, &m.retriesRefused},
	} {
		for l := range queue.NumLevels {
			p.Add(c.fam, prio[l], c.c[l].Get())
		}
	}
	in := k.intakeCounts()
	for l := range queue.NumLevels {
		p.Add(metricfam.Submitted, prio[l], in.submitted[l])
	}
	one := func(f metricfam.Fam, v uint64) { p.Add(f, kl, v) }
	one(metricfam.OnTimeoutDropped, m.onTimeoutDropped.Get())
	one(metricfam.EventsDropped, m.eventsDropped.Get())
	one(metricfam.LogsDropped, m.logsDropped.Get())
	one(metricfam.CallbackPanics, m.callbackPanics.Get())
	// Read live under the run queue's lock, as Stats reads them: executors change
	// them without a loop pass, and a figure the loop published would go stale.
	lv := k.rq.live()
	queued, delayed := k.waitFigures(&in, &lv)
	for l := range queue.NumLevels {
		p.Add(metricfam.QueueDepth, prio[l], uint64(queued[l]))
	}
	one(metricfam.Delayed, uint64(delayed[0]+delayed[1]+delayed[2]))
	one(metricfam.Running, promtext.NonNeg(int64(lv.running)))
	one(metricfam.Dispatched, promtext.NonNeg(int64(lv.dispatched)))
	one(metricfam.Zombies, promtext.NonNeg(int64(lv.zombies)))
	one(metricfam.Executors, promtext.NonNeg(int64(lv.workers)))
	one(metricfam.CallbacksAbandoned, promtext.NonNeg(m.callbacksAbandoned.Load()))
	for l := range queue.NumLevels {
		p.AddHist(metricfam.Wait, prio[l], &m.wait[l])
		p.AddHist(metricfam.Exec, prio[l], &m.exec[l])
	}
	if d := k.dur; d != nil {
		j := d.j.Counts()
		one(metricfam.StoreCommits, j.Commits)
		one(metricfam.StoreChanges, j.Changes)
		one(metricfam.StoreCommitErrors, j.CommitErrors)
		one(metricfam.StoreRefused, j.Refused)
		one(metricfam.StorePrestarted, j.Prestarted)
		one(metricfam.StorePending, promtext.NonNeg(j.Pending))
		up := uint64(1)
		if j.Down {
			up = 0
		}
		one(metricfam.StoreUp, up)
		var joins, lost, rescued, claimed uint64
		var following int64
		if o := d.own; o != nil {
			c := o.Counts()
			joins, lost, rescued, claimed = c.Joins, c.LeaseLost, c.Rescued, c.Claimed
			following = int64(c.Following)
		}
		one(metricfam.StoreJoins, joins)
		one(metricfam.StoreLeaseLost, lost)
		one(metricfam.StoreRescued, rescued)
		one(metricfam.StoreClaimed, claimed)
		one(metricfam.StoreFollowing, promtext.NonNeg(following))
	}
	k.gpub.Append(p, kl)
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
