package main

import (
	"bytes"
	"fmt"
	"image/color"
	"regexp"
	"strings"
	"testing"

	"github.com/axsched/ax/bench"
)

var (
	sectionRe = regexp.MustCompile(`(?s)<section id="([^"]+)">(.*?)</section>`)
	figureRe  = regexp.MustCompile(`(?s)<figure class="chart" data-metric="([^"]+)" data-scale="([a-z]+)">(.*?)</figure>`)
	captionRe = regexp.MustCompile(`(?s)<figcaption>(.*?)</figcaption>`)
	axRowRe   = regexp.MustCompile(`<tr class="ax"><td>ax</td>`)
	svgTextRe = regexp.MustCompile(`(?s)<text[^>]*>([^<]*)</text>`)
)

// TestHTMLStructure checks the report a person reads: a table per scenario
// with ax's row marked, no preformatted text, and charts whose captions say
// which way is better, latencies on a log scale.
func TestHTMLStructure(t *testing.T) {
	var b bytes.Buffer
	if err := writeHTML(&b, []bench.Report{floodFixture(), throughputFixture()}); err != nil {
		t.Fatalf("writeHTML: %v", err)
	}
	page := b.String()
	if strings.Contains(page, "<pre") {
		t.Error("page has a <pre>; tables must be HTML tables")
	}
	sections := sectionRe.FindAllStringSubmatch(page, -1)
	if len(sections) != 2 {
		t.Fatalf("page has %d sections, want 2", len(sections))
	}
	for _, sec := range sections {
		name, body := sec[1], sec[2]
		if n := strings.Count(body, `<table class="results"`); n != 1 {
			t.Errorf("%s: %d result tables, want 1", name, n)
		}
		if !axRowRe.MatchString(body) {
			t.Errorf("%s: no table row marked as ax's", name)
		}
		if n := strings.Count(body, `<tr class="ax">`); n != 1 {
			t.Errorf("%s: %d rows marked as ax's, want 1", name, n)
		}
		figs := figureRe.FindAllStringSubmatch(body, -1)
		if len(figs) == 0 || len(figs) != strings.Count(body, "<figure") {
			t.Errorf("%s: %d charts matched of %d figures", name, len(figs), strings.Count(body, "<figure"))
		}
		for _, f := range figs {
			metric, scale, fig := f[1], f[2], f[3]
			c := captionRe.FindStringSubmatch(fig)
			if c == nil || !saysBetter(c[1]) {
				t.Errorf("%s: chart of %s: caption %q does not say whether lower or higher is better", name, metric, c)
			}
			if !strings.Contains(fig, "<svg") {
				t.Errorf("%s: chart of %s has no SVG", name, metric)
			}
			wantLog := isLatency(metric)
			if (scale == "log") != wantLog {
				t.Errorf("%s: chart of %s: scale %s, want log = %v", name, metric, scale, wantLog)
			}
			if wantLog && !logAxis(fig) {
				t.Errorf("%s: chart of %s: tick labels are not powers of ten apart", name, metric)
			}
			if !strings.Contains(fig, colorHex(axColor)) {
				t.Errorf("%s: chart of %s does not draw ax in its colour", name, metric)
			}
		}
	}
	flood := sections[0][2]
	for _, want := range []string{"High p99 wait: 17.7ms under ax", "ants-nb (refused 6178)", `data-metric="wait_p99_us_high" data-scale="log"`} {
		if !strings.Contains(flood, want) {
			t.Errorf("flood section lacks %q", want)
		}
	}
	if strings.Contains(flood, "÷ ants-nb") {
		t.Error("flood section compares with ants-nb, which refused tasks")
	}
}

// saysBetter reports whether a caption says which way is better.
func saysBetter(caption string) bool {
	return strings.Contains(caption, "lower is better") || strings.Contains(caption, "higher is better")
}

// colorHex returns c as the #RRGGBB gonum writes into an SVG.
func colorHex(c color.RGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }

// logAxis reports whether a chart's SVG has at least three of the duration
// tick labels a log axis of microseconds carries, one decade apart.
func logAxis(svg string) bool {
	decades := []string{"1.00µs", "10.0µs", "100µs", "1.00ms", "10.0ms", "100ms", "1.00s", "10.0s"}
	labels := map[string]bool{}
	for _, m := range svgTextRe.FindAllStringSubmatch(svg, -1) {
		labels[strings.TrimSpace(m[1])] = true
	}
	run, best := 0, 0
	for _, d := range decades {
		if labels[d] {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best >= 3
}

// TestHTMLDurableCPU checks the durable section's CPU columns, its note on the
// server that could not be read, and the server CPU charts on a linear scale.
func TestHTMLDurableCPU(t *testing.T) {
	var b bytes.Buffer
	if err := writeHTML(&b, []bench.Report{durableFixture()}); err != nil {
		t.Fatalf("writeHTML: %v", err)
	}
	page := b.String()
	for _, want := range []string{
		"<th>bulk client CPU/task</th>", "<th>bulk server CPU/task</th>", "<th>callers server CPU/task</th>",
		"183µs", "71.6µs", "47.2µs",
		"server CPU not measured: no process named redis-server",
		`data-metric="server_cpu_us_per_task_bulk" data-scale="linear"`,
		`data-metric="server_cpu_us_per_task_callers" data-scale="linear"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("durable section lacks %q", want)
		}
	}
}
