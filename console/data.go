package console

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
	"github.com/axsched/ax/store"
)

// The shapes of the JSON API (docs/console.md describes them); the pages render
// the same values.

// overviewData is GET api/v1/overview.
type overviewData struct {
	Time       time.Time `json:"time"`
	IntervalMS int64     `json:"interval_ms"`
	RateSpanS  float64   `json:"rate_span_s"`
	Running    int       `json:"running"`
	Dispatched int       `json:"dispatched"`
	Delayed    int       `json:"delayed"`
	Zombies    int       `json:"zombies"`
	Executors  int       `json:"executors"`
	// Degraded: only High tasks may wait for a slot (kernel.Stats.Degraded).
	Degraded bool `json:"degraded"`
	// RecentSpanS is the span of wait_recent and retry_budget_use, in seconds.
	RecentSpanS    float64 `json:"recent_span_s"`
	RetryBudgetUse float64 `json:"retry_budget_use"`
	// Paused lists what is paused: each entry sets one of priority, group (with
	// key for a key) and kind.
	Paused     []pausedData   `json:"paused"`
	Priorities []priorityData `json:"priorities"`
	Callbacks  callbackData   `json:"callbacks"`
	Store      *storeData     `json:"store,omitempty"`
	Samples    []pointData    `json:"samples"`
}

type pausedData struct {
	Priority string `json:"priority,omitempty"`
	Group    string `json:"group,omitempty"`
	Key      string `json:"key,omitempty"`
	Kind     string `json:"kind,omitempty"`
}

type priorityData struct {
	Priority string `json:"priority"`
	Queued   int    `json:"queued"`
	Running  int    `json:"running"`
	Delayed  int    `json:"delayed"`
	Totals   counts `json:"totals"`
	// Rates are per second over the last rate_span_s seconds.
	Rates rates `json:"rates"`
	// RetryShare is the retries over the first attempts started in the span.
	RetryShare float64         `json:"retry_share"`
	Wait       percentilesData `json:"wait"`
	Exec       percentilesData `json:"exec"`
	// WaitRecent is Wait over the last recent_span_s seconds.
	WaitRecent percentilesData `json:"wait_recent"`
}

type counts struct {
	Submitted      uint64 `json:"submitted"`
	Started        uint64 `json:"started"`
	Succeeded      uint64 `json:"succeeded"`
	Failed         uint64 `json:"failed"`
	TimedOut       uint64 `json:"timed_out"`
	Retried        uint64 `json:"retried"`
	Rejected       uint64 `json:"rejected"`
	Evicted        uint64 `json:"evicted"`
	Canceled       uint64 `json:"canceled"`
	Panics         uint64 `json:"panics"`
	Abandoned      uint64 `json:"abandoned"`
	RetriesRefused uint64 `json:"retries_refused"`
}

type rates struct {
	Submitted      float64 `json:"submitted"`
	Started        float64 `json:"started"`
	Succeeded      float64 `json:"succeeded"`
	Failed         float64 `json:"failed"`
	TimedOut       float64 `json:"timed_out"`
	Retried        float64 `json:"retried"`
	Rejected       float64 `json:"rejected"`
	RetriesRefused float64 `json:"retries_refused"`
}

// percentilesData are durations in milliseconds, since the kernel started.
type percentilesData struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

type callbackData struct {
	EventsDropped      uint64 `json:"events_dropped"`
	OnTimeoutDropped   uint64 `json:"on_timeout_dropped"`
	LogsDropped        uint64 `json:"logs_dropped"`
	CallbackPanics     uint64 `json:"callback_panics"`
	CallbacksAbandoned int    `json:"callbacks_abandoned"`
}

