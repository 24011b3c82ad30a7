package main

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/axsched/ax/bench"
)

// Chart sizes, and the width of the column right of a line chart that holds
// its legend.
const (
	barW         = 7 * vg.Inch
	barRowH      = 0.24 * vg.Inch // per executor
	barPadH      = 1.1 * vg.Inch  // title and axis
	lineW, lineH = 7 * vg.Inch, 3.4 * vg.Inch
	legendW      = 1.35 * vg.Inch
)

// Chart colours: ax stands out in orange (its variants, such as ax-nb, in a
// lighter orange), the others are a muted blue.
var (
	axColor        = color.RGBA{R: 0xe6, G: 0x6a, B: 0x00, A: 0xff}
	axVariantColor = color.RGBA{R: 0xf5, G: 0xa6, B: 0x5b, A: 0xff}
	otherColor     = color.RGBA{R: 0x7a, G: 0x93, B: 0xb0, A: 0xff}
)

// writeHTML writes one self-contained page: for each scenario its table (ax's
// rows marked), its legend, notes and conclusion, bar charts of its headline
// metrics (median with a min–max whisker per executor, ax in orange) and line
// charts of its series over time, one line per executor. Each chart's caption
// says whether lower or higher is better; waits are drawn on a log scale.
// Charts are inline SVG; the page loads nothing.
func writeHTML(w io.Writer, reports []bench.Report) error {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	page := htmlPage{}
	if len(reports) > 0 {
		page.Machine = reports[0].Machine.String()
		page.Date = reports[0].Machine.Date
	}
	for _, rp := range reports {
		sec, err := section(rp)
		if err != nil {
			return fmt.Errorf("axbench: html: %s: %w", rp.Scenario, err)
		}
		page.Sections = append(page.Sections, sec)
	}
	return pageTmpl.Execute(w, page)
}

type htmlPage struct {
	Machine, Date string
	Sections      []htmlSection
}

type htmlSection struct {
	Scenario, Doc, Params string
	Head                  []string
	Rows                  []htmlRow
	Legend                string
	Notes                 []string
	Conclusion            []string
	Charts                []htmlChart
}

type htmlRow struct {
	Ax    bool // the row is one of ax's executors
	Cells []htmlCell
}

// htmlCell is a table cell: the median, and the min–max range when the
// repetitions differ.
type htmlCell struct {
	Text, Range string
	Num         bool // right-aligned
}

type htmlChart struct {
	Metric  string
	Log     bool // the value axis is logarithmic
	SVG     template.HTML
	Caption string
}

func section(rp bench.Report) (htmlSection, error) {
	v := viewOf(rp)
	sec := htmlSection{Scenario: rp.Scenario, Doc: rp.Doc, Params: paramLine(rp.Params), Legend: v.legend}
	sec.Head, sec.Rows = htmlTable(rp, v)
	if line := ratioLine(rp, v); line != "" {
		sec.Notes = append(sec.Notes, line)
	}
	if left := refusingPeers(rp, v); left != "" {
		sec.Notes = append(sec.Notes, "Left out of every comparison, having refused or lost tasks: "+left+".")
	}
	sec.Notes = append(sec.Notes, noteLines(rp)...)
	for _, r := range rp.Results {
		for _, e := range r.Errors {
			sec.Notes = append(sec.Notes, fmt.Sprintf("error: %s: %s", r.Executor, e))
		}
	}
	if v.conclude != nil {
		sec.Conclusion = v.conclude(rp)
	}
	for _, m := range v.bars {
		ch, ok, err := barChart(rp, m, v)
		if err != nil {
			return sec, err
		}
		if ok {
			sec.Charts = append(sec.Charts, ch)
		}
	}
	for _, name := range seriesNames(rp) {
		ch, err := lineChart(rp, name)
		if err != nil {
			return sec, err
		}
		sec.Charts = append(sec.Charts, ch)
	}
	return sec, nil
}

