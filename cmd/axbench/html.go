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

// Chart sizes.
const (
	barW, barH   = 7 * vg.Inch, 3.2 * vg.Inch
	lineW, lineH = 7 * vg.Inch, 3.4 * vg.Inch
)

// writeHTML writes one self-contained page: for each scenario its table, bar
// charts of its headline metrics (median with a min–max whisker per executor)
// and line charts of its series over time, one line per executor. Charts are
// inline SVG; the page loads nothing.
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
	Table                 string
	Charts                []template.HTML
}

func section(rp bench.Report) (htmlSection, error) {
	var tb bytes.Buffer
	if err := writeTable(&tb, rp); err != nil {
		return htmlSection{}, err
	}
	sec := htmlSection{Scenario: rp.Scenario, Doc: rp.Doc, Params: paramLine(rp.Params), Table: tb.String()}
	v := viewOf(rp)
	for _, m := range v.bars {
		svg, err := barChart(rp, m, v)
		if err != nil {
			return sec, err
		}
		if svg != "" {
			sec.Charts = append(sec.Charts, svg)
		}
	}
	for _, name := range seriesNames(rp) {
		svg, err := lineChart(rp, name)
		if err != nil {
			return sec, err
		}
		sec.Charts = append(sec.Charts, svg)
	}
	return sec, nil
}

// whiskers are bars' min–max ranges for plotter.YErrorBars.
type whiskers struct {
	xys  plotter.XYs
	errs plotter.YErrors
}

func (w whiskers) Len() int                        { return len(w.xys) }
func (w whiskers) XY(i int) (float64, float64)     { return w.xys[i].X, w.xys[i].Y }
func (w whiskers) YError(i int) (float64, float64) { return w.errs[i].Low, w.errs[i].High }

func barChart(rp bench.Report, metric string, v view) (template.HTML, error) {
	var names []string
	var vals plotter.Values
	var wk whiskers
	for _, r := range rp.Results {
		s, ok := r.Metrics[metric]
		if !ok {
			continue
		}
		x := float64(len(names))
		names = append(names, r.Executor)
		vals = append(vals, s.Median)
		wk.xys = append(wk.xys, plotter.XY{X: x, Y: s.Median})
		wk.errs = append(wk.errs, struct{ Low, High float64 }{s.Median - s.Min, s.Max - s.Median})
	}
	if len(names) == 0 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = rp.Scenario + ": " + titleOf(v, metric)
	if metric == v.headline {
		if v.higher {
			p.Title.Text += " (higher is better)"
		} else {
			p.Title.Text += " (lower is better)"
		}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(18))
	if err != nil {
		return "", err
	}
	bars.LineStyle.Width = 0
	bars.Color = color.RGBA{R: 0x4c, G: 0x78, B: 0xa8, A: 0xff}
	p.Add(bars)
	if rp.Reps > 1 {
		eb, err := plotter.NewYErrorBars(wk)
		if err != nil {
			return "", err
		}
		p.Add(eb)
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 5
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Y.Min = 0
	p.Y.Tick.Marker = humanTicks{}
	p.Add(plotter.NewGrid())
	return render(p, barW, barH)
}

func titleOf(v view, metric string) string {
	for _, c := range v.columns {
		if c.metric == metric {
			return c.title
		}
	}
	return metric
}

// seriesNames lists the series of a report in first-seen order.
func seriesNames(rp bench.Report) []string {
	var names []string
	for _, r := range rp.Results {
		for _, s := range r.Series {
			if len(s.T) > 0 && !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	return names
}

func lineChart(rp bench.Report, name string) (template.HTML, error) {
	p := plot.New()
	unit := ""
	var lines []any
	for i, r := range rp.Results {
		for _, s := range r.Series {
			if s.Name != name || len(s.T) == 0 {
				continue
			}
			unit = s.Unit
			xys := make(plotter.XYs, len(s.T))
			for k := range s.T {
				xys[k] = plotter.XY{X: s.T[k], Y: s.V[k]}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return "", err
			}
			l.Color = plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
			if strings.HasPrefix(r.Executor, "ax") {
				l.Width = vg.Points(2.5)
			}
			lines = append(lines, r.Executor, l)
		}
	}
	p.Title.Text = rp.Scenario + ": " + seriesTitle(name) + " over time"
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = unit
	for k := 0; k+1 < len(lines); k += 2 {
		p.Add(lines[k+1].(*plotter.Line))
		p.Legend.Add(lines[k].(string), lines[k+1].(*plotter.Line))
	}
	p.Legend.Top = true
	p.Y.Min = 0
	p.Y.Tick.Marker = humanTicks{}
	p.Add(plotter.NewGrid())
	return render(p, lineW, lineH)
}

// seriesTitle names a series for a chart's title.
func seriesTitle(name string) string {
	if pr, ok := strings.CutPrefix(name, "wait_p99_us_"); ok {
		return pr + "-priority p99 wait"
	}
	return strings.ReplaceAll(strings.TrimSuffix(name, "_per_sec")+map[bool]string{true: " per second"}[strings.HasSuffix(name, "_per_sec")], "_", " ")
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

// render draws p to an SVG fragment (without the XML prolog) for inlining.
func render(p *plot.Plot, w, h vg.Length) (template.HTML, error) {
	c := vgsvg.NewWith(vgsvg.UseWH(w, h))
	p.Draw(draw.New(c))
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
body { font-family: "Liberation Sans", Arial, sans-serif; margin: 2em auto; max-width: 80em; color: #222; }
pre { font-size: 12px; line-height: 1.25; overflow-x: auto; background: #f6f6f6; padding: .8em; }
section { margin-bottom: 3em; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(36em, 1fr)); gap: 1em; }
.charts svg { display: block; max-width: 100%; height: auto; }
.meta { color: #555; }
</style></head>
<body>
<h1>axbench report</h1>
<p class="meta">Machine: {{.Machine}}<br>Started: {{.Date}}</p>
{{range .Sections}}<section>
<h2>{{.Scenario}}</h2>
<p>{{.Doc}}</p>
<p class="meta">{{.Params}}</p>
<pre>{{.Table}}</pre>
<div class="charts">{{range .Charts}}{{.}}
{{end}}</div>
</section>
{{end}}</body></html>
`))