type storeData struct {
	Owner      string `json:"owner"`
	Epoch      uint64 `json:"epoch"`
	Down       bool   `json:"down"`
	Pending    int    `json:"pending"`
	Held       int    `json:"held"`
	Following  int    `json:"following"`
	Commits    uint64 `json:"commits"`
	Changes    uint64 `json:"changes"`
	Errors     uint64 `json:"errors"`
	Refused    uint64 `json:"refused"`
	Joins      uint64 `json:"joins"`
	LeaseLost  uint64 `json:"lease_lost"`
	Rescued    uint64 `json:"rescued"`
	Claimed    uint64 `json:"claimed"`
	Prestarted uint64 `json:"prestarted"`
	Adopted    uint64 `json:"adopted"`
}

type pointData struct {
	Time      int64      `json:"t_ms"` // Unix milliseconds
	Submitted float64    `json:"submitted_per_s"`
	Ended     float64    `json:"ended_per_s"`
	Queued    int        `json:"queued"`
	Running   int        `json:"running"`
	WaitMean  byPriority `json:"wait_mean_ms"`
	// WaitP99 is the kernel's recent wait p99 (over about a minute) at the sample.
	WaitP99 byPriority `json:"wait_p99_ms"`
}

type byPriority struct {
	High   float64 `json:"high"`
	Normal float64 `json:"normal"`
	Low    float64 `json:"low"`
}

// groupsData is GET api/v1/groups.
type groupsData struct {
	Time   time.Time   `json:"time"`
	Groups []groupData `json:"groups"`
}

type groupData struct {
	Name              string `json:"name"`
	Paused            bool   `json:"paused"`
	Waiting           int    `json:"waiting"`
	Running           int    `json:"running"`
	Keys              int    `json:"keys"`
	ThrottledKeys     int    `json:"throttled_keys"`
	PausedKeys        int    `json:"paused_keys"`
	OpenBreakers      int    `json:"open_breakers"`
	Throttles         uint64 `json:"throttles"`
	RateLimited       uint64 `json:"rate_limited"`
	BreakerOpened     uint64 `json:"breaker_opened"`
	BreakerHalfOpened uint64 `json:"breaker_half_opened"`
	BreakerClosed     uint64 `json:"breaker_closed"`
	CircuitOpenFailed uint64 `json:"circuit_open_failed"`
}

// schedulesData is GET api/v1/schedules.
type schedulesData struct {
	Time      time.Time      `json:"time"`
	Scheduler bool           `json:"scheduler"` // a scheduler is attached (Options.Scheduler)
	Schedules []scheduleData `json:"schedules"`
}

type scheduleData struct {
	Name     string    `json:"name"`
	Spec     string    `json:"spec"`
	Next     time.Time `json:"next,omitzero"`
	Last     time.Time `json:"last,omitzero"`
	Fires    uint64    `json:"fires"`
	Misfires uint64    `json:"misfires"`
	Skipped  uint64    `json:"skipped"`
	Refused  uint64    `json:"refused"`
	Paused   bool      `json:"paused"`
	Ended    bool      `json:"ended"`
	// LastOutcome is the schedule's last outcome (schedule.Entry.Last): "running",
	// "succeeded", "failed", "canceled", "misfired", "skipped", "refused" or
	// "submitted"; empty before the first.
	LastOutcome   string    `json:"last_outcome,omitempty"`
	LastOutcomeAt time.Time `json:"last_outcome_at,omitzero"`
	LastError     string    `json:"last_error,omitempty"` // its error's text, at most schedule.ErrTextMax bytes and "…"
	// LastTaskID is, for "submitted", the durable task of the occurrence
	// (store.OccurrenceID): the Tasks pages show how it ended.
	LastTaskID string `json:"last_task_id,omitempty"`
}

// zombiesData is GET api/v1/zombies.
type zombiesData struct {
	Time    time.Time    `json:"time"`
	Zombies []zombieData `json:"zombies"`
}