// htmlTable returns the heading and rows of a scenario's table: the columns
// of the text table, with the ratios to the best peer and the baseline.
func htmlTable(rp bench.Report, v view) ([]string, []htmlRow) {
	head := []string{"executor", "mode"}
	for _, c := range v.columns {
		head = append(head, htmlTitle(c))
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
	var rows []htmlRow
	for _, r := range rp.Results {
		row := htmlRow{Ax: isAx(r.Executor), Cells: []htmlCell{{Text: r.Executor}, {Text: r.Mode}}}
		for _, c := range v.columns {
			row.Cells = append(row.Cells, htmlStat(r.Metrics, c.metric))
		}
		if bestName != "" {
			row.Cells = append(row.Cells, htmlCell{Text: ratioCell(r.Metrics, v.headline, best), Num: true})
		}
		if hasPool {
			row.Cells = append(row.Cells, htmlCell{Text: ratioCell(r.Metrics, v.headline, poolStat.Median), Num: true})
		}
		rows = append(rows, row)
	}
	return head, rows
}

// htmlTitle is a column's heading without the " µs" its cells no longer need
// ("p99 µs" → "p99", "CPU µs/task" → "CPU/task").
func htmlTitle(c column) string {
	if isMicros(c.metric) {
		return strings.Replace(strings.TrimSuffix(c.title, " µs"), " µs/", "/", 1)
	}
	return c.title
}

// htmlStat formats a metric like the compact tables (units in the cell),
// with its range apart.
func htmlStat(m map[string]bench.Stat, name string) htmlCell {
	s, ok := m[name]
	if !ok {
		return htmlCell{Text: "–", Num: true}
	}
	f := func(x float64) string { return compactCell(map[string]bench.Stat{name: {Median: x}}, name) }
	c := htmlCell{Text: f(s.Median), Num: true}
	if s.Min != s.Max {
		c.Range = f(s.Min) + "–" + f(s.Max)
	}
	return c
}

// ratioLine explains the ratio columns, or returns "".
func ratioLine(rp bench.Report, v view) string {
	_, bestName := bestPeer(rp, v)
	if bestName == "" {
		return ""
	}
	line := fmt.Sprintf("Ratios: %s ÷ that of the best peer that ran every task (%s)", v.headlineTitle(), bestName)
	if _, ok := rp.Result(v.baselineName()); ok {
		line += " and of " + v.baselineName()
	}
	return line + "."
}

// isAx reports whether an executor is one of ax's.
func isAx(name string) bool { return strings.HasPrefix(name, "ax") }

// isLatency reports whether a metric is a wait or a delay, drawn on a log scale.
func isLatency(name string) bool {
	return (isMicros(name) && !isCPU(name)) || strings.HasSuffix(name, "_ms") || strings.Contains(name, "_ms_")
}

// isCPU reports whether a metric is a CPU time (per task), not a wait.
func isCPU(name string) bool { return strings.Contains(name, "_cpu_") }

// better returns "higher is better" or "lower is better" for a metric of v.
func better(metric string, v view) string {
	higher := false
	switch {
	case metric == v.headline:
		higher = v.higher
	case strings.Contains(metric, "per_sec") && !strings.HasPrefix(metric, "attempts"):
		higher = true
	case metric == "efficiency" || strings.HasPrefix(metric, "rows_per_commit"):
		higher = true
	}
	if higher {
		return "higher is better"
	}
	return "lower is better"
}

// whiskers are bars' min–max ranges for plotter.XErrorBars.
type whiskers struct {
	xys  plotter.XYs
	errs plotter.XErrors
}

func (w whiskers) Len() int                        { return len(w.xys) }
func (w whiskers) XY(i int) (float64, float64)     { return w.xys[i].X, w.xys[i].Y }
func (w whiskers) XError(i int) (float64, float64) { return w.errs[i].Low, w.errs[i].High }

// barChart draws one horizontal bar per executor with metric, the first
// executor at the top, ax's bars in orange, each labelled with its value. It
// returns false when no executor has the metric.
func barChart(rp bench.Report, metric string, v view) (htmlChart, bool, error) {
	type bar struct {
		name string
		s    bench.Stat
	}
	var bars []bar
	for _, r := range rp.Results {
		if s, ok := r.Metrics[metric]; ok {
			bars = append(bars, bar{r.Executor, s})
		}
	}
	if len(bars) == 0 {
		return htmlChart{}, false, nil
	}
	slices.Reverse(bars) // gonum puts the first category at the bottom
	logScale := isLatency(metric)
	ch := htmlChart{Metric: metric, Log: logScale}
	title := titleOf(v, metric)
	dir := better(metric, v)
	p := plot.New()
	p.Title.Text = rp.Scenario + ": " + title + " (" + dir + ")"
	names := make([]string, len(bars))
	var wk whiskers
	var lbl plotter.XYLabels
	lo, hi := math.Inf(1), 0.0
	for i, b := range bars {
		names[i] = b.name
		bc, err := plotter.NewBarChart(plotter.Values{b.s.Median}, vg.Points(11))
		if err != nil {
			return ch, false, err
		}
		bc.Horizontal = true
		bc.XMin = float64(i)
		bc.LineStyle.Width = 0
		bc.Color = otherColor
		switch {
		case b.name == "ax":
			bc.Color = axColor
		case isAx(b.name): // its variants, lighter
			bc.Color = axVariantColor
		}
		p.Add(bc)
		wk.xys = append(wk.xys, plotter.XY{X: b.s.Median, Y: float64(i)})
		wk.errs = append(wk.errs, struct{ Low, High float64 }{b.s.Median - b.s.Min, b.s.Max - b.s.Median})
		lbl.XYs = append(lbl.XYs, plotter.XY{X: b.s.Max, Y: float64(i)})
		lbl.Labels = append(lbl.Labels, compactCell(map[string]bench.Stat{metric: b.s}, metric))
		if b.s.Min > 0 {
			lo = min(lo, b.s.Min)
		}
		hi = max(hi, b.s.Max)
	}
	if rp.Reps > 1 {
		eb, err := plotter.NewXErrorBars(wk)
		if err != nil {
			return ch, false, err
		}
		p.Add(eb)
	}
	labels, err := plotter.NewLabels(lbl)
	if err != nil {
		return ch, false, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].YAlign = draw.YCenter
		labels.TextStyle[i].Font = plot.DefaultFont
		labels.TextStyle[i].Font.Size = vg.Points(8)
	}
	labels.Offset = vg.Point{X: vg.Points(4)}
	p.Add(labels)
	p.NominalY(names...)
	p.X.Label.Text = title
	if logScale {
		if math.IsInf(lo, 1) {
			lo = 1
		}
		p.X.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
		p.X.Max = math.Max(hi, p.X.Min) * 4 // room for the value labels
		p.X.Scale = floorLog{}
		p.X.Tick.Marker = logTicks{micros: isMicros(metric)}
		p.X.Label.Text += " (log scale)"
	} else {
		p.X.Min = 0
		p.X.Max = math.Max(hi, 1e-9) * 1.25
		p.X.Tick.Marker = humanTicks{}
	}
	p.Add(plotter.NewGrid())
	h := barPadH + barRowH*vg.Length(len(bars))
	ch.SVG, err = render(p, nil, barW, h)
	ch.Caption = fmt.Sprintf("%s: %s. ax in orange.", title, dir)
	if logScale {
		ch.Caption += " Log scale."
	}
	return ch, true, err
}

