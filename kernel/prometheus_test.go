package kernel

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel/internal/metricfam"
	"github.com/axsched/ax/store"
)

// promSeries is one sample line of an exposition.
type promSeries struct {
	name   string
	labels map[string]string
	value  float64
}

// promExpo is an exposition checked by checkExposition.
type promExpo struct {
	types   map[string]string          // family -> TYPE
	kernels map[string]map[string]bool // family -> kernel label values seen
	series  map[string]float64         // canonical series -> value
	hists   map[string][]promSeries    // histogram series (labels without le) -> its samples, in order
	order   []string                   // families in the order they appear
	samples map[string][]promSeries    // family -> samples
}

// checkExposition parses text strictly enough for the Prometheus text format and
// fails t unless: every family has exactly one # HELP and one # TYPE line, both
// before its samples; a family's lines are contiguous; no series is written twice;
// every series' kernel label is one of kernels ("" meaning no kernel label).
func checkExposition(t *testing.T, text string, kernels ...string) *promExpo {
	t.Helper()
	e := &promExpo{
		types: map[string]string{}, kernels: map[string]map[string]bool{},
		series: map[string]float64{}, hists: map[string][]promSeries{}, samples: map[string][]promSeries{},
	}
	help := map[string]int{}
	closed := map[string]bool{}
	cur := ""
	enter := func(fam string, ln int) {
		if fam == cur {
			return
		}
		if closed[fam] {
			t.Fatalf("line %d: family %s continues after another family began:\n%s", ln, fam, text)
		}
		if cur != "" {
			closed[cur] = true
		}
		cur = fam
		e.order = append(e.order, fam)
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		t.Fatalf("exposition does not end with a newline")
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		ln := i + 1
		switch {
		case line == "":
			t.Fatalf("line %d: empty line", ln)
		case strings.HasPrefix(line, "# HELP "):
			f := strings.SplitN(strings.TrimPrefix(line, "# HELP "), " ", 2)
			if len(f) != 2 || f[1] == "" {
				t.Fatalf("line %d: %q: HELP without text", ln, line)
			}
			enter(f[0], ln)
			if len(e.samples[f[0]]) > 0 {
				t.Fatalf("line %d: HELP of %s after its samples", ln, f[0])
			}
			if help[f[0]]++; help[f[0]] > 1 {
				t.Fatalf("line %d: second HELP for %s", ln, f[0])
			}
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(strings.TrimPrefix(line, "# TYPE "))
			if len(f) != 2 || !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, f[1]) {
				t.Fatalf("line %d: %q: bad TYPE line", ln, line)
			}
			enter(f[0], ln)
			if _, dup := e.types[f[0]]; dup {
				t.Fatalf("line %d: second TYPE for %s", ln, f[0])
			}
			if len(e.samples[f[0]]) > 0 {
				t.Fatalf("line %d: TYPE of %s after its samples", ln, f[0])
			}
			e.types[f[0]] = f[1]
		case strings.HasPrefix(line, "#"):
			t.Fatalf("line %d: %q: unexpected comment", ln, line)
		default:
			s := parseSample(t, ln, line)
			fam := s.name
			if _, ok := e.types[fam]; !ok {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(s.name, suf); ok && e.types[b] == "histogram" {
						fam = b
					}
				}
			}
			if _, ok := e.types[fam]; !ok {
				t.Fatalf("line %d: %s has no TYPE before it", ln, s.name)
			}
			if help[fam] != 1 {
				t.Fatalf("line %d: %s has no HELP before it", ln, s.name)
			}
			enter(fam, ln)
			if e.types[fam] == "counter" && !strings.HasSuffix(fam, "_total") {
				t.Errorf("line %d: counter %s does not end in _total", ln, fam)
			}
			key := canonical(s.name, s.labels)
			if _, dup := e.series[key]; dup {
				t.Fatalf("line %d: series %s written twice", ln, key)
			}
			e.series[key] = s.value
			kv, ok := s.labels["kernel"]
			if !slices.Contains(kernels, kv) || (kv == "" && ok) {
				t.Fatalf("line %d: series %s: kernel label %q (present %v), want one of %q", ln, key, kv, ok, kernels)
			}
			if e.kernels[fam] == nil {
				e.kernels[fam] = map[string]bool{}
			}
			e.kernels[fam][kv] = true
			e.samples[fam] = append(e.samples[fam], s)
			if e.types[fam] == "histogram" {
				rest := maps.Clone(s.labels)
				delete(rest, "le")
				hk := canonical(fam, rest)
				e.hists[hk] = append(e.hists[hk], s)
			}
		}
	}
	for fam, n := range help {
		if _, ok := e.types[fam]; !ok || n != 1 {
			t.Errorf("family %s: %d HELP lines, TYPE %q, want one of each", fam, n, e.types[fam])
		}
		if len(e.samples[fam]) == 0 {
			t.Errorf("family %s has no samples", fam)
		}
	}
	for hk, ss := range e.hists {
		checkHistogram(t, hk, ss)
	}
	return e
}

