package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// floodReport is part 1's text: a title, a row per pool, and a takeaway
// computed from the rows (ax's first, the strict-priority pool's second, the
// FIFO pool's last).
func floodReport(o options, rows []floodRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "1. Priorities: Low floods %d slots 3× over; High and Normal ask 60 %% and 50 %% of them\n", floodConc)
	fmt.Fprintf(&b, "   tasks of %v–%v, %v per pool; waits from submit to start\n", floodWork/2, floodWork*3/2, o.flood)
	t := table{{"", "High p50", "High p99", "Normal p50", "Normal p99", "Low p99", "Low's share", "done/s"}}
	for _, r := range rows {
		m := r.m
		t = append(t, []string{
			r.label, micros(m["wait_p50_us_high"]), micros(m["wait_p99_us_high"]),
			micros(m["wait_p50_us_normal"]), micros(m["wait_p99_us_normal"]), micros(m["wait_p99_us_low"]),
			fmt.Sprintf("%.1f %%", 100*m["share_low"]), fmt.Sprintf("%.0f", m["completions_per_sec"]),
		})
	}
	t.render(&b, "   ")
	ax, prio, fifo := rows[0].m, rows[1].m, rows[len(rows)-1].m
	fmt.Fprintf(&b, "   → High p99 %s under ax (strict: %s), %s than FIFO; Low kept %.1f %% (strict: %.1f %%).\n",
		micros(ax["wait_p99_us_high"]), micros(prio["wait_p99_us_high"]),
		compare(ax["wait_p99_us_high"], fifo["wait_p99_us_high"]), 100*ax["share_low"], 100*prio["share_low"])
	return b.String()
}

// callsReport is part 2's text: a title, a row per pool, and a takeaway
// computed from the rows (ax's first, the plain pool's second).
func callsReport(o options, rows []callRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "2. A slow, failing upstream: %d calls on %d keys, %s %.0f %% of them, %s down\n",
		o.calls, numKeys, keyName(hotKey), 100*hotShare, keyName(downKey))
	fmt.Fprintf(&b, "   %v–%v, %.0f %% fail, %.0f %% hang (dropped after %v), 503 past %d calls a key\n",
		callMin, callMax, 100*callFail, 100*callHang, o.hang, keyCapacity)
	fmt.Fprintf(&b, "   ax: %v timeout, %d attempts with backoff, retry budget %.0f %%, %d per key\n",
		callTimeout, callAttempts, 100*budgetRatio, keyLimit)
	fmt.Fprintf(&b, "   plain pool: %d attempts in a row, no timeout, no limit; %d workers each\n", callAttempts, callWorkers)
	t := table{{"", "ok", "failed", "timed out", "retries", "calls", "503s", "max/key", "hung", "longest", "wall"}}
	itoa := strconv.Itoa
	for _, r := range rows {
		u := r.upstream
		t = append(t, []string{
			r.label, itoa(r.ok), itoa(r.failed), itoa(r.timedOut), itoa(r.retries), itoa(u.calls),
			itoa(u.refused), itoa(u.peak), itoa(u.hangs), seconds(u.longest), seconds(r.wall),
		})
	}
	t.render(&b, "   ")
	ax, plain := rows[0], rows[1]
	fmt.Fprintf(&b, "   → %d ok under ax, %s; at most %d calls a key (plain: %d, %d 503s);\n",
		ax.ok, diff(ax.ok, plain.ok), ax.upstream.peak, plain.upstream.peak, plain.upstream.refused)
	fmt.Fprintf(&b, "     a call held a worker %s at most (plain: %s); the retry budget ended %d early.\n",
		seconds(ax.upstream.longest), seconds(plain.upstream.longest), ax.cutShort)
	return b.String()
}

// diff says how ax's count compares with the plain pool's.
func diff(ax, plain int) string {
	switch {
	case ax > plain:
		return fmt.Sprintf("%d more than the plain pool", ax-plain)
	case ax < plain:
		return fmt.Sprintf("%d fewer than the plain pool", plain-ax)
	default:
		return "as many as the plain pool"
	}
}

// table is a small table of text cells, a header row first.
type table [][]string

// render writes t to b, each line after indent: the first column aligned to
// the left, the others to the right, two spaces apart.
func (t table) render(b *strings.Builder, indent string) {
	var widths []int
	for _, row := range t {
		for i, c := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range t {
		b.WriteString(indent)
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteByte('\n')
	}
}

// micros formats a duration in microseconds with about three digits.
func micros(us float64) string {
	switch {
	case us < 1_000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.1fms", us/1e3)
	case us < 1_000_000:
		return fmt.Sprintf("%.0fms", us/1e3)
	default:
		return fmt.Sprintf("%.2fs", us/1e6)
	}
}

// seconds formats d in seconds, two decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// compare says how a compares with b: "95× less" when a is lower, "1.5× more"
// when higher, "as much" when equal.
func compare(a, b float64) string {
	switch {
	case a <= 0 || b <= 0:
		return "no ratio"
	case a == b:
		return "as much"
	case a < b:
		return ratio(b/a) + " less"
	default:
		return ratio(a/b) + " more"
	}
}

// ratio formats r >= 1 with two significant digits (1.5×, 95×, 1200×).
func ratio(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.0f×", r)
}
