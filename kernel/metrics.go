package kernel

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/axsched/ax/internal/hist"
	"github.com/axsched/ax/internal/retries"
	"github.com/axsched/ax/kernel/internal/metricfam"
	"github.com/axsched/ax/queue"
)

// kernelMetrics holds the kernel's counters, gauges' sources and histograms,
// which WritePrometheus and Stats read. Counters are written by the loop
// (rejections by submitters, lazy tasks' submissions by submitters in the intake,
// see Kernel.intakeCounts, and callback panics by the callback goroutines). The
// gauges' sources are the admission tickets (Kernel.waiting), the delayed counts
// the loop publishes after each pass, the intake's lazy tasks (under its mutex)
// and the run queue's live counts under its lock (runq.live), all safe for
// concurrent use; Kernel.waitFigures combines them.
// The counters are registered on no set: the kernel's metrics writer
// (prometheus.go) writes them.
type kernelMetrics struct {
	submitted, started, succeeded, failed, timedOut, retried, rejected,
	evicted, canceled, panics, abandoned, retriesRefused [queue.NumLevels]*metrics.Counter
	onTimeoutDropped, eventsDropped, logsDropped, callbackPanics *metrics.Counter

	wait, exec [queue.NumLevels]hist.Hist
	recent     *hist.Recent // the readings of wait that Stats keeps for its recent figures

	delayed            [queue.NumLevels]atomic.Int64 // tasks in the wheel or parked, by ticket level
	callbacksAbandoned atomic.Int64                  // set by Shutdown and Close

	group *promGroup // immutable: the kernel's group on its metrics set
	name  string     // immutable: Config.Name
}

// recentSpan is the span of Stats' recent figures (Stats.RecentSpan).
const recentSpan = time.Minute

var levelNames = [queue.NumLevels]string{queue.High: "high", queue.Normal: "normal", queue.Low: "low"}

func newKernelMetrics(g *promGroup, name string) *kernelMetrics {
	m := &kernelMetrics{group: g, name: name}
	m.recent = hist.NewRecent(recentSpan, 6, &m.wait[queue.High], &m.wait[queue.Normal], &m.wait[queue.Low])
	for _, c := range []*[queue.NumLevels]*metrics.Counter{
		&m.submitted, &m.started, &m.succeeded, &m.failed, &m.timedOut, &m.retried,
		&m.rejected, &m.evicted, &m.canceled, &m.panics, &m.abandoned, &m.retriesRefused,
	} {
		for l := range queue.NumLevels {
			c[l] = new(metrics.Counter)
		}
	}
	m.onTimeoutDropped = new(metrics.Counter)
	m.eventsDropped = new(metrics.Counter)
	m.logsDropped = new(metrics.Counter)
	m.callbackPanics = new(metrics.Counter)
	return m
}

// observe records one attempt's wait (submit to start) and execution time into
// the histograms' shard (see hist.Shards): the loop's 0, an executor's its own.
func (m *kernelMetrics) observe(shard int, l queue.Level, wait, exec time.Duration) {
	m.wait[l].Observe(shard, wait)
	m.exec[l].Observe(shard, exec)
}

// PriorityStats are the counts of one priority.
type PriorityStats struct {
	Submitted, Started, Succeeded, Failed, TimedOut, Retried, Rejected,
	Evicted, Canceled, Panics, Abandoned uint64
	// RetriesRefused counts the retries Config.RetryBudget refused: each ended an
	// in-memory task (ErrRetryBudget) or made a durable one wait for the budget.
	RetriesRefused uint64
	// Queued is the number of tasks that wait to start under Capacity of this
	// priority now (see Stats.Queued).
	Queued int
	// Running counts the attempts of this priority executing now, zombies
	// excluded; Delayed the tasks under Capacity of this priority waiting to be
	// due (see Stats.Delayed).
	Running, Delayed int
	// Wait is submit-to-start time of attempts; Exec their execution time.
	Wait, Exec Percentiles
	// WaitRecent is Wait over the attempts started in the last Stats.RecentSpan.
	WaitRecent Percentiles
}

