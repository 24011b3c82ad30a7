package console

import (
	"context"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// replicasTimeout bounds the store call that lists the replicas.
const replicasTimeout = 2 * time.Second

// replicasData is GET api/v1/replicas: every live kernel on the store, with the
// figures it published last.
type replicasData struct {
	Time time.Time `json:"time"`
	// Store reports whether the console has a store.ReplicaStore (Options.Store).
	Store bool `json:"store"`
	// StoreTime is the store's clock when it listed the replicas.
	StoreTime time.Time     `json:"store_time,omitzero"`
	Error     string        `json:"error,omitempty"` // why the store did not answer
	Replicas  []replicaData `json:"replicas"`
}

type replicaData struct {
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
	Self  bool   `json:"self"` // the kernel this console serves
	// LeaseLeftMS is how long the lease runs unless renewed; LastHeartbeat the
	// renewal that set it (its end less the lease).
	LeaseMS       float64   `json:"lease_ms"`
	LeaseLeftMS   float64   `json:"lease_left_ms"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Published is when the kernel published the figures below, AgeMS their age
	// on the store's clock; both zero and the figures empty if it published none.
	Published  time.Time             `json:"published,omitzero"`
	AgeMS      float64               `json:"age_ms"`
	Version    string                `json:"version"`
	Degraded   bool                  `json:"degraded"`
	Zombies    int                   `json:"zombies"`
	RateSpanS  float64               `json:"rate_span_s"`
	Priorities []replicaPriorityData `json:"priorities"`
	// Sum adds up the priorities (its wait percentiles are the largest).
	Sum replicaPriorityData `json:"sum"`
}

type replicaPriorityData struct {
	Priority  string       `json:"priority"`
	Queued    int          `json:"queued"`
	Running   int          `json:"running"`
	Delayed   int          `json:"delayed"`
	Totals    replicaCount `json:"totals"`
	Rates     replicaRate  `json:"rates"` // per second over rate_span_s
	WaitP50MS float64      `json:"wait_p50_ms"`
	WaitP99MS float64      `json:"wait_p99_ms"`
}

type replicaCount struct {
	Submitted uint64 `json:"submitted"`
	Succeeded uint64 `json:"succeeded"`
	Failed    uint64 `json:"failed"`
	TimedOut  uint64 `json:"timed_out"`
	Retried   uint64 `json:"retried"`
	Rejected  uint64 `json:"rejected"`
}

type replicaRate struct {
	Submitted float64 `json:"submitted"`
	Succeeded float64 `json:"succeeded"`
	Failed    float64 `json:"failed"`
	TimedOut  float64 `json:"timed_out"`
	Retried   float64 `json:"retried"`
	Rejected  float64 `json:"rejected"`
}

// replicaCache holds the last list of replicas for an interval, so that pages
// refreshed by several browsers cost the store one read per interval.
type replicaCache struct {
	rs    store.ReplicaStore // immutable; nil without one
	every time.Duration      // immutable

	mu   sync.Mutex   // held across the store call: concurrent requests share it
	at   time.Time    // guarded by mu: when data was read (the console's clock)
	data replicasData // guarded by mu
}

// replicas returns the live replicas, read from the store at most once an
// interval. It never waits on the kernel's loop.
func (c *console) replicas(ctx context.Context) replicasData {
	rc := &c.rc
	now := c.clk.Now()
	if rc.rs == nil {
		return replicasData{Time: now, Replicas: []replicaData{}}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.at.IsZero() && now.Sub(rc.at) < rc.every && now.Sub(rc.at) >= 0 {
		return rc.data
	}
	ctx, cancel := context.WithTimeout(ctx, replicasTimeout)
	defer cancel()
	list, storeNow, err := rc.rs.Replicas(ctx)
	d := replicasData{Time: now, Store: true, StoreTime: storeNow, Replicas: make([]replicaData, 0, len(list))}
	if err != nil {
		d.Error = err.Error()
		return d // not cached: the next request asks again
	}
	self := c.k.Stats().Store.Epoch
	for i := range list {
		d.Replicas = append(d.Replicas, replicaOf(&list[i], storeNow, self))
	}
	rc.at, rc.data = now, d
	return d
}

func replicaOf(r *store.Replica, now time.Time, self uint64) replicaData {
	f := &r.Figures
	d := replicaData{
		Owner: r.Name, Epoch: r.Epoch, Self: r.Epoch == self, LeaseMS: ms(r.Lease), LeaseLeftMS: ms(r.Expires.Sub(now)),
		LastHeartbeat: r.Expires.Add(-r.Lease), Published: r.Published, Version: f.Version, Degraded: f.Degraded,
		Zombies: f.Zombies, RateSpanS: f.RateSpan.Seconds(), Priorities: make([]replicaPriorityData, 0, 3),
	}
	if !r.Published.IsZero() {
		d.AgeMS = ms(now.Sub(r.Published))
	}
	sum := &d.Sum
	sum.Priority = "all"
	for _, p := range []store.Priority{store.High, store.Normal, store.Low} {
		c, rt := f.Totals.At(p), f.Rates.At(p)
		pd := replicaPriorityData{
			Priority: p.String(), Queued: *f.Queued.At(p), Running: *f.Running.At(p), Delayed: *f.Delayed.At(p),
			Totals:    replicaCount{Submitted: c.Submitted, Succeeded: c.Succeeded, Failed: c.Failed, TimedOut: c.TimedOut, Retried: c.Retried, Rejected: c.Rejected},
			Rates:     replicaRate{Submitted: rt.Submitted, Succeeded: rt.Succeeded, Failed: rt.Failed, TimedOut: rt.TimedOut, Retried: rt.Retried, Rejected: rt.Rejected},
			WaitP50MS: ms(*f.WaitP50.At(p)), WaitP99MS: ms(*f.WaitP99.At(p)),
		}
		d.Priorities = append(d.Priorities, pd)
		sum.Queued, sum.Running, sum.Delayed = sum.Queued+pd.Queued, sum.Running+pd.Running, sum.Delayed+pd.Delayed
		sum.Totals = replicaCount{
			Submitted: sum.Totals.Submitted + c.Submitted, Succeeded: sum.Totals.Succeeded + c.Succeeded, Failed: sum.Totals.Failed + c.Failed,
			TimedOut: sum.Totals.TimedOut + c.TimedOut, Retried: sum.Totals.Retried + c.Retried, Rejected: sum.Totals.Rejected + c.Rejected,
		}
		sum.Rates = replicaRate{
			Submitted: sum.Rates.Submitted + rt.Submitted, Succeeded: sum.Rates.Succeeded + rt.Succeeded, Failed: sum.Rates.Failed + rt.Failed,
			TimedOut: sum.Rates.TimedOut + rt.TimedOut, Retried: sum.Rates.Retried + rt.Retried, Rejected: sum.Rates.Rejected + rt.Rejected,
		}
		sum.WaitP50MS, sum.WaitP99MS = max(sum.WaitP50MS, pd.WaitP50MS), max(sum.WaitP99MS, pd.WaitP99MS)
	}
	return d
}
