package kernel

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/axsched/ax/queue"
)

// kernelMetrics holds the kernel's counters, gauges and histograms. Counters are
// written by the loop (rejections by submitters, lazy tasks' submissions by
// submitters in the intake, see Kernel.intakeCounts, and callback panics by the
// callback goroutines). Gauges read what Stats reads: the depths and delayed
// count the loop publishes after each pass (ax_tasks_delayed adds the intake's
// lazy tasks, under its mutex), and the run queue's live counts under its lock
// (runq.live), so they are safe for concurrent use.
type kernelMetrics struct {
	submitted, started, succeeded, failed, timedOut, retried, rejected,
	evicted, canceled, panics, abandoned [queue.NumLevels]*metrics.Counter
	onTimeoutDropped, eventsDropped, callbackPanics *metrics.Counter

	wait, exec [queue.NumLevels]hist

	depth              [queue.NumLevels]atomic.Int64
	delayed            atomic.Int64
	callbacksAbandoned atomic.Int64 // set by Shutdown and Close (stopSide)
}

var levelNames = [queue.NumLevels]string{queue.High: "high", queue.Normal: "normal", queue.Low: "low"}

func newKernelMetrics(k *Kernel, s *metrics.Set) *kernelMetrics {
	m := &kernelMetrics{}
	counters := []struct {
		name string
		c    *[queue.NumLevels]*metrics.Counter
	}{
		{"ax_tasks_started_total", &m.started},
		{"ax_tasks_succeeded_total", &m.succeeded},
		{"ax_tasks_failed_total", &m.failed},
		{"ax_tasks_timed_out_total", &m.timedOut},
		{"ax_tasks_retried_total", &m.retried},
		{"ax_tasks_rejected_total", &m.rejected},
		{"ax_tasks_evicted_total", &m.evicted},
		{"ax_tasks_canceled_total", &m.canceled},
		{"ax_tasks_panics_total", &m.panics},
		{"ax_tasks_abandoned_total", &m.abandoned},
	}
	for _, c := range counters {
		for l := range queue.NumLevels {
			c.c[l] = s.NewCounter(fmt.Sprintf(`%s{priority=%q}`, c.name, levelNames[l]))
		}
	}
	// The submitted counters are written by the loop, and read with the intake's
	// lazy tasks it has not counted yet (Kernel.intakeCounts).
	for l := range queue.NumLevels {
		m.submitted[l] = new(metrics.Counter)
	}
	s.RegisterMetricsWriter(func(w io.Writer) {
		n, _ := k.intakeCounts()
		metrics.WriteMetadataIfNeeded(w, "ax_tasks_submitted_total", "counter")
		for l := range queue.NumLevels {
			_, _ = fmt.Fprintf(w, "ax_tasks_submitted_total{priority=%q} %d\n", levelNames[l], n[l])
		}
	})
	m.onTimeoutDropped = s.NewCounter("ax_ontimeout_dropped_total")
	m.eventsDropped = s.NewCounter("ax_events_dropped_total")
	for l := range queue.NumLevels {
		d := &m.depth[l]
		s.NewGauge(fmt.Sprintf(`ax_queue_depth{priority=%q}`, levelNames[l]), func() float64 { return float64(d.Load()) })
	}
	s.NewGauge("ax_tasks_delayed", func() float64 {
		_, lazies := k.intakeCounts()
		return float64(m.delayed.Load() + int64(lazies))
	})
	// Read live under the run queue's lock, as Stats reads them: executors change
	// them without a loop pass, and a figure the loop published would go stale.
	s.NewGauge("ax_tasks_running", func() float64 { return float64(k.rq.live().running) })
	s.NewGauge("ax_tasks_dispatched", func() float64 { return float64(k.rq.live().dispatched) })
	s.NewGauge("ax_zombies", func() float64 { return float64(k.rq.live().zombies) })
	s.NewGauge("ax_executors", func() float64 { return float64(k.rq.live().workers) })
	m.callbackPanics = s.NewCounter("ax_callback_panics_total")
	s.NewGauge("ax_callbacks_abandoned", func() float64 { return float64(m.callbacksAbandoned.Load()) })
	s.RegisterMetricsWriter(func(w io.Writer) {
		_, _ = fmt.Fprintf(w, "# TYPE ax_task_wait_seconds histogram\n")
		for l := range queue.NumLevels {
			m.wait[l].writePrometheus(w, "ax_task_wait_seconds", fmt.Sprintf("priority=%q,", levelNames[l]))
		}
		_, _ = fmt.Fprintf(w, "# TYPE ax_task_exec_seconds histogram\n")
		for l := range queue.NumLevels {
			m.exec[l].writePrometheus(w, "ax_task_exec_seconds", fmt.Sprintf("priority=%q,", levelNames[l]))
		}
	})
	return m
}

// observe records one attempt's wait (submit to start) and execution time into
// the histograms' shard (see histShards): the loop's 0, an executor's its own.
func (m *kernelMetrics) observe(shard int, l queue.Level, wait, exec time.Duration) {
	m.wait[l].observe(shard, wait)
	m.exec[l].observe(shard, exec)
}

// WritePrometheus writes the kernel's metrics in the Prometheus text format:
// counters by priority (ax_tasks_*_total), gauges (ax_queue_depth, ax_tasks_running,
// ax_tasks_delayed, ax_zombies, ax_executors) and the wait and execution histograms
// (ax_task_wait_seconds, ax_task_exec_seconds). Safe for concurrent use.
func (k *Kernel) WritePrometheus(w io.Writer) {
	k.Metrics().WritePrometheus(w)
}