// titleOf returns the heading of metric's column (without " µs"), or the metric's name.
func titleOf(v view, metric string) string {
	for _, c := range v.columns {
		if c.metric == metric {
			return htmlTitle(c)
		}
	}
	return metric
}

// seriesNames lists the series of a report worth a chart, in first-seen
// order: those with a value other than zero that some executor other than
// ax's has too (or every executor is ax's), so that there is a comparison.
func seriesNames(rp bench.Report) []string {
	var names []string
	nonZero, peer := map[string]bool{}, map[string]bool{}
	allAx := true
	for _, r := range rp.Results {
		allAx = allAx && isAx(r.Executor)
		for _, s := range r.Series {
			if len(s.T) == 0 {
				continue
			}
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
			nonZero[s.Name] = nonZero[s.Name] || slices.ContainsFunc(s.V, func(v float64) bool { return v != 0 })
			peer[s.Name] = peer[s.Name] || !isAx(r.Executor)
		}
	}
	keep := func(n string) bool { return nonZero[n] && (peer[n] || allAx) }
	return slices.DeleteFunc(names, func(n string) bool { return !keep(n) })
}

// lineChart draws one series over time, one line per executor (ax's thick
// and orange), with the legend beside the plot.
func lineChart(rp bench.Report, name string) (htmlChart, error) {
	logScale := isLatency(name)
	ch := htmlChart{Metric: name, Log: logScale}
	p := plot.New()
	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	lg.TextStyle.Font.Size = vg.Points(7.5)
	lg.ThumbnailWidth = vg.Points(18)
	unit := ""
	lo := math.Inf(1)
	k := 0
	for _, r := range rp.Results {
		for _, s := range r.Series {
			if s.Name != name || len(s.T) == 0 {
				continue
			}
			unit = s.Unit
			xys := make(plotter.XYs, len(s.T))
			for j := range s.T {
				xys[j] = plotter.XY{X: s.T[j], Y: s.V[j]}
				if s.V[j] > 0 {
					lo = min(lo, s.V[j])
				}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return ch, err
			}
			if isAx(r.Executor) {
				l.Color = axColor
				l.Width = vg.Points(2.5)
				if r.Executor != "ax" { // its variants, dashed
					l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
				}
			} else {
				l.Color = plotutil.Color(k)
				l.Dashes = plotutil.Dashes(k / len(plotutil.DefaultColors))
				k++
			}
			p.Add(l)
			lg.Add(r.Executor, l)
		}
	}
	dir := "lower is better"
	if name == "attempts_per_sec" {
		dir = "lower is better during the outage"
	}
	p.Title.Text = rp.Scenario + ": " + seriesTitle(name) + " over time (" + dir + ")"
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = unit
	if logScale {
		if math.IsInf(lo, 1) {
			lo = 1
		}
		p.Y.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
		p.Y.Scale = floorLog{}
		p.Y.Tick.Marker = logTicks{micros: unit == "µs"}
		p.Y.Label.Text = "log scale"
	} else {
		p.Y.Min = 0
		p.Y.Tick.Marker = humanTicks{}
	}
	p.Add(plotter.NewGrid())
	var err error
	ch.SVG, err = render(p, &lg, lineW, lineH)
	ch.Caption = fmt.Sprintf("%s over time: %s. ax in orange.", seriesTitle(name), dir)
	if logScale {
		ch.Caption += " Log scale."
	}
	return ch, err
}

