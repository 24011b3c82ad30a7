package main

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/bench"
)

// The flood of part 1 is axbench's flood scenario: Low tasks arrive at three
// times what floodConc slots complete, while High and Normal ask for 60 % and
// 50 % of them; tasks last floodWork ±50 % under a timeout of 4 × floodWork.
const (
	floodScenario = "flood"
	floodConc     = 100
	floodWork     = 50 * time.Millisecond
)

// floodPools are the pools part 1 compares: bench's executor name, and the
// label of its row.
var floodPools = []struct{ exec, label string }{
	{"ax", "ax"},
	{"priopool", "strict priority"},
	{"chanpool", "FIFO pool"},
}

// floodRow is one pool's figures: bench's metrics of a flood run
// (wait_p99_us_high, share_low, completions_per_sec, timed_out, ...).
type floodRow struct {
	label string
	m     map[string]float64
}

// runFlood runs the flood for o.flood on each of floodPools in turn.
func runFlood(ctx context.Context, o options) ([]floodRow, error) {
	reg := bench.NewRegistry()
	sc, ok := reg.Scenario(floodScenario)
	if !ok {
		return nil, fmt.Errorf("demo: bench has no %s scenario", floodScenario)
	}
	p := bench.Params{
		Conc: floodConc, Queue: bench.QueueDefault, Work: floodWork, Duration: o.flood,
		Seed: o.seed, Scale: 1, Shrink: bench.ShrinkDefault,
	}
	if sc.Fix != nil {
		p = sc.Fix(p)
	}
	rows := make([]floodRow, 0, len(floodPools))
	for _, fp := range floodPools {
		f, ok := reg.Executor(fp.exec)
		if !ok {
			return nil, fmt.Errorf("demo: bench has no executor %s", fp.exec)
		}
		s, err := sc.Run(ctx, f, p)
		if err != nil {
			return nil, fmt.Errorf("demo: flood on %s: %w", fp.exec, err)
		}
		rows = append(rows, floodRow{label: fp.label, m: s.Metrics})
	}
	return rows, nil
}