// PriorityStats are the counts of one priority.
type PriorityStats struct {
	Submitted, Started, Succeeded, Failed, TimedOut, Retried, Rejected,
	Evicted, Canceled, Panics, Abandoned uint64
	// Queued is the number of tasks in the bucket now.
	Queued int
	// Wait is submit-to-start time of attempts; Exec their execution time.
	Wait, Exec Percentiles
}

// Stats is a snapshot of a kernel's figures.
type Stats struct {
	ByPriority ByPriority[PriorityStats]
	Queued     ByPriority[int] // tasks in each bucket
	Delayed    int             // tasks waiting to be due (delayed or retrying), in the wheel or on their way to it
	Dispatched int             // picked and handed to the run queue, not yet started
	Running    int             // attempts executing, zombies excluded
	Zombies    int             // timed-out functions still running on their own goroutine
	Executors  int             // executor goroutines, zombies excluded

	EventsDropped    uint64
	OnTimeoutDropped uint64
	// CallbackPanics counts the panics recovered from OnEvent, OnTimeout and
	// RetryPolicy.BackoffFunc callbacks.
	CallbackPanics uint64
	// CallbacksAbandoned is the number of OnEvent and OnTimeout callbacks that were
	// still running when Shutdown or Close stopped waiting for them.
	CallbacksAbandoned int

	// Store is the journal of durable tasks; zero without Config.Store.
	Store StoreStats
}

// StoreStats are the figures of the durable-task journal.
type StoreStats struct {
	Commits uint64 // group commits that landed
	Changes uint64 // changes they held
	Errors  uint64 // commits that failed (the store did not answer)
	Refused uint64 // changes the store refused (stale fence, unknown task...), logged
	Pending int    // changes waiting for a commit
	Down    bool   // the store is known to be down: durable submits fail fast
	Held    int    // recovered tasks whose kind is not registered yet
}

// Terminal returns the number of tasks that ended, all priorities together.
func (s *Stats) Terminal() uint64 {
	var n uint64
	for _, p := range []*PriorityStats{&s.ByPriority.High, &s.ByPriority.Normal, &s.ByPriority.Low} {
		n += p.Succeeded + p.Failed + p.TimedOut + p.Evicted + p.Canceled + p.Abandoned
	}
	return n
}

// Stats returns the kernel's figures. It never waits for the loop: bucket depths
// and Delayed are published after each loop pass (they may lag one pass behind);
// Running, Dispatched, Zombies and Executors are read live. Safe for concurrent use.
func (k *Kernel) Stats() Stats {
	m := k.m
	var s Stats
	// The outcomes are read before the submissions: a task is counted submitted
	// before it can end, so no snapshot shows more tasks ended than submitted.
	var ps [queue.NumLevels]PriorityStats
	for l := range queue.NumLevels {
		ps[l] = PriorityStats{
			Started: m.started[l].Get(), Succeeded: m.succeeded[l].Get(),
			Failed: m.failed[l].Get(), TimedOut: m.timedOut[l].Get(), Retried: m.retried[l].Get(),
			Rejected: m.rejected[l].Get(), Evicted: m.evicted[l].Get(), Canceled: m.canceled[l].Get(),
			Panics: m.panics[l].Get(), Abandoned: m.abandoned[l].Get(),
			Queued: int(m.depth[l].Load()),
			Wait:   m.wait[l].percentiles(), Exec: m.exec[l].percentiles(),
		}
	}
	submitted, lazies := k.intakeCounts()
	for l := range ps {
		ps[l].Submitted = submitted[l]
	}
	s.ByPriority = ByPriority[PriorityStats]{High: ps[queue.High], Normal: ps[queue.Normal], Low: ps[queue.Low]}
	s.Queued = ByPriority[int]{High: ps[queue.High].Queued, Normal: ps[queue.Normal].Queued, Low: ps[queue.Low].Queued}
	s.Delayed = int(m.delayed.Load()) + lazies
	lv := k.rq.live()
	s.Running, s.Dispatched, s.Zombies, s.Executors = lv.running, lv.dispatched, lv.zombies, lv.workers
	s.EventsDropped = m.eventsDropped.Get()
	s.OnTimeoutDropped = m.onTimeoutDropped.Get()
	s.CallbackPanics = m.callbackPanics.Get()
	s.CallbacksAbandoned = int(m.callbacksAbandoned.Load())
	if d := k.dur; d != nil {
		j := d.j
		s.Store = StoreStats{
			Commits: j.commits.Get(), Changes: j.changes.Get(), Errors: j.commitErrors.Get(),
			Refused: j.refused.Get(), Pending: int(j.pending.Load()), Down: j.down.Load() != nil,
		}
		d.mu.Lock()
		for _, ts := range d.held {
			s.Store.Held += len(ts)
		}
		d.mu.Unlock()
	}
	return s
}

// runqFigures are the run queue's live counts.
type runqFigures struct{ running, dispatched, zombies, workers int }

// live reads the run queue's counts under its lock.
func (q *runq) live() runqFigures {
	q.mu.Lock()
	defer q.mu.Unlock()
	return runqFigures{running: q.running, dispatched: q.queued(), zombies: q.zombies, workers: q.workers}
}
