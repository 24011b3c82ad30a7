package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

//go:embed assets
var assets embed.FS

// pageData is what a page's template renders.
type pageData struct {
	Title     string
	Nav       string // the page: "overview", "groups", "schedules", "zombies", "tasks", "flows"
	Base      string // the relative path back to the handler's root
	Back      string // the page an action's form returns to ("" for the overview)
	Refresh   int64  // how often the page's script refreshes it, in ms
	Actions   bool
	Token     string
	Flash     string
	Error     string
	Overview  *overviewData
	Replicas  *replicasData
	Charts    []chart
	Groups    *groupsData
	Schedules *schedulesData
	Zombies   *zombiesData
	Tasks     *tasksData
	Task      *taskData
	Confirm   *confirmData
	Flows     *flowsData
	Run       *runData
	HasStore  bool // a store is attached: the Tasks page is in the menu
	HasFlows  bool // flows are attached: the Flows page is in the menu
	Payloads  bool // payload previews are on
}

// taskActionLabels are the buttons of a task's actions.
var taskActionLabels = map[string]string{"cancel": "Cancel", "run_now": "Run now", "requeue": "Requeue", "purge": "Purge…", "retry": "Retry"}

// The messages a page shows after an action's form (its ?done= parameter).
var flashes = map[string]string{
	ActionPause:           "Paused.",
	ActionResume:          "Resumed.",
	ActionSchedulePause:   "Schedule paused.",
	ActionScheduleResume:  "Schedule resumed.",
	ActionScheduleTrigger: "Schedule triggered.",
	ActionTaskCancel:      "Canceled.",
	ActionTaskRunNow:      "Made due now.",
	ActionTaskRequeue:     "Requeued.",
	ActionTaskPurge:       "Purged.",
	ActionFlowCancel:      "Run canceled.",
	ActionFlowRetry:       "Stage retried.",
}

var funcs = template.FuncMap{
	"label": func(action string) string { return taskActionLabels[action] },
	"short": func(s string) string {
		const n = 120
		if len(s) <= n {
			return s
		}
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return s[:i] + "…"
	},
	"f1":  func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"pct": func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + " %" },
	"ms": func(v float64) string {
		switch {
		case v == 0:
			return "0"
		case v < 1:
			return strconv.FormatFloat(v*1000, 'f', 1, 64) + " µs"
		case v < 10_000:
			return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
		}
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.Format("2006-01-02 15:04:05 MST")
	},
}

// parsePages parses each page's template with the layout.
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "groups", "schedules", "zombies", "tasks", "task", "flows", "flow", "confirm", "error"} {
		t, err := template.Must(layout.Clone()).ParseFS(assets, "assets/"+name+".html")
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes the page name with d, with status code. Strings that are not
// valid UTF-8 are written with U+FFFD for each bad byte, as encoding/json does.
func (c *console) render(w http.ResponseWriter, code int, name string, d pageData) {
	if d.Base == "" {
		d.Base = "./"
	}
	d.Refresh = c.refresh.Milliseconds()
	d.Actions = c.actions
	d.HasStore, d.HasFlows, d.Payloads = c.lister != nil, len(c.flows) > 0, c.payloads
	if c.actions {
		d.Token = c.token
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", d); err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	out := buf.Bytes()
	if !utf8.Valid(out) {
		out = validUTF8(out)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(out)
}

// validUTF8 returns b with U+FFFD in place of each byte of invalid UTF-8, as
// encoding/json writes it (bytes.ToValidUTF8 would replace a run of them with one).
func validUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

func (c *console) servePage(w http.ResponseWriter, r *http.Request, rel, _ string) {
	d := pageData{Flash: flashes[r.URL.Query().Get("done")]}
	switch rel {
	case "":
		o, rs := c.overview(nil), c.replicas(r.Context())
		d.Title, d.Nav, d.Overview, d.Replicas, d.Charts = "Overview", "overview", &o, &rs, charts(o.Samples)
	case "groups":
		g := c.groups()
		d.Title, d.Nav, d.Groups = "Groups", "groups", &g
	case "schedules":
		s := c.schedules()
		d.Title, d.Nav, d.Schedules = "Schedules", "schedules", &s
	case "zombies":
		z := c.zombies()
		d.Title, d.Nav, d.Zombies = "Zombies", "zombies", &z
	}
	d.Back = rel
	name := d.Nav
	c.render(w, http.StatusOK, name, d)
}

func (c *console) serveAsset(w http.ResponseWriter, r *http.Request, rel, _ string) {
	b, err := fs.ReadFile(assets, "assets/"+strings.TrimPrefix(rel, "static/"))
	if err != nil {
		c.fail(w, r, rel, http.StatusNotFound, err)
		return
	}
	ct := "text/css; charset=utf-8"
	if strings.HasSuffix(rel, ".js") {
		ct = "text/javascript; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// chart is an SVG line chart of the samples.
type chart struct {
	Title    string
	Top      string // the value at the top of the chart
	From, To string // the times of the first and the last sample
	Lines    []chartLine
}

type chartLine struct {
	Class, Label string
	Points       string // the polyline's points, in a 600 × 120 box
}

const chartW, chartH = 600, 120

// charts draws the throughput, the mean wait and the recent wait p99 of the
// samples.
func charts(ps []pointData) []chart {
	if len(ps) < 2 {
		return nil
	}
	from, to := time.UnixMilli(ps[0].Time).Format("15:04:05"), time.UnixMilli(ps[len(ps)-1].Time).Format("15:04:05")
	series := func(title, unit string, lines []chartLine, vals [][]float64) chart {
		top := 0.0
		for _, vs := range vals {
			for _, v := range vs {
				top = max(top, v)
			}
		}
		for i, vs := range vals {
			lines[i].Points = polyline(vs, top)
		}
		return chart{Title: title, Top: strconv.FormatFloat(top, 'f', 1, 64) + unit, From: from, To: to, Lines: lines}
	}
	sub, end := make([]float64, len(ps)), make([]float64, len(ps))
	hi, no, lo := make([]float64, len(ps)), make([]float64, len(ps)), make([]float64, len(ps))
	hi99, no99, lo99 := make([]float64, len(ps)), make([]float64, len(ps)), make([]float64, len(ps))
	for i, p := range ps {
		sub[i], end[i] = p.Submitted, p.Ended
		hi[i], no[i], lo[i] = p.WaitMean.High, p.WaitMean.Normal, p.WaitMean.Low
		hi99[i], no99[i], lo99[i] = p.WaitP99.High, p.WaitP99.Normal, p.WaitP99.Low
	}
	prios := func() []chartLine {
		return []chartLine{{Class: "l1", Label: "high"}, {Class: "l2", Label: "normal"}, {Class: "l3", Label: "low"}}
	}
	return []chart{
		series("Throughput (tasks/s)", "/s",
			[]chartLine{{Class: "l1", Label: "submitted"}, {Class: "l2", Label: "ended"}}, [][]float64{sub, end}),
		series("Mean wait per interval (ms)", " ms", prios(), [][]float64{hi, no, lo}),
		series("Wait p99 over the last minute (ms)", " ms", prios(), [][]float64{hi99, no99, lo99}),
	}
}

// polyline places vs across the chart's box, top at its top edge.
func polyline(vs []float64, top float64) string {
	var b strings.Builder
	for i, v := range vs {
		x := float64(chartW) * float64(i) / float64(len(vs)-1)
		y := float64(chartH)
		if top > 0 {
			y -= float64(chartH) * v / top
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
	}
	return b.String()
}
