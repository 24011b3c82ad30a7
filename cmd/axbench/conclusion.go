package main

import (
	"fmt"
	"strings"

	"github.com/axsched/ax/bench"
)

// starvedShare is the share of the starts under which a priority counts as
// starved in a conclusion.
const starvedShare = 0.005

// priorityConclusion sums up a priority scenario in two lines computed from
// its medians: ax's High p99 against the best FIFO pool that ran every task,
// and the share of the starts Low kept under ax against the strict-priority
// pool (with its High p99). A line whose executors did not run is left out.
func priorityConclusion(rp bench.Report) []string {
	const high, low = "wait_p99_us_high", "share_low"
	ax, ok := rp.Result("ax")
	if !ok {
		return nil
	}
	axHigh, okH := ax.Metrics[high]
	axLow, okL := ax.Metrics[low]
	prio, hasPrio := rp.Result("priopool")
	var lines []string
	if fifo, fifoHigh, ok := bestFIFO(rp, high); ok && okH {
		lines = append(lines, fmt.Sprintf("High p99 wait: %s under ax, %s than in the best FIFO pool (%s: %s).",
			micros(axHigh.Median), times(fifoHigh, axHigh.Median), fifo, micros(fifoHigh)))
	}
	if s, ok := prio.Metrics[low]; hasPrio && ok && okL {
		verdict := "starved it"
		if s.Median >= starvedShare {
			verdict = "gave it " + percent(s.Median)
		}
		who := "priopool"
		if h, ok := prio.Metrics[high]; ok {
			who += ", High p99 " + micros(h.Median)
		}
		lines = append(lines, fmt.Sprintf("Low kept %s of the starts under ax; strict priority (%s) %s.",
			percent(axLow.Median), who, verdict))
	}
	return lines
}

// bestFIFO returns the executor without priorities (neither ax, nor
// priopool, nor a goroutine per task) that ran every task with the lowest
// median of metric, and that median.
func bestFIFO(rp bench.Report, metric string) (string, float64, bool) {
	name, best := "", 0.0
	for _, r := range rp.Results {
		s, ok := r.Metrics[metric]
		if !ok || !ranAll(r) || strings.HasPrefix(r.Executor, "ax") ||
			strings.HasPrefix(r.Executor, "priopool") || r.Executor == "go" {
			continue
		}
		if name == "" || s.Median < best {
			name, best = r.Executor, s.Median
		}
	}
	return name, best, name != ""
}

// times says how ax's figure compares with other: "95× less" when ax's is
// lower, "1.5× more" when higher.
func times(other, ax float64) string {
	switch {
	case ax <= 0 || other <= 0:
		return "no ratio"
	case other >= ax:
		return ratioText(other/ax) + " less"
	default:
		return ratioText(ax/other) + " more"
	}
}

// ratioText formats a ratio of at least 1 with two significant digits (1.5×,
// 95×, 1200×).
func ratioText(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.0f×", r)
}
