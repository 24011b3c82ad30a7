package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/axsched/ax/bench"
)

func TestBestPeerSkipsRefusers(t *testing.T) {
	rp := floodFixture()
	v := views["saturation"] // a wide view with ratio columns and the same headline
	best, name := bestPeer(rp, v)
	if name != "workerpool" || best != 740000 {
		t.Errorf("bestPeer() = %v, %q, want 740000, %q (ants-nb refused tasks)", best, name, "workerpool")
	}
	if got := refusingPeers(rp, v); got != "ants-nb (refused 6178)" {
		t.Errorf("refusingPeers() = %q, want %q", got, "ants-nb (refused 6178)")
	}
}

func TestCompactTableFits(t *testing.T) {
	var b bytes.Buffer
	rp := floodFixture()
	rp.Doc = strings.Repeat("a long description of the scenario ", 10)
	if err := writeTables(&b, []bench.Report{rp}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > textWidth {
			t.Errorf("line %d has %d runes, want at most %d: %q", i+1, n, textWidth, l)
		}
	}
	for _, want := range []string{"17.7ms", "743ms", "4.1%", "refused", "timed out", "6178", "Low's part of the starts"} {
		if !strings.Contains(out, want) {
			t.Errorf("compact table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "÷ ants-nb") {
		t.Errorf("compact table compares with ants-nb, which refused tasks:\n%s", out)
	}
}

func TestPriorityConclusion(t *testing.T) {
	rp := floodFixture()
	got := priorityConclusion(rp)
	want := []string{
		"High p99 wait: 17.7ms under ax, 42× less than in the best FIFO pool (workerpool: 740ms).",
		"Low kept 4.1% of the starts under ax; strict priority (priopool, High p99 3.38ms) starved it.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("priorityConclusion() = %q, want %q", got, want)
	}
	rp.Results[1].Metrics["share_low"] = bench.Stat{Median: 0.12, Min: 0.12, Max: 0.12}
	rp.Results[0].Metrics["wait_p99_us_high"] = bench.Stat{Median: 1.48e6, Min: 1.48e6, Max: 1.48e6}
	got = priorityConclusion(rp)
	for _, w := range []string{"2.0× more than", "3.38ms) gave it 12.0%"} {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("priorityConclusion() = %q, want it to contain %q", got, w)
		}
	}
}

func TestWrap(t *testing.T) {
	tests := []struct {
		name, in string
		width    int
		want     []string
	}{
		{"fits", "a b c", 10, []string{"a b c"}},
		{"breaks", "aaa bbb ccc", 7, []string{"aaa bbb", "  ccc"}},
		{"runes", "µµµ µµµ", 7, []string{"µµµ µµµ"}},
		{"long word", "aaaaaaaaaa b", 5, []string{"aaaaaaaaaa", "  b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wrap(tt.in, tt.width, ""); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("wrap(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
			}
		})
	}
}

func TestCompactUnits(t *testing.T) {
	tests := []struct {
		metric string
		v      float64
		want   string
	}{
		{"wait_p99_us_high", 850, "850µs"},
		{"wait_p99_us_high", 15_870, "15.9ms"},
		{"wait_p99_us_high", 1_504_000, "1.50s"},
		{"wait_p99_us_high", 4.2, "4.20µs"},
		{"share_low", 0.048, "4.8%"},
		{"share_low", 0, "0%"},
		{"rejected", 12_559, "12.6k"},
	}
	for _, tt := range tests {
		m := map[string]bench.Stat{tt.metric: {Median: tt.v}}
		if got := compactCell(m, tt.metric); got != tt.want {
			t.Errorf("compactCell(%s = %v) = %q, want %q", tt.metric, tt.v, got, tt.want)
		}
	}
}

// TestDurableCPUColumns checks that the durable table shows the client's and
// the server's CPU per task, a dash where there is no figure, and the note
// saying why.
func TestDurableCPUColumns(t *testing.T) {
	var b bytes.Buffer
	if err := writeTables(&b, []bench.Report{durableFixture()}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"bulk client CPU µs/task", "bulk server CPU µs/task", "callers client CPU µs/task", "callers server CPU µs/task",
		"47.25", "183", "71.60", "402",
		"note (asynq-redis): server CPU not measured: no process named redis-server",
		"server CPU µs/task: the same of",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("durable table lacks %q:\n%s", want, out)
		}
	}
	for _, exec := range []string{"ax-memstore", "asynq-redis"} {
		row := tableRow(out, exec)
		if got := strings.Count(row, "–"); got < 2 {
			t.Errorf("%s row has %d dashes, want 2 (no server CPU in either shape): %q", exec, got, row)
		}
	}
}

// tableRow returns the line of a text table that starts with exec's name.
func tableRow(out, exec string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, "│ "), exec+" ") {
			return l
		}
	}
	return ""
}

// TestJSONDurableCPU checks that -json carries the CPU per task and the note.
func TestJSONDurableCPU(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSON(&b, []bench.Report{durableFixture()}); err != nil {
		t.Fatal(err)
	}
	var rp bench.Report
	if err := json.Unmarshal(b.Bytes(), &rp); err != nil {
		t.Fatal(err)
	}
	r, ok := rp.Result("ax-mariadb-ack")
	if !ok || r.Metrics["server_cpu_us_per_task_bulk"].Median != 183.4 || r.Metrics["client_cpu_us_per_task_callers"].Median != 52 {
		t.Errorf("ax-mariadb-ack's CPU per task in JSON = %+v", r.Metrics)
	}
	if a, _ := rp.Result("asynq-redis"); len(a.Notes) != 1 || !strings.Contains(a.Notes[0], "server CPU not measured") {
		t.Errorf("asynq-redis's notes in JSON = %q, want the server CPU's", a.Notes)
	}
}