// seriesTitle names a series for a chart's title.
func seriesTitle(name string) string {
	if pr, ok := strings.CutPrefix(name, "wait_p99_us_"); ok {
		return pr + "-priority p99 wait"
	}
	return strings.ReplaceAll(strings.TrimSuffix(name, "_per_sec")+map[bool]string{true: " per second"}[strings.HasSuffix(name, "_per_sec")], "_", " ")
}

// floorLog is a log scale on which values at or below the axis minimum
// (bars starting at 0, empty windows) sit on the axis.
type floorLog struct{}

func (floorLog) Normalize(lo, hi, x float64) float64 {
	x = max(x, lo)
	return (math.Log(x) - math.Log(lo)) / (math.Log(hi) - math.Log(lo))
}

// logTicks label the powers of ten of a log axis, as durations when the
// values are microseconds, with unlabelled ticks between.
type logTicks struct{ micros bool }

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.LogTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		if t.micros {
			ts[i].Label = micros(ts[i].Value)
		} else {
			ts[i].Label = num(ts[i].Value)
		}
	}
	return ts
}

// humanTicks are the default ticks labelled like the tables (12.5k, 1.20M).
type humanTicks struct{}

func (humanTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = num(ts[i].Value)
		}
	}
	return ts
}

// render draws p, and lg (if not nil) in a column to its right, to an SVG
// fragment (without the XML prolog) for inlining.
func render(p *plot.Plot, lg *plot.Legend, w, h vg.Length) (template.HTML, error) {
	total := w
	if lg != nil {
		total += legendW
	}
	c := vgsvg.NewWith(vgsvg.UseWH(total, h))
	dc := draw.New(c)
	if lg != nil {
		p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
		lg.Draw(draw.Crop(dc, w+vg.Points(6), 0, 0, -vg.Points(28)))
	} else {
		p.Draw(dc)
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return template.HTML(s), nil //nolint:gosec // SVG drawn by gonum/plot from our own figures, not user input
}

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>axbench report</title>
<style>
body { font-family: "Liberation Sans", Arial, sans-serif; margin: 2em auto; max-width: 100em; padding: 0 1em; color: #222; }
section { margin-bottom: 3em; border-top: 1px solid #ccc; }
.meta { color: #555; }
.scroll { overflow-x: auto; }
table.results { border-collapse: collapse; font-size: 12px; margin: .8em 0; }
table.results th, table.results td { border-bottom: 1px solid #e3e3e3; padding: .25em .35em; vertical-align: top; }
table.results th { background: #f2f2f2; text-align: right; font-weight: 600; }
table.results th:first-child, table.results th:nth-child(2) { text-align: left; }
table.results td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.results td .range { display: block; color: #888; font-size: 10px; }
table.results tr.ax td { background: #fff1e0; font-weight: 700; }
table.results tr.ax td:first-child { border-left: 4px solid #e66a00; }
.legend, .notes { font-size: 13px; color: #444; }
.notes li { margin: .2em 0; }
.conclusion { background: #f4f8f4; border-left: 4px solid #4a8a4a; padding: .5em 1em; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(38em, 1fr)); gap: 1.2em; }
figure.chart { margin: 0; }
figure.chart svg { display: block; max-width: 100%; height: auto; }
figure.chart figcaption { font-size: 13px; color: #444; margin-top: .2em; }
</style></head>
<body>
<h1>axbench report</h1>
<p class="meta">Machine: {{.Machine}}<br>Started: {{.Date}}</p>
{{range .Sections}}<section id="{{.Scenario}}">
<h2>{{.Scenario}}</h2>
<p>{{.Doc}}</p>
<p class="meta">{{.Params}}</p>
<div class="scroll"><table class="results" data-scenario="{{.Scenario}}">
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr{{if .Ax}} class="ax"{{end}}>{{range .Cells}}<td{{if .Num}} class="num"{{end}}>{{.Text}}{{if .Range}}<span class="range">{{.Range}}</span>{{end}}</td>{{end}}</tr>
{{end}}</tbody></table></div>
{{if .Legend}}<p class="legend">{{.Legend}}</p>{{end}}
{{if .Conclusion}}<div class="conclusion">{{range .Conclusion}}<p>{{.}}</p>{{end}}</div>{{end}}
{{if .Notes}}<ul class="notes">{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
<div class="charts">{{range .Charts}}<figure class="chart" data-metric="{{.Metric}}" data-scale="{{if .Log}}log{{else}}linear{{end}}">{{.SVG}}
<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</div>
</section>
{{end}}</body></html>
`))