type zombieData struct {
	TaskID   string    `json:"task_id"`
	Attempt  int       `json:"attempt"`
	Priority string    `json:"priority"`
	Group    string    `json:"group,omitempty"`
	Key      string    `json:"key,omitempty"`
	Kind     string    `json:"kind,omitempty"`
	Since    time.Time `json:"since"`
	AgeMS    float64   `json:"age_ms"`
	Stack    string    `json:"stack,omitempty"` // empty until the zombie outlived Config.ZombieGrace
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentilesOf(p kernel.Percentiles) percentilesData {
	return percentilesData{Count: p.Count, Mean: ms(p.Mean), P50: ms(p.P50), P90: ms(p.P90), P99: ms(p.P99), P999: ms(p.P999), Max: ms(p.Max)}
}

func countsOf(p *kernel.PriorityStats) counts {
	return counts{
		Submitted: p.Submitted, Started: p.Started, Succeeded: p.Succeeded, Failed: p.Failed,
		TimedOut: p.TimedOut, Retried: p.Retried, Rejected: p.Rejected, Evicted: p.Evicted,
		Canceled: p.Canceled, Panics: p.Panics, Abandoned: p.Abandoned, RetriesRefused: p.RetriesRefused,
	}
}

// overview builds the overview from the kernel's Stats now and the sampler's
// samples.
func (c *console) overview(buf []point) overviewData {
	st := c.k.Stats()
	now := c.clk.Now()
	oldest, newest := c.sm.span()
	span := newest.at.Sub(oldest.at).Seconds()
	d := overviewData{
		Time: now, IntervalMS: c.every.Milliseconds(), RateSpanS: span,
		Running: st.Running, Dispatched: st.Dispatched, Delayed: st.Delayed, Zombies: st.Zombies, Executors: st.Executors,
		Degraded: st.Degraded, RecentSpanS: st.RecentSpan.Seconds(), RetryBudgetUse: st.RetryBudgetUse,
		Paused: make([]pausedData, 0, len(st.Paused)),
		Callbacks: callbackData{
			EventsDropped: st.EventsDropped, OnTimeoutDropped: st.OnTimeoutDropped, LogsDropped: st.LogsDropped,
			CallbackPanics: st.CallbackPanics, CallbacksAbandoned: st.CallbacksAbandoned,
		},
		Priorities: make([]priorityData, 0, 3),
	}
	for _, l := range []struct {
		name     string
		now      *kernel.PriorityStats
		old, new *kernel.PriorityStats
	}{
		{"high", &st.ByPriority.High, &oldest.st.ByPriority.High, &newest.st.ByPriority.High},
		{"normal", &st.ByPriority.Normal, &oldest.st.ByPriority.Normal, &newest.st.ByPriority.Normal},
		{"low", &st.ByPriority.Low, &oldest.st.ByPriority.Low, &newest.st.ByPriority.Low},
	} {
		p := priorityData{
			Priority: l.name, Queued: l.now.Queued, Running: l.now.Running, Delayed: l.now.Delayed, Totals: countsOf(l.now),
			Wait: percentilesOf(l.now.Wait), Exec: percentilesOf(l.now.Exec), WaitRecent: percentilesOf(l.now.WaitRecent),
		}
		if span > 0 {
			r := func(a, b uint64) float64 {
				if b < a {
					return 0
				}
				return float64(b-a) / span
			}
			o, n := l.old, l.new
			p.Rates = rates{
				Submitted: r(o.Submitted, n.Submitted), Started: r(o.Started, n.Started),
				Succeeded: r(o.Succeeded, n.Succeeded), Failed: r(o.Failed, n.Failed),
				TimedOut: r(o.TimedOut, n.TimedOut), Retried: r(o.Retried, n.Retried),
				Rejected: r(o.Rejected, n.Rejected), RetriesRefused: r(o.RetriesRefused, n.RetriesRefused),
			}
			if first := p.Rates.Started - p.Rates.Retried; first > 0 {
				p.RetryShare = p.Rates.Retried / first
			}
		}
		d.Priorities = append(d.Priorities, p)
	}
	for _, sel := range st.Paused {
		pd := pausedData{Group: sel.Group, Key: sel.Key, Kind: sel.Kind}
		if sel.Group == "" && sel.Kind == "" {
			pd.Priority = sel.Priority.String()
		}
		d.Paused = append(d.Paused, pd)
	}
	if s := st.Store; s != (kernel.StoreStats{}) {
		d.Store = &storeData{
			Owner: s.Owner, Epoch: s.Epoch, Down: s.Down, Pending: s.Pending, Held: s.Held, Following: s.Following,
			Commits: s.Commits, Changes: s.Changes, Errors: s.Errors, Refused: s.Refused, Joins: s.Joins,
			LeaseLost: s.LeaseLost, Rescued: s.Rescued, Claimed: s.Claimed, Prestarted: s.Prestarted, Adopted: s.Adopted,
		}
	}
	pts := c.sm.points(buf)
	d.Samples = make([]pointData, len(pts))
	for i, p := range pts {
		d.Samples[i] = pointData{
			Time: p.at.UnixMilli(), Submitted: p.submitted, Ended: p.ended, Queued: p.queued, Running: p.running,
			WaitMean: byPriority{High: p.waitMean.High, Normal: p.waitMean.Normal, Low: p.waitMean.Low},
			WaitP99:  byPriority{High: p.waitP99.High, Normal: p.waitP99.Normal, Low: p.waitP99.Low},
		}
	}
	return d
}

func (c *console) groups() groupsData {
	st := c.k.Stats()
	d := groupsData{Time: c.clk.Now(), Groups: make([]groupData, 0, len(st.Groups))}
	for name, g := range st.Groups {
		d.Groups = append(d.Groups, groupData{
			Name: name, Paused: g.Paused, Waiting: g.Waiting, Running: g.Running, Keys: g.Keys,
			ThrottledKeys: g.ThrottledKeys, PausedKeys: g.PausedKeys, OpenBreakers: g.OpenBreakers,
			Throttles: g.Throttles, RateLimited: g.RateLimited, BreakerOpened: g.BreakerOpened,
			BreakerHalfOpened: g.BreakerHalfOpened, BreakerClosed: g.BreakerClosed, CircuitOpenFailed: g.CircuitOpenFailed,
		})
	}
	slices.SortFunc(d.Groups, func(a, b groupData) int { return strings.Compare(a.Name, b.Name) })
	return d
}

func (c *console) schedules() schedulesData {
	d := schedulesData{Time: c.clk.Now(), Scheduler: c.s != nil, Schedules: []scheduleData{}}
	if c.s == nil {
		return d
	}
	for name, st := range c.s.Stats() {
		sd := scheduleData{
			Name: name, Next: st.Next, Last: st.Last, Fires: st.Fires, Misfires: st.Misfires,
			Skipped: st.Skipped, Refused: st.Refused, Paused: st.Paused, Ended: st.Ended,
		}
		if e := c.s.Entry(name); e != nil {
			sd.Spec = specText(e.Spec())
		}
		if o := st.Outcome; o.Outcome != schedule.OutcomeNone {
			sd.LastOutcome, sd.LastOutcomeAt, sd.LastError = o.Outcome.String(), o.At, o.Err
			if o.Outcome == schedule.OutcomeSubmitted {
				sd.LastTaskID = store.OccurrenceID(name, o.At)
			}
		}
		d.Schedules = append(d.Schedules, sd)
	}
	slices.SortFunc(d.Schedules, func(a, b scheduleData) int { return strings.Compare(a.Name, b.Name) })
	return d
}

// specText is a Spec's text: its String method's, or its type.
func specText(sp any) string {
	if s, ok := sp.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", sp)
}

func (c *console) zombies() zombiesData {
	now := c.clk.Now()
	zs := c.k.Zombies()
	d := zombiesData{Time: now, Zombies: make([]zombieData, 0, len(zs))}
	for _, z := range zs {
		d.Zombies = append(d.Zombies, zombieData{
			TaskID: z.TaskID, Attempt: z.Attempt, Priority: z.Priority.String(), Group: z.Group, Key: z.Key, Kind: z.Kind,
			Since: z.Since, AgeMS: ms(now.Sub(z.Since)), Stack: string(z.Stack),
		})
	}
	slices.SortFunc(d.Zombies, func(a, b zombieData) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.TaskID, b.TaskID))
	})
	return d
}
