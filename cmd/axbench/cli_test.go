package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/bench"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no scenario", nil, "-scenario is required"},
		{"unknown flag", []string{"-nope"}, "flag provided but not defined: -nope"},
		{"stray argument", []string{"-scenario", "noop", "extra"}, `unexpected argument "extra"`},
		{"bad number", []string{"-scenario", "noop", "-n", "many"}, `invalid value "many" for flag -n`},
		{"negative conc", []string{"-scenario", "noop", "-conc", "-3"}, "Params.Conc = -3: must be >= 0"},
		{"zero reps", []string{"-scenario", "noop", "-reps", "0"}, "-reps 0: must be >= 1"},
		{"unknown scenario", []string{"-scenario", "nope"}, `unknown scenario "nope"`},
		{"unknown executor", []string{"-scenario", "noop", "-exec", "chanpool,nope"}, `unknown executor "nope"`},
		{"empty list", []string{"-scenario", ","}, "need at least one name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("run(%q) = %d, want %d", tt.args, code, exitUsage)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%q) stderr = %q, want it to contain %q", tt.args, stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("run(%q) stdout = %q, want nothing", tt.args, stdout.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"-h"}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Errorf("run(-h) = %d, want %d", code, exitOK)
	}
	if !strings.Contains(stderr.String(), "usage: axbench -scenario") {
		t.Errorf("run(-h) stderr = %q, want the usage", stderr.String())
	}
}

func TestList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"-list"}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("run(-list) = %d, want %d; stderr %q", code, exitOK, stderr.String())
	}
	reg, err := registry()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range reg.Scenarios() {
		if !strings.Contains(stdout.String(), sc.Name) {
			t.Errorf("-list does not name scenario %q", sc.Name)
		}
	}
	for _, f := range reg.Executors() {
		if !strings.Contains(stdout.String(), f.Name) {
			t.Errorf("-list does not name executor %q", f.Name)
		}
	}
}

// TestRunWritesTableJSONAndHTML runs two tiny scenarios in fresh processes
// (the test binary re-run as a child) and checks all three outputs.
func TestRunWritesTableJSONAndHTML(t *testing.T) {
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "new", "r.json"), filepath.Join(dir, "r.html")
	profDir := filepath.Join(dir, "prof")
	args := []string{
		"-scenario", "noop,mixed", "-exec", "chanpool,pond-nb,go", "-scale", "0.004", "-conc", "8",
		"-reps", "2", "-quiet", "-json", jsonPath, "-html", htmlPath, "-cpuprofile", profDir,
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("run = %d, want %d; stderr %q", code, exitOK, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"machine: ", "== noop", "== mixed", "tasks/s", "High p99 µs", "chanpool", "pond-nb", "÷ "} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing with -quiet", stderr.String())
	}

	// noop runs on chanpool and go (pond-nb refuses), mixed on all three: 2 reps each.
	profs, err := filepath.Glob(filepath.Join(profDir, "*.pprof"))
	if err != nil || len(profs) != 10 {
		t.Errorf("-cpuprofile wrote %d profiles (%v), want 10", len(profs), err)
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var reports []bench.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if len(reports) != 2 || reports[1].Scenario != "mixed" {
		t.Fatalf("JSON has %d reports, want noop and mixed", len(reports))
	}
	for _, r := range reports[1].Results {
		if _, ok := r.Metrics["share_low"]; !ok {
			t.Errorf("mixed on %s: no share_low in %v", r.Executor, r.Metrics)
		}
		if lost := r.Metrics["lost"]; lost.Max != 0 {
			t.Errorf("mixed on %s: lost = %+v, want 0", r.Executor, lost)
		}
	}

	h, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	page := string(h)
	if n := strings.Count(page, "<svg"); n < 4 {
		t.Errorf("HTML has %d charts, want at least 4", n)
	}
	for _, bad := range []string{"<script", `src="http`, `href="http`, "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("HTML contains %q: it must load nothing", bad)
		}
	}
}

// TestSaturationReport runs a scaled-down saturation in fresh processes and
// checks its table and JSON: per-priority waits, shares, the ideal, and the
// ratio to priopool.
func TestSaturationReport(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "s.json")
	args := []string{
		"-scenario", "saturation", "-exec", "priopool,chanpool,workerpool", "-conc", "20", "-queue", "200",
		"-work", "20ms", "-duration", "300ms", "-reps", "1", "-quiet", "-json", jsonPath,
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("run = %d, want %d; stderr %q", code, exitOK, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"== saturation", "duration 300ms", "High p99 µs", "Low longest µs", "ideal µs", "÷ priopool", "ideal: the mean time between completions"} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rp bench.Report
	if err := json.Unmarshal(b, &rp); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if rp.Params.Duration != 300*time.Millisecond || len(rp.Results) != 3 {
		t.Fatalf("JSON: duration %v, %d results; want 300ms and 3", rp.Params.Duration, len(rp.Results))
	}
	for _, r := range rp.Results {
		for _, m := range []string{"wait_p50_us_high", "wait_p99_us_normal", "wait_max_us_low", "share_high", "share_low", "ideal_wait_us", "rejected", "lost"} {
			if _, ok := r.Metrics[m]; !ok {
				t.Errorf("saturation on %s: no %s in %v", r.Executor, m, r.Metrics)
			}
		}
	}
}
