package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// seriesWindows is how many time windows the per-priority series of the
// mixed and saturation scenarios have.
const seriesWindows = 40

func mixedScenario() Scenario {
	return Scenario{
		Name: "mixed",
		Key:  "wait_p99_us_high",
		Doc:  "High, Normal and Low arrivals (a third each) at 2× capacity, tasks of 2 ms at concurrency 50: wait per priority, dispatch shares, longest Low wait",
		Defaults: Params{
			N: 25_000, Conc: 50, Work: 2 * time.Millisecond,
		},
		Run: runMixed,
	}
}

func runMixed(ctx context.Context, f Factory, p Params) (*Sample, error) {
	if p.Work <= 0 {
		return nil, fmt.Errorf("bench: mixed needs work > 0")
	}
	if p.Rate == 0 {
		p.Rate = 2 * float64(p.Conc) / p.Work.Seconds()
	}
	ex, err := build(ctx, f, p)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	out := newSample()
	noteMode(out, f, p)
	if !f.Priorities {
		out.note("no priorities: every class waits in one FIFO")
	}

	// Times in ns since t0; started[i] is written by task i, read after Wait.
	started := make([]int64, p.N)
	refused := make([]bool, p.N)
	work := p.Work
	t0 := time.Now()
	smp := startSampler(ex, t0, true)
	err = OpenLoop(ctx, t0, p.N, p.Rate, func(i int, _ time.Duration) {
		t := Task{
			Priority: Priority(i % int(numPriorities)),
			Run: func(context.Context) error {
				started[i] = int64(time.Since(t0))
				time.Sleep(work)
				return nil
			},
		}
		if ex.Submit(t) != nil {
			refused[i] = true
		}
	})
	ex.Wait()
	smp.finish(out)
	if err != nil {
		return nil, err
	}

	interval := 1e9 / p.Rate
	due := func(i int) int64 { return int64(float64(i) * interval) }
	window := int64(p.arrivalWindow())
	waits := make([][]int64, numPriorities)
	var inWindow [numPriorities]int
	var total, executed, rejected int64
	rej := make([]int64, numPriorities)
	for i, st := range started {
		pr := Priority(i % int(numPriorities))
		switch {
		case refused[i]:
			rejected++
			rej[pr]++
			continue
		case st == 0: // never ran: lost
			continue
		}
		executed++
		waits[pr] = append(waits[pr], st-due(i))
		// Shares count the starts of the saturated stretch: after the first
		// tenth of the arrivals (when the buckets fill), before the last arrival.
		if st >= window/10 && st <= window {
			inWindow[pr]++
			total++
		}
	}
	for pr := range numPriorities {
		name := "_" + pr.String()
		QuantilesOf(waits[pr]).put(out.Metrics, "wait", name)
		out.Metrics["rejected"+name] = float64(rej[pr])
		if total > 0 {
			out.Metrics["share"+name] = float64(inWindow[pr]) / float64(total)
		}
	}
	if q, ok := ex.(Quoter); ok && total > 0 {
		want := q.QuotaShares()
		for pr := range numPriorities {
			name := "_" + pr.String()
			out.Metrics["share_quota"+name] = want[pr]
			out.Metrics["share_error_pp"+name] = 100 * (out.Metrics["share"+name] - want[pr])
		}
	}
	out.Metrics["rejected"] = float64(rejected)
	out.Metrics["rate_per_sec"] = p.Rate
	// The capacity the executor reached in the saturated stretch (starts a
	// second), and High's arrivals as a fraction of it: above a High share,
	// High queues behind its own arrivals whatever the scheduler does.
	if span := float64(window-window/10) / 1e9; span > 0 && total > 0 {
		capacity := float64(total) / span
		out.Metrics["capacity_per_sec"] = capacity
		out.Metrics["demand_high"] = p.Rate / float64(numPriorities) / capacity
	}
	checkLost(out, int64(p.N)-rejected, executed)
	recs := make([]waitRec, 0, executed)
	end := window
	for i, st := range started {
		if refused[i] || st == 0 {
			continue
		}
		recs = append(recs, waitRec{pr: Priority(i % int(numPriorities)), due: due(i), start: st})
		end = max(end, st)
	}
	out.Series = append(out.Series, prioritySeries(recs, end)...)
	return out, nil
}

// waitRec is one task of a per-priority series: its priority, and its due
// and start times in ns since the run's start (start 0: not started).
type waitRec struct {
	pr         Priority
	due, start int64
}

// prioritySeries computes, per time window up to end, the p99 wait of each
// priority among the tasks that started in it, and the backlog (arrived, not
// yet started) at the window's end. A task not started by end is in the
// backlog from its due time on.
func prioritySeries(recs []waitRec, end int64) []Series {
	step := max(end/seriesWindows, 1)
	n := int(end/step) + 1
	buckets := make([][numPriorities][]int64, n)
	backlog := make([]float64, n)
	for _, r := range recs {
		st := r.start
		if st <= 0 || st > end {
			st = math.MaxInt64
		} else {
			b := int(st / step)
			buckets[b][r.pr] = append(buckets[b][r.pr], st-r.due)
		}
		// The task is in the backlog at every window end in [due, start).
		for w := int(r.due / step); w < n && int64(w+1)*step <= st; w++ {
			backlog[w]++
		}
	}
	var out []Series
	for pr := range numPriorities {
		s := Series{Name: "wait_p99_us_" + pr.String(), Unit: "µs"}
		for b := range buckets {
			if len(buckets[b][pr]) == 0 {
				continue
			}
			ws := buckets[b][pr]
			slices.Sort(ws)
			s.add(float64(int64(b+1)*step)/1e9, float64(Percentile(ws, 99))/1e3)
		}
		out = append(out, s)
	}
	bl := Series{Name: "backlog", Unit: "tasks"}
	for w, v := range backlog {
		bl.add(float64(int64(w+1)*step)/1e9, v)
	}
	return append(out, bl)
}
