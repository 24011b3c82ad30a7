package durable

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// publishEveryMax bounds the time between two publications of a kernel's figures,
// whatever its lease: a console shows them with their age.
const publishEveryMax = 5 * time.Second

// publish publishes the kernel's figures (Config.Figures) on rs at once, then
// every HeartbeatEvery (at most publishEveryMax), as the owner it is at the time,
// until Stop: each publication its own store call, never in a commit. Rates are
// the changes of the totals since the previous publication. A failure is logged
// once until a publication succeeds again.
func (o *Owner) publish(rs store.ReplicaStore) {
	every := min(o.HeartbeatEvery(), publishEveryMax)
	t := o.clk.Timer(0)
	defer t.Stop()
	var (
		prev   store.ReplicaFigures
		prevAt time.Time
		failed bool
	)
	for {
		select {
		case <-o.stopCh:
			return
		case <-t.C:
		}
		now := o.clk.Now()
		f := o.figures()
		f.Version = version()
		if !prevAt.IsZero() {
			f.RateSpan = now.Sub(prevAt)
			for _, p := range []store.Priority{store.High, store.Normal, store.Low} {
				*f.Rates.At(p) = rates(prev.Totals.At(p), f.Totals.At(p), f.RateSpan)
			}
		}
		prev, prevAt = f, now
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		_, err := call(o.guard, "PublishReplica", func() (struct{}, error) { return struct{}{}, rs.PublishReplica(ctx, o.Current(), f) })
		cancel()
		if err != nil && !failed && o.log != nil {
			o.log.Log(slog.LevelWarn, "kernel: publish the kernel's figures on the store", "owner", o.Current().Name, "err", err)
		}
		failed = err != nil
		t.Reset(every)
	}
}

// rates returns the changes from a to b per second over span (0 for a counter
// that went down).
func rates(a, b *store.ReplicaCounts, span time.Duration) store.ReplicaRates {
	s := span.Seconds()
	r := func(x, y uint64) float64 {
		if s <= 0 || y < x {
			return 0
		}
		return float64(y-x) / s
	}
	return store.ReplicaRates{
		Submitted: r(a.Submitted, b.Submitted), Succeeded: r(a.Succeeded, b.Succeeded), Failed: r(a.Failed, b.Failed),
		TimedOut: r(a.TimedOut, b.TimedOut), Retried: r(a.Retried, b.Retried), Rejected: r(a.Rejected, b.Rejected),
	}
}

// version names the ax the binary was built with: "ax " and the version of the
// module github.com/axsched/ax (or "(devel)" when it is the main module, or
// built without module information).
var version = sync.OnceValue(func() string {
	const path = "github.com/axsched/ax"
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
			if m.Path == path && m.Version != "" {
				v = m.Version
				if m.Replace != nil && m.Replace.Version != "" {
					v = m.Replace.Version
				}
			}
		}
	}
	return "ax " + v
})
