package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRunShort runs both parts scaled down and checks what the demo claims:
// High waits less under ax than behind the FIFO pool's flood, the upstream
// never saw more than the per-key limit under ax, every call ended once, and
// the output fits 100 columns.
func TestRunShort(t *testing.T) {
	o := options{flood: 600 * time.Millisecond, calls: 120, hang: time.Second, seed: 1}
	var out bytes.Buffer
	f, err := run(t.Context(), &out, o)
	if err != nil {
		t.Fatalf("run() error = %v", err)
	}
	t.Logf("\n%s", out.String())

	if len(f.flood) != len(floodPools) {
		t.Fatalf("flood rows = %d, want %d", len(f.flood), len(floodPools))
	}
	for _, r := range f.flood {
		if lost := r.m["lost"]; lost != 0 {
			t.Errorf("flood on %s: lost = %v, want 0", r.label, lost)
		}
	}
	ax, fifo := f.flood[0].m, f.flood[len(f.flood)-1].m
	if ax["wait_p99_us_high"] >= fifo["wait_p99_us_high"] {
		t.Errorf("High p99: ax %v µs >= FIFO pool %v µs, want less", ax["wait_p99_us_high"], fifo["wait_p99_us_high"])
	}

	if len(f.calls) != 2 {
		t.Fatalf("call rows = %d, want 2", len(f.calls))
	}
	for _, r := range f.calls {
		if got := r.ok + r.failed + r.timedOut; got != o.calls || r.ended != o.calls {
			t.Errorf("%s: ok+failed+timed out = %d, ended = %d; want %d each", r.label, got, r.ended, o.calls)
		}
		if want := o.calls + r.retries; r.upstream.calls != want {
			t.Errorf("%s: upstream calls = %d, want calls + retries = %d", r.label, r.upstream.calls, want)
		}
	}
	axCalls := f.calls[0]
	if axCalls.upstream.peak > keyLimit {
		t.Errorf("ax: upstream saw %d calls of a key at once, want <= %d", axCalls.upstream.peak, keyLimit)
	}
	if axCalls.upstream.refused != 0 {
		t.Errorf("ax: upstream refused %d calls, want 0 within the per-key limit", axCalls.upstream.refused)
	}
	if bound := 2 * callTimeout; axCalls.upstream.longest > bound {
		t.Errorf("ax: longest call %v, want <= %v (the timeout and a margin; a hung call lasts %v)", axCalls.upstream.longest, bound, o.hang)
	}

	for i, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("line %d has %d columns, want <= 100: %q", i+1, n, line)
		}
	}
}

func TestRunRejectsZeroOptions(t *testing.T) {
	if _, err := run(t.Context(), &bytes.Buffer{}, options{}); err == nil {
		t.Errorf("run(zero options) error = nil, want one")
	}
}
