package bench

import (
	"context"
	"slices"
	"time"
)

// floodMix is the flood workload: Low saturates the executor three times over
// while High and Normal together ask for more than all of it (60 % and 50 %),
// so that a strict-priority pool leaves Low nothing and a FIFO pool makes
// High wait behind Low. Task durations spread ±50 % around Params.Work, and
// every task runs under a timeout of four times Work.
var floodMix = saturationMixOf{
	classes: [numPriorities]saturationClass{
		High:   {work: 1, load: 0.60},
		Normal: {work: 1, load: 0.50},
		Low:    {work: 1, load: 3},
	},
	spread:  0.5,
	timeout: 4,
}

// floodExecutors are the executors flood measures: ax, the strict-priority
// pool, pools with one FIFO (bounded and blocking, or unbounded) and one that
// refuses when full.
var floodExecutors = []string{"ax", "priopool", "chanpool", "pond", "workerpool", "ants-nb"}

func floodScenario() Scenario {
	return Scenario{
		Name: "flood",
		Key:  "wait_p99_us_high",
		Doc: "Low floods at 3× capacity while High and Normal ask for 60 % and 50 % of it " +
			"(tasks of 25–75 ms under a 200 ms timeout, concurrency 100, for 2 s): " +
			"submit→start per priority from the intended arrival, Low's share of the starts, timeouts and losses",
		Defaults: Params{Conc: 100, Work: 50 * time.Millisecond, Duration: 2 * time.Second},
		Fix:      func(p Params) Params { return fixMix(floodMix, p) },
		Accepts:  func(f Factory) bool { return slices.Contains(floodExecutors, f.Name) },
		Run: func(ctx context.Context, f Factory, p Params) (*Sample, error) {
			return runPriorityMix(ctx, f, p, floodMix)
		},
	}
}
