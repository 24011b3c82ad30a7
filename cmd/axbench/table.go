package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"github.com/axsched/ax/bench"
)

// writeTables prints the machine line once, then each report's parameters and
// table: median [min–max] per metric, and the headline as a ratio to the best
// peer (the best executor whose name does not start with "ax") and to the
// scenario's baseline (chanpool unless its view names another).
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

func writeTable(w io.Writer, rp bench.Report) error {
	v := viewOf(rp)
	_, _ = fmt.Fprintf(w, "\n== %s: %s\n", rp.Scenario, rp.Doc)
	_, _ = fmt.Fprintf(w, "params: %s; %d rep(s) each in a fresh process, median [min–max]\n", paramLine(rp.Params), rp.Reps)

	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	head := table.Row{"executor", "mode"}
	for _, c := range v.columns {
		head = append(head, c.title)
	}
	best, bestName := bestPeer(rp, v)
	if bestName != "" {
		head = append(head, "÷ "+bestName)
	}
	baseName := v.baselineName()
	pool, hasPool := rp.Result(baseName)
	poolStat, hasPool := pool.Metrics[v.headline], hasPool && v.headline != ""
	if hasPool {
		head = append(head, "÷ "+baseName)
	}
	t.AppendHeader(head)
	align := []table.ColumnConfig{}
	for i := 3; i <= len(head); i++ {
		align = append(align, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	t.SetColumnConfigs(align)
	for _, r := range rp.Results {
		row := table.Row{r.Executor, r.Mode}
		for _, c := range v.columns {
			row = append(row, cell(r.Metrics, c.metric))
		}
		if bestName != "" {
			if s, ok := r.Metrics[v.headline]; ok && best != 0 {
				row = append(row, fmt.Sprintf("×%.2f", s.Median/best))
			} else {
				row = append(row, "–")
			}
		}
		if hasPool {
			if s, ok := r.Metrics[v.headline]; ok && poolStat.Median != 0 {
				row = append(row, fmt.Sprintf("×%.2f", s.Median/poolStat.Median))
			} else {
				row = append(row, "–")
			}
		}
		t.AppendRow(row)
	}
	t.Render()
	if v.legend != "" {
		_, _ = fmt.Fprintf(w, "  %s\n", v.legend)
	}
	if bestName != "" {
		_, _ = fmt.Fprintf(w, "  ratios: %s ÷ that of the best peer (%s)", v.headlineTitle(), bestName)
		if hasPool {
			_, _ = fmt.Fprint(w, " and of "+baseName)
		}
		_, _ = fmt.Fprintln(w)
	}
	writeNotes(w, rp)
	for _, r := range rp.Results {
		for _, e := range r.Errors {
			_, _ = fmt.Fprintf(w, "  error: %s: %s\n", r.Executor, e)
		}
	}
	return nil
}

// writeNotes prints each distinct note once, with the executors it concerns.
func writeNotes(w io.Writer, rp bench.Report) {
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
	for _, n := range notes {
		_, _ = fmt.Fprintf(w, "  note (%s): %s\n", strings.Join(who[n], ", "), n)
	}
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

// isPeer reports whether an executor is a peer of ax: a pool people use instead
// (ants, pond, conc, workerpool, errgroup, semaphore), not ax itself nor the
// references: `go`, which bounds nothing, and the hand-written chanpool and
// priopool.
func isPeer(name string) bool {
	return !strings.HasPrefix(name, "ax") && name != "go" &&
		!strings.HasPrefix(name, "chanpool") && !strings.HasPrefix(name, "priopool")
}

// bestPeer returns the best headline median among the peers and its executor.
func bestPeer(rp bench.Report, v view) (float64, string) {
	if v.headline == "" {
		return 0, ""
	}
	best, name := 0.0, ""
	for _, r := range rp.Results {
		s, ok := r.Metrics[v.headline]
		if !ok || !isPeer(r.Executor) {
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
