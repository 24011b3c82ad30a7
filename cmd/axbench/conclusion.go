package main

import (
	"fmt"
	"strings"
	"time"

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

// med0 returns the median of metric name in r, or 0.
func med0(r bench.Result, name string) float64 { return r.Metrics[name].Median }

// groupsConclusion sums up the groups scenario from its medians against the
// issue's targets: limits exact, rate within ±5 %, CPU per task ax ÷ the
// keyed baseline <= 1.5, calls at the failing key while open <= the probes,
// other keys' p99 wait with the bad keys ÷ without <= 1.2.
func groupsConclusion(rp bench.Report) []string {
	ax, ok := rp.Result("ax")
	if !ok {
		return nil
	}
	med := func(r bench.Result, name string) (float64, bool) {
		s, ok := r.Metrics[name]
		return s.Median, ok
	}
	var lines []string
	if got, ok := med(ax, "max_conc_per_key"); ok {
		limit, _ := med(ax, "key_conc_limit")
		verdict := "exact"
		if got > limit {
			verdict = "exceeded"
		}
		lines = append(lines, fmt.Sprintf("Per-key concurrency under ax: %s (observed max %.0f, limit %.0f).", verdict, got, limit))
	}
	if dev, ok := med(ax, "rate_dev_pct_max"); ok {
		ex, _ := med(ax, "rate_excess_pct_max")
		lines = append(lines, fmt.Sprintf("Rate of a backlogged key under ax: worst deviation %.1f %% (excess %.1f %%) over windows of >= 10 starts, "+
			"%.1f %% over its whole backlog; target ±5 %%.", dev, ex, med0(ax, "rate_mean_dev_pct_max")))
	}
	if base, ok := rp.Result("chanpool-keyed"); ok {
		a, okA := med(ax, "overhead_ns_per_task")
		b, okB := med(base, "overhead_ns_per_task")
		if okA && okB && b > 0 {
			lines = append(lines, fmt.Sprintf("CPU per task: ax %.0f ns, per-key semaphores + x/time/rate on chanpool %.0f ns: ratio %.2f (target <= 1.5).", a, b, a/b))
		}
	}
	if open, ok := med(ax, "fail_calls_open_max"); ok {
		probes, _ := med(ax, "breaker_probes")
		trips, _ := med(ax, "breaker_opened")
		lines = append(lines, fmt.Sprintf("Failing key: at most %.0f calls in one open spell of its breaker (%.0f trips; target <= %.0f probes).", open, trips, probes))
	}
	if r, ok := med(ax, "wait_ratio"); ok {
		lines = append(lines, fmt.Sprintf("Other keys' p99 wait with the bad keys ÷ without: %.2f (target <= 1.2).", r))
	}
	if st, ok := med(ax, "stall_max_ms"); ok {
		lines = append(lines, fmt.Sprintf("The process stalled up to %.1f ms during ax's calls (a goroutine sleeping 1 ms woke that late; "+
			"%.1f %% of the time late in all): the rate over 10 starts and the p99 waits include such stalls.", st, med0(ax, "stall_pct")))
	}
	return lines
}

// schedulesConclusion sums up the schedules scenario from its medians against
// the targets: bytes per schedule ax ÷ gocron <= 0.25, ax's lateness
// p99 <= one tick (the kernel's default Config.Tick, kernelTick) + the process's wake-up p99, ax's idle
// CPU < 1 % of a core.
func schedulesConclusion(rp bench.Report) []string {
	ax, ok := rp.Result("ax")
	if !ok {
		return nil
	}
	med := func(r bench.Result, name string) (float64, bool) {
		s, ok := r.Metrics[name]
		return s.Median, ok
	}
	gc, hasGC := rp.Result("gocron")
	var lines []string
	if a, ok := med(ax, "bytes_per_schedule"); ok {
		line := fmt.Sprintf("Memory per schedule: ax %.0f B", a)
		if b, ok := med(gc, "bytes_per_schedule"); hasGC && ok && b > 0 {
			line += fmt.Sprintf(", gocron %.0f B: ratio %.2f", b, a/b)
		}
		lines = append(lines, line+" (target <= 0.25).")
	}
	if p99, ok := med(ax, "lateness_p99_us"); ok {
		wake, _ := med(ax, "wakeup_p99_us")
		bound := float64(kernelTick.Microseconds()) + wake
		line := fmt.Sprintf("Lateness p99: ax %s (p50 %s)", micros(p99), microsOf(ax, "lateness_p50_us"))
		if g, ok := med(gc, "lateness_p99_us"); hasGC && ok {
			line += fmt.Sprintf(", gocron %s (p50 %s)", micros(g), microsOf(gc, "lateness_p50_us"))
		}
		verdict := "met"
		if p99 > bound {
			verdict = "missed"
		}
		lines = append(lines, fmt.Sprintf("%s; target one tick + wake-up p99 = %s: %s.", line, micros(bound), verdict))
		if w, ok := med(ax, "wakeup_any_p99_us"); ok {
			lines = append(lines, fmt.Sprintf("  Wake-up p99 after 2 ms plus a random part of a millisecond "+
				"(a timer armed at any phase of the runtime's millisecond poll): %s; one tick + it = %s.",
				micros(w), micros(float64(kernelTick.Microseconds())+w)))
		}
	}
	if c, ok := med(ax, "idle_cpu_pct"); ok {
		line := fmt.Sprintf("Idle CPU with the schedules live: ax %.3f %% of a core", c)
		if g, ok := med(gc, "idle_cpu_pct"); hasGC && ok {
			line += fmt.Sprintf(", gocron %.3f %%", g)
		}
		lines = append(lines, line+" (target < 1 %).")
	}
	return lines
}

// microsOf formats r's median of metric (microseconds), or "?" if missing.
func microsOf(r bench.Result, metric string) string {
	s, ok := r.Metrics[metric]
	if !ok {
		return "?"
	}
	return micros(s.Median)
}

// kernelTick is the kernel's default Config.Tick.
const kernelTick = time.Millisecond

// flowsDurableConclusion compares ax's durable flows on MariaDB with river's
// chain of jobs: flows/s with several in flight, wall time of one flow, and
// the CPU per task of client and server. A line whose executors did not run is
// left out.
func flowsDurableConclusion(rp bench.Report) []string {
	ax, okA := rp.Result("ax-mariadb-ack")
	rv, okR := rp.Result("river-pg")
	if !okA || !okR {
		return nil
	}
	var lines []string
	if a, r, ok := medians(ax, rv, "flows_per_sec"); ok {
		lines = append(lines, fmt.Sprintf("flows/s, 4 in flight: ax %s, river %s (%s).", num(a), num(r), times(r, a)))
	}
	if a, r, ok := medians(ax, rv, "flow_wall_p50_us"); ok {
		lines = append(lines, fmt.Sprintf("one flow: ax %s, river %s (%s).", micros(a), micros(r), times(r, a)))
	}
	for _, who := range []string{"client", "server"} {
		if a, r, ok := medians(ax, rv, who+"_cpu_us_per_task"); ok {
			lines = append(lines, fmt.Sprintf("%s CPU per task: ax %s, river %s (%s).", who, micros(a), micros(r), times(r, a)))
		}
	}
	return lines
}

// medians returns metric's median in a and in b, if both have it.
func medians(a, b bench.Result, metric string) (float64, float64, bool) {
	sa, okA := a.Metrics[metric]
	sb, okB := b.Metrics[metric]
	return sa.Median, sb.Median, okA && okB && sa.Median > 0 && sb.Median > 0
}