// Stats is a snapshot of a kernel's figures.
type Stats struct {
	ByPriority ByPriority[PriorityStats]
	// Queued counts the tasks that wait to start, by the priority whose Capacity
	// they count against: in their bucket, in a group's key queue, held by a
	// paused kind, picked for the run queue and not taken by an executor yet, or on
	// their way to the loop. A High task that took an evicted Low task's place
	// (Config.EvictLow) counts as Low until it starts. Queued plus the delayed
	// tasks of a priority stay within its Capacity (but for retries, see
	// Config.Capacity).
	Queued     ByPriority[int]
	Delayed    int // tasks waiting to be due (delayed or retrying), in the wheel or on their way to it
	Dispatched int // picked and handed to the run queue, not yet started
	Running    int // attempts executing, zombies excluded
	Zombies    int // timed-out functions still running on their own goroutine
	Executors  int // executor goroutines, zombies excluded

	EventsDropped    uint64
	OnTimeoutDropped uint64
	// LogsDropped counts the kernel's log records dropped because 256 of them
	// were waiting for Config.Logger's handler.
	LogsDropped uint64
	// CallbackPanics counts the panics, and calls of runtime.Goexit, recovered from
	// OnEvent, OnTimeout, OnEnd, RetryPolicy.BackoffFunc and Config.Logger's handler.
	CallbackPanics uint64
	// CallbacksAbandoned is the number of OnEvent, OnTimeout, OnEnd and Config.Logger
	// handler calls that were still running when Shutdown or Close stopped waiting
	// for them.
	CallbacksAbandoned int

	// Degraded reports whether the kernel holds Config.DegradeAt of its total
	// capacity or more: a Normal or Low task that cannot start at once is refused
	// ([ErrDegraded]).
	Degraded bool
	// RecentSpan is the span of the recent figures (PriorityStats.WaitRecent,
	// RetryBudgetUse): from the newest reading a Stats call kept at least a minute
	// before this one (a reading is kept at most every 10 s), or the oldest kept, to
	// now. Zero at the first call, which only keeps its reading. Once the kernel
	// stopped, the recent figures are those of the first call after it stopped.
	RecentSpan time.Duration
	// RetryBudgetUse is the retries started over RecentSpan divided by those
	// Config.RetryBudget allows in such a span for the first attempts started in it:
	// from 1 on, the budget refuses retries. Zero with the budget disabled.
	RetryBudgetUse float64
	// Paused lists what [Kernel.Pause] paused and [Kernel.Resume] did not resume
	// (priorities, groups, keys, durable kinds), in the order it was paused. Nil if
	// nothing is paused.
	Paused []Selector

	// Store is the journal of durable tasks; zero without Config.Store.
	Store StoreStats

	// Groups holds the figures of each group of Config.Groups, by name (a group an
	// Update removed stays, its figures frozen once its tasks ended); nil if none.
	Groups map[string]GroupStats
}

// StoreStats are the figures of the durable-task journal.
type StoreStats struct {
	Commits uint64 // group commits that landed
	Changes uint64 // changes they held
	Errors  uint64 // commits that failed (the store did not answer)
	Refused uint64 // changes the store refused (stale fence, unknown task...), logged
	// Prestarted counts the durable tasks started in the commit that stored them
	// (a submit to a kernel with a free slot and nothing queued).
	Prestarted uint64
	Pending    int  // changes waiting for a commit
	Down       bool // the store is known to be down: durable submits fail fast
	Held       int  // recovered tasks whose kind is not registered yet, or whose group (DurableTask.Group) is not in Config.Groups

	// With a SharedStore: this kernel's owner and what its membership did.
	Owner     string // the owner's name (Config.Owner or the generated one)
	Epoch     uint64 // the membership now
	Joins     uint64 // memberships begun: 1, plus one per rejoin after a lease ended
	LeaseLost uint64 // commits refused because this kernel's lease had ended
	Rescued   uint64 // tasks taken over from ended owners
	Claimed   uint64 // tasks claimed from the pool
	// Adopted counts the pool tasks this kernel put there and started itself through
	// its journal, without a claim; AdoptRefused those whose start found them taken
	// by another kernel (which runs them).
	Adopted, AdoptRefused uint64
	Following             int // tasks this kernel put in the pool and follows (not claimed here)
}

// Terminal returns the number of tasks that ended, all priorities together.
func (s *Stats) Terminal() uint64 {
	var n uint64
	for _, p := range []*PriorityStats{&s.ByPriority.High, &s.ByPriority.Normal, &s.ByPriority.Low} {
		n += p.Succeeded + p.Failed + p.TimedOut + p.Evicted + p.Canceled + p.Abandoned
	}
	return n
}

