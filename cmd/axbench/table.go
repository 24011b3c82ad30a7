package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"github.com/axsched/ax/bench"
)

// writeTables prints the machine line once, then each report's parameters and
// table: median [min–max] per metric, and the headline as a ratio to the best
// peer (the best third-party pool that ran every task) and to the scenario's
// baseline (chanpool unless its view names another). A compact view prints
// medians with units instead, and its conclusion.
func writeTables(w io.Writer, reports []bench.Report) error {
	if len(reports) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "machine: %s\n", reports[0].Machine); err != nil {
		return err
	}
	for _, rp := range reports {
		if err := writeTable(w, rp); err != nil {
			return err
		}
	}
	return nil
}

// textWidth is the width the prose lines of the tables wrap at.
const textWidth = 100

func writeTable(w io.Writer, rp bench.Report) error {
	v := viewOf(rp)
	writeWrapped(w, "", fmt.Sprintf("== %s: %s", rp.Scenario, rp.Doc))
	how := "median [min–max]"
	if v.compact {
		how = "medians"
	}
	writeWrapped(w, "", fmt.Sprintf("params: %s; %d rep(s) each in a fresh process, %s", paramLine(rp.Params), rp.Reps, how))

	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	head := table.Row{"executor"}
	if !v.compact {
		head = append(head, "mode")
	}
	for _, c := range v.columns {
		head = append(head, c.title)
	}
	best, bestName := bestPeer(rp, v)
	if v.compact {
		bestName = ""
	}
	if bestName != "" {
		head = append(head, "÷ "+bestName)
	}
	baseName := v.baselineName()
	pool, hasPool := rp.Result(baseName)
	poolStat, hasPool := pool.Metrics[v.headline], hasPool && v.headline != "" && !v.compact
	if hasPool {
		head = append(head, "÷ "+baseName)
	}
	t.AppendHeader(head)
	align := []table.ColumnConfig{}
	for i := len(head) - len(v.columns) - btoi(bestName != "") - btoi(hasPool) + 1; i <= len(head); i++ {
		align = append(align, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	t.SetColumnConfigs(align)
	for _, r := range rp.Results {
		row := table.Row{r.Executor}
		if !v.compact {
			row = append(row, r.Mode)
		}
		for _, c := range v.columns {
			if v.compact {
				row = append(row, compactCell(r.Metrics, c.metric))
			} else {
				row = append(row, cell(r.Metrics, c.metric))
			}
		}
		if bestName != "" {
			row = append(row, ratioCell(r.Metrics, v.headline, best))
		}
		if hasPool {
			row = append(row, ratioCell(r.Metrics, v.headline, poolStat.Median))
		}
		t.AppendRow(row)
	}
	t.Render()
	if v.legend != "" {
		writeWrapped(w, "  ", v.legend)
	}
	if bestName != "" {
		line := fmt.Sprintf("ratios: %s ÷ that of the best peer that ran every task (%s)", v.headlineTitle(), bestName)
		if hasPool {
			line += " and of " + baseName
		}
		writeWrapped(w, "  ", line)
	}
	if left := refusingPeers(rp, v); left != "" {
		writeWrapped(w, "  ", "left out of every comparison, having refused or lost tasks: "+left)
	}
	writeNotes(w, rp)
	for _, r := range rp.Results {
		for _, e := range r.Errors {
			writeWrapped(w, "  ", fmt.Sprintf("error: %s: %s", r.Executor, e))
		}
	}
	if v.conclude != nil {
		for _, l := range v.conclude(rp) {
			writeWrapped(w, "", l)
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ratioCell formats the headline of m divided by base, or "–".
func ratioCell(m map[string]bench.Stat, headline string, base float64) string {
	s, ok := m[headline]
	if !ok || base == 0 {
		return "–"
	}
	return "×" + ratioNum(s.Median/base)
}

// ratioNum formats a ratio with two decimals, or two significant digits
// under 0.1 (0.0047).
func ratioNum(r float64) string {
	if r != 0 && math.Abs(r) < 0.1 {
		return strconv.FormatFloat(r, 'g', 2, 64)
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

// writeWrapped writes s wrapped at textWidth runes, every line after the
// first indented two more than indent.
func writeWrapped(w io.Writer, indent, s string) {
	for _, l := range wrap(s, textWidth, indent) {
		_, _ = fmt.Fprintln(w, l)
	}
}

// wrap breaks s at spaces into lines of at most width runes (a longer word
// stays whole), the first prefixed with indent, the others with indent and
// two spaces.
func wrap(s string, width int, indent string) []string {
	var lines []string
	line := indent
	n := utf8.RuneCountInString(line)
	fresh := true
	for _, word := range strings.Fields(s) {
		wn := utf8.RuneCountInString(word)
		if !fresh && n+1+wn > width {
			lines = append(lines, line)
			line, n, fresh = indent+"  ", utf8.RuneCountInString(indent)+2, true
		}
		if !fresh {
			line += " "
			n++
		}
		line += word
		n += wn
		fresh = false
	}
	return append(lines, line)
}

// writeNotes prints each distinct note once, with the executors it concerns.
func writeNotes(w io.Writer, rp bench.Report) {
	for _, n := range noteLines(rp) {
		writeWrapped(w, "  ", n)
	}
}

// noteLines returns each distinct note of a report once, as "note (EXECUTORS): NOTE".
func noteLines(rp bench.Report) []string {
	var notes []string
	who := map[string][]string{}
	for _, r := range rp.Results {
		for _, n := range r.Notes {
			if _, ok := who[n]; !ok {
				notes = append(notes, n)
			}
			who[n] = append(who[n], r.Executor)
		}
	}
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = fmt.Sprintf("note (%s): %s", strings.Join(who[n], ", "), n)
	}
	return out
}

// baselineName returns the executor the headline is divided by besides the best peer.
func (v view) baselineName() string {
	if v.baseline != "" {
		return v.baseline
	}
	return "chanpool"
}

func (v view) headlineTitle() string {
	for _, c := range v.columns {
		if c.metric == v.headline {
			return c.title
		}
	}
	return v.headline
}

// viewOf returns the scenario's view, or one showing every metric.
func viewOf(rp bench.Report) view {
	if v, ok := views[rp.Scenario]; ok {
		return v
	}
	var names []string
	for _, r := range rp.Results {
		for n := range r.Metrics {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	v := view{}
	for _, n := range names {
		v.columns = append(v.columns, column{n, n})
	}
	return v
}

// ranAll reports whether r ran every task it was given: no repetition
// failed, refused a task or lost one. Only such executors are compared by
// ratio: a refused task's wait is not counted, which flatters a refuser.
func ranAll(r bench.Result) bool {
	return len(r.Errors) == 0 && r.Metrics["rejected"].Max == 0 && r.Metrics["lost"].Max == 0
}

// refusingPeers lists the peers left out of the ratios for not running every
// task, each with its refusals and losses, or returns "".
func refusingPeers(rp bench.Report, v view) string {
	if v.headline == "" {
		return ""
	}
	var out []string
	for _, r := range rp.Results {
		if _, ok := r.Metrics[v.headline]; !ok || !isPeer(r.Executor) || ranAll(r) {
			continue
		}
		var what []string
		if n := r.Metrics["rejected"].Max; n > 0 {
			what = append(what, "refused "+num(r.Metrics["rejected"].Median))
		}
		if n := r.Metrics["lost"].Max; n > 0 {
			what = append(what, "lost "+num(r.Metrics["lost"].Median))
		}
		if len(r.Errors) > 0 {
			what = append(what, fmt.Sprintf("%d failed rep(s)", len(r.Errors)))
		}
		out = append(out, r.Executor+" ("+strings.Join(what, ", ")+")")
	}
	return strings.Join(out, "; ")
}

// isPeer reports whether an executor is a peer of ax: a pool people use instead
// (ants, pond, conc, workerpool, errgroup, semaphore), not ax itself nor the
// references: `go`, which bounds nothing, and the hand-written chanpool and
// priopool.
func isPeer(name string) bool {
	return !strings.HasPrefix(name, "ax") && name != "go" &&
		!strings.HasPrefix(name, "chanpool") && !strings.HasPrefix(name, "priopool")
}

// bestPeer returns the best headline median among the peers that ran every
// task (ranAll) and its executor.
func bestPeer(rp bench.Report, v view) (float64, string) {
	if v.headline == "" {
		return 0, ""
	}
	best, name := 0.0, ""
	for _, r := range rp.Results {
		s, ok := r.Metrics[v.headline]
		if !ok || !isPeer(r.Executor) || !ranAll(r) {
			continue
		}
		if name == "" || (v.higher && s.Median > best) || (!v.higher && s.Median < best) {
			best, name = s.Median, r.Executor
		}
	}
	return best, name
}

// cell formats a metric as "median [min–max]", or "–" when absent.
func cell(m map[string]bench.Stat, name string) string {
	s, ok := m[name]
	if !ok {
		return "–"
	}
	if s.Min == s.Max {
		return num(s.Median)
	}
	return num(s.Median) + " [" + num(s.Min) + "–" + num(s.Max) + "]"
}

// compactCell formats a metric's median with its unit: a wait in µs as a
// duration, a share as a percentage, anything else as num does; "–" when
// absent.
func compactCell(m map[string]bench.Stat, name string) string {
	s, ok := m[name]
	if !ok {
		return "–"
	}
	switch {
	case isMicros(name):
		return micros(s.Median)
	case isShare(name):
		return percent(s.Median)
	}
	return num(s.Median)
}

// isMicros reports whether a metric is a time in microseconds.
func isMicros(name string) bool {
	return strings.HasSuffix(name, "_us") || strings.Contains(name, "_us_")
}

// isShare reports whether a metric is a fraction of the starts.
func isShare(name string) bool {
	return strings.HasPrefix(name, "share_") && !strings.HasPrefix(name, "share_error")
}

// micros formats a duration given in µs with three significant digits and a
// unit: 850µs, 15.9ms, 1.50s.
func micros(us float64) string {
	switch a := math.Abs(us); {
	case a >= 1e6:
		return sig3(us/1e6) + "s"
	case a >= 1e3:
		return sig3(us/1e3) + "ms"
	case a == 0:
		return "0"
	default:
		return sig3(us) + "µs"
	}
}

// percent formats a fraction as a percentage with one decimal: 4.8%.
func percent(f float64) string {
	if f == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}

// sig3 formats v (at least 1 and under 1000 in magnitude, or any other) with
// three significant digits.
func sig3(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// num formats v with about three significant digits and a k/M suffix.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e4:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// paramLine prints the parameters that matter.
func paramLine(p bench.Params) string {
	parts := []string{"n " + strconv.Itoa(p.N), "conc " + strconv.Itoa(p.Conc), "queue " + strconv.Itoa(p.Queue)}
	if p.Rate > 0 {
		parts = append(parts, "rate "+num(p.Rate)+"/s")
	}
	if p.Work > 0 {
		parts = append(parts, "work "+p.Work.String())
	}
	if p.Duration > 0 {
		parts = append(parts, "duration "+p.Duration.String())
	}
	if p.Scale != 1 {
		parts = append(parts, "scale "+strconv.FormatFloat(p.Scale, 'g', -1, 64))
	}
	return strings.Join(parts, ", ")
}