// checkHistogram fails t unless ss (one histogram series' samples) are buckets
// with increasing le ending in +Inf, cumulative counts, then _sum and _count equal
// to the +Inf bucket.
func checkHistogram(t *testing.T, hk string, ss []promSeries) {
	t.Helper()
	var (
		prevLe, prevN float64
		inf, count    = -1.0, -2.0
		sum           bool
	)
	for i, s := range ss {
		switch {
		case strings.HasSuffix(s.name, "_bucket"):
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err != nil || (i > 0 && le <= prevLe) || s.value < prevN {
				t.Fatalf("%s: bucket %d le=%q count %g after le=%g count %g: want increasing le, cumulative counts", hk, i, s.labels["le"], s.value, prevLe, prevN)
			}
			prevLe, prevN = le, s.value
			if s.labels["le"] == "+Inf" {
				inf = s.value
			}
		case strings.HasSuffix(s.name, "_sum"):
			sum = true
		case strings.HasSuffix(s.name, "_count"):
			count = s.value
		}
	}
	if inf != count || !sum {
		t.Fatalf("%s: +Inf bucket %g, _count %g, _sum written %v: want +Inf == _count and a _sum", hk, inf, count, sum)
	}
}

// canonical renders a series with its labels sorted.
func canonical(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// parseSample parses `name{l="v",...} value`.
func parseSample(t *testing.T, ln int, line string) promSeries {
	t.Helper()
	s := promSeries{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		t.Fatalf("line %d: %q: no metric name", ln, line)
	}
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for rest != "" && rest[0] != '}' {
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				t.Fatalf("line %d: %q: bad label", ln, line)
			}
			name := rest[:eq]
			rest = rest[eq+1:]
			v, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("line %d: %q: bad label value: %v", ln, line, err)
			}
			uq, _ := strconv.Unquote(v)
			if _, dup := s.labels[name]; dup {
				t.Fatalf("line %d: %q: label %s twice", ln, line, name)
			}
			s.labels[name] = uq
			rest = strings.TrimPrefix(rest[len(v):], ",")
		}
		if rest == "" {
			t.Fatalf("line %d: %q: unclosed labels", ln, line)
		}
		rest = rest[1:]
	}
	v, ok := strings.CutPrefix(rest, " ")
	if !ok {
		t.Fatalf("line %d: %q: no space before the value", ln, line)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("line %d: %q: value: %v", ln, line, err)
	}
	s.value = f
	return s
}

// TestWritePrometheusTwoKernels scrapes two named kernels sharing one set into one
// buffer: one HELP and one TYPE per family before its samples, no duplicate
// series, every series labelled with its kernel, gauges read at the scrape.
func TestWritePrometheusTwoKernels(t *testing.T) {
	set := metrics.NewSet()
	api := newTestKernel(t, Config{Name: "api", Metrics: set, Store: acceptStore{}, Groups: map[string]GroupConfig{"upstream": {}}})
	batch := newTestKernel(t, Config{Name: "batch", Metrics: set})
	if err := mustSubmit(t, api, Task{Run: noop}).Wait(context.Background()); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	g := make(gate)
	h := mustSubmit(t, batch, Task{Priority: High, Run: g.run})
	axtest.Eventually(t, func() bool { return batch.Stats().Running == 1 }, "the batch kernel's task to run")

	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	e := checkExposition(t, buf.String(), "api", "batch")
	for _, f := range metricfam.Families {
		want := map[string]bool{"api": true, "batch": true}
		if strings.HasPrefix(f.Name, "ax_store_") || strings.HasPrefix(f.Name, "ax_group_") {
			want = map[string]bool{"api": true}
		}
		if got := e.types[f.Name]; got != f.Type {
			t.Errorf("TYPE of %s = %q, want %q", f.Name, got, f.Type)
		}
		if got := e.kernels[f.Name]; len(got) != len(want) || !got["api"] || (want["batch"] && !got["batch"]) {
			t.Errorf("kernels of %s = %v, want %v", f.Name, got, want)
		}
	}
	for key, want := range map[string]float64{
		`ax_tasks_succeeded_total{kernel="api",priority="normal"}`:   1,
		`ax_tasks_succeeded_total{kernel="batch",priority="normal"}`: 0,
		`ax_tasks_running{kernel="batch"}`:                           1,
		`ax_tasks_running{kernel="api"}`:                             0,
		`ax_task_exec_seconds_count{kernel="api",priority="normal"}`: 1,
		`ax_store_up{kernel="api"}`:                                  1,
		`ax_group_waiting{group="upstream",kernel="api"}`:            0,
	} {
		if got, ok := e.series[key]; !ok || got != want {
			t.Errorf("scrape: %s = %g (present %v), want %g", key, got, ok, want)
		}
	}

	// Each kernel's own WritePrometheus writes its series only, just as strictly.
	var own bytes.Buffer
	batch.WritePrometheus(&own)
	if e := checkExposition(t, own.String(), "batch"); len(e.order) != int(metricfam.Count-12-metricfam.Groups) {
		t.Errorf("batch.WritePrometheus() wrote %d families, want %d (all but ax_store_* and ax_group_*)", len(e.order), int(metricfam.Count-12-metricfam.Groups))
	}
	g.open()
	if err := h.Wait(context.Background()); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
}