// Stats returns the kernel's figures. It never waits for the loop: Delayed, and the
// delayed tasks Queued leaves out, are published after each loop pass (they may
// lag one pass behind); Queued's admission tickets, Running, Dispatched, Zombies
// and Executors are read live. Safe for concurrent use.
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
			Panics: m.panics[l].Get(), Abandoned: m.abandoned[l].Get(), RetriesRefused: m.retriesRefused[l].Get(),
			Wait: Percentiles(m.wait[l].Summary()), Exec: Percentiles(m.exec[l].Summary()),
		}
	}
	in := k.intakeCounts()
	lv := k.rq.live()
	queued, delayed := k.waitFigures(&in, &lv)
	ps[queue.High].Running, ps[queue.Low].Running = lv.running-lv.runningOther, lv.runningLow
	ps[queue.Normal].Running = lv.runningOther - lv.runningLow
	var started, retried uint64
	for l := range ps {
		ps[l].Submitted = in.submitted[l]
		ps[l].Queued, ps[l].Delayed = queued[l], delayed[l]
		s.Delayed += delayed[l]
		started, retried = started+ps[l].Started, retried+ps[l].Retried
	}
	recent, d, span := m.recent.Read(k.clk.Now(), started, retried)
	for l := range ps {
		ps[l].WaitRecent = Percentiles(recent[l])
	}
	rc := k.rc.Load()
	s.RecentSpan = span
	s.RetryBudgetUse = retries.Use(retries.Config(rc.cfg.RetryBudget), d[0]-min(d[1], d[0]), d[1], span)
	s.Degraded = rc.degrade > 0 && k.waiting[0].Load()+k.waiting[1].Load()+k.waiting[2].Load() >= rc.degrade
	if p := k.paused.Load(); p != nil && len(*p) > 0 {
		s.Paused = slices.Clone(*p)
	}
	s.ByPriority = ByPriority[PriorityStats]{High: ps[queue.High], Normal: ps[queue.Normal], Low: ps[queue.Low]}
	s.Queued = ByPriority[int]{High: ps[queue.High].Queued, Normal: ps[queue.Normal].Queued, Low: ps[queue.Low].Queued}
	s.Running, s.Dispatched, s.Zombies, s.Executors = lv.running, lv.dispatched, lv.zombies, lv.workers
	s.EventsDropped = m.eventsDropped.Get()
	s.OnTimeoutDropped = m.onTimeoutDropped.Get()
	s.LogsDropped = m.logsDropped.Get()
	s.CallbackPanics = m.callbackPanics.Get()
	s.CallbacksAbandoned = int(m.callbacksAbandoned.Load())
	k.gpub.Each(func(name string, p *metricfam.Group) {
		if s.Groups == nil {
			s.Groups = make(map[string]GroupStats)
		}
		s.Groups[name] = groupStats(p)
	})
	if d := k.dur; d != nil {
		j := d.j.Counts()
		s.Store = StoreStats{
			Commits: j.Commits, Changes: j.Changes, Errors: j.CommitErrors,
			Refused: j.Refused, Prestarted: j.Prestarted, Pending: int(j.Pending), Down: j.Down,
			Adopted: j.Adopted, AdoptRefused: j.AdoptRefused, Held: d.reg.Held(),
		}
		if o := d.own; o != nil {
			m, c := o.Current(), o.Counts()
			s.Store.Owner, s.Store.Epoch = m.Name, m.Epoch
			s.Store.Joins, s.Store.LeaseLost = c.Joins, c.LeaseLost
			s.Store.Rescued, s.Store.Claimed = c.Rescued, c.Claimed
			s.Store.Following = c.Following
		}
	}
	return s
}

// runqFigures are the run queue's live counts, and the tickets of the tasks
// executors took that were not given back yet (runq.tickets), by level.
type runqFigures struct {
	running, dispatched, zombies, workers int
	runningOther, runningLow              int // of running: not High, Low
	tickets                               [queue.NumLevels]int64
	started                               int // dispatched entries that hold no ticket: started already
}

// live reads the run queue's counts under its lock.
func (q *runq) live() runqFigures {
	q.mu.Lock()
	defer q.mu.Unlock()
	f := runqFigures{
		running: q.running, dispatched: q.queued(), zombies: q.zombies, workers: q.workers,
		runningOther: q.runningOther, runningLow: q.runningLow,
	}
	copy(f.tickets[:], q.tickets[1:])
	f.started = int(q.noTicket - q.tickets[0])
	return f
}

// waitFigures returns the tasks that wait to start (Stats.Queued) and the
// delayed ones (PriorityStats.Delayed), by level. A level's admission tickets
// (Kernel.waiting) are held by its tasks waiting to start, by its delayed tasks
// (in the wheel, parked, or lazy in the intake), by the intake's reserve for lazy
// tasks, and by tasks executors started whose tickets are on their way back
// (runq.tickets): the first are the tickets less the others. The figures are read one after the other
// while tasks move, so a level's figure is clamped to [0, its tickets]. Once the
// loop returned, no task waits: a ticket still held belongs to a submission
// racing Shutdown or Close, which fails with ErrClosed and gives it back.
func (k *Kernel) waitFigures(in *intakeFigures, lv *runqFigures) (queued, delayed [queue.NumLevels]int) {
	stopped := isDone(k.loopDone)
	for l := range queue.NumLevels {
		d := k.m.delayed[l].Load() + int64(in.lazies[l])
		delayed[l] = int(d)
		tickets := k.waiting[l].Load()
		if !stopped {
			queued[l] = int(min(max(tickets-d-in.reserve[l]-lv.tickets[l], 0), max(tickets, 0)))
		}
	}
	return queued, delayed
}

// Percentiles summarises a distribution of durations.
type Percentiles struct {
	Count               uint64
	Mean                time.Duration
	P50, P90, P99, P999 time.Duration
	Max                 time.Duration
}