// TestWritePrometheusUnnamed checks that an unnamed kernel's series carry no kernel
// label and pass the same checks, on its own set too.
func TestWritePrometheusUnnamed(t *testing.T) {
	k := newTestKernel(t, Config{})
	var a, b bytes.Buffer
	k.WritePrometheus(&a)
	k.Metrics().WritePrometheus(&b)
	checkExposition(t, a.String(), "")
	if a.String() != b.String() {
		t.Fatalf("Metrics().WritePrometheus() = %q, want WritePrometheus()'s %q", b.String(), a.String())
	}
}

// acceptStore is a Store that accepts every change and holds nothing: enough for
// the journal's metric families to exist (the durable path is tested against
// storekit.MemoryStore and MariaDB elsewhere). The methods the kernel does not call
// here are the nil embedded Store's.
type acceptStore struct{ store.Store }

func (acceptStore) Commit(_ context.Context, changes []store.Change) ([]error, error) {
	return make([]error, len(changes)), nil
}

func (acceptStore) Recover(context.Context) ([]store.StoredTask, error) { return nil, nil }

func (acceptStore) Close() error { return nil }

// failingRecover is a store whose Recover fails, so that New does.
type failingRecover struct{ acceptStore }

func (failingRecover) Recover(context.Context) ([]store.StoredTask, error) {
	return nil, errors.New("store down")
}

func TestConfigNameOnSharedSet(t *testing.T) {
	tests := []struct {
		name          string
		first, second string
		ok            bool
	}{
		{"different names", "a", "b", true},
		{"same name", "a", "a", false},
		{"second unnamed", "a", "", false},
		{"first unnamed", "", "b", false},
		{"both unnamed", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := metrics.NewSet()
			newTestKernel(t, Config{Name: tt.first, Metrics: set})
			k, err := New(Config{Name: tt.second, Metrics: set})
			if tt.ok {
				if err != nil {
					t.Fatalf("New(Name %q) = %v, want nil", tt.second, err)
				}
				_ = k.Close()
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != "Config.Name" {
				t.Fatalf("New(Name %q) beside %q = %v, want a *ConfigError for Config.Name", tt.second, tt.first, err)
			}
			// Separate sets never conflict.
			newTestKernel(t, Config{Name: tt.second, Metrics: metrics.NewSet()})
		})
	}
}

// TestConfigNameFreedAtStop checks that a stopped kernel's series leave its shared
// set and its name is free again, also after a New that failed, while its own
// WritePrometheus still writes them.
func TestConfigNameFreedAtStop(t *testing.T) {
	set := metrics.NewSet()
	if _, err := New(Config{Name: "x", Metrics: set, Store: failingRecover{}}); err == nil {
		t.Fatalf("New() with a failing Recover = nil, want an error")
	}
	k, err := New(Config{Name: "x", Metrics: set})
	if err != nil {
		t.Fatalf("New() after a failed New of the same name = %v", err)
	}
	if err := mustSubmit(t, k, Task{Run: noop}).Wait(context.Background()); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	if buf.Len() != 0 {
		t.Fatalf("set after Close = %q, want nothing", buf.String())
	}
	buf.Reset()
	k.WritePrometheus(&buf)
	if e := checkExposition(t, buf.String(), "x"); e.series[`ax_tasks_succeeded_total{kernel="x",priority="normal"}`] != 1 {
		t.Fatalf("WritePrometheus() after Close lacks the succeeded task:\n%s", buf.String())
	}
	newTestKernel(t, Config{Name: "x", Metrics: set})
	buf.Reset()
	set.WritePrometheus(&buf)
	if e := checkExposition(t, buf.String(), "x"); e.series[`ax_tasks_succeeded_total{kernel="x",priority="normal"}`] != 0 {
		t.Fatalf("set with the new kernel shows the old one's figures:\n%s", buf.String())
	}

	// A kernel's own set keeps its series after the stop.
	own := newTestKernel(t, Config{Name: "solo"})
	_ = own.Close()
	buf.Reset()
	own.Metrics().WritePrometheus(&buf)
	checkExposition(t, buf.String(), "solo")
}
