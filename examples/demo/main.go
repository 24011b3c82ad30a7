// Command demo shows, in about ten seconds and measured on the spot, what ax
// does that a plain worker pool does not:
//
//  1. Priorities: High and Normal tasks in a Low flood that saturates 100
//     slots three times over, on ax, on a strict-priority pool and on a FIFO
//     channel pool (axbench's flood scenario, package bench): each priority's
//     submit→start waits, Low's share of the starts, throughput.
//  2. A slow, failing upstream (simulated in the process): calls on four keys,
//     one of them hot and one down, some failing and some hanging. ax gives
//     each attempt a timeout, retries with backoff under its retry budget and
//     holds each key to the calls the upstream serves at once (a group with a
//     per-key limit); a plain pool makes the same calls without those. The
//     upstream measures what it saw: calls per key at once, 503s, time spent
//     in hung calls.
//
// Run it with `make demo` or `go run ./examples/demo`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"time"
)

// options are the demo's knobs; the test shortens them.
type options struct {
	flood time.Duration // how long each pool's flood lasts
	calls int           // the calls of part 2
	hang  time.Duration // when the upstream drops a call it never answers
	seed  uint64        // seeds the durations, keys and the upstream's draws
}

func main() {
	var o options
	flag.DurationVar(&o.flood, "flood", 1500*time.Millisecond, "how long each pool's flood lasts (part 1)")
	flag.IntVar(&o.calls, "calls", 400, "calls to the upstream (part 2)")
	flag.DurationVar(&o.hang, "hang", time.Second, "when the upstream drops a call it never answers (part 2)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random draws")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	_, err := run(ctx, os.Stdout, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// figures are everything a run measured.
type figures struct {
	flood []floodRow
	calls []callRow
}

// run measures both parts and prints each to w once measured.
func run(ctx context.Context, w io.Writer, o options) (figures, error) {
	if o.flood <= 0 || o.calls <= 0 || o.hang <= 0 {
		return figures{}, fmt.Errorf("demo: -flood, -calls and -hang must be > 0")
	}
	var f figures
	var err error
	head := fmt.Sprintf("ax demo: every figure below is measured in this run (seed %d, %d CPUs)\n\n", o.seed, runtime.GOMAXPROCS(0))
	if _, err := io.WriteString(w, head); err != nil {
		return f, err
	}
	if f.flood, err = runFlood(ctx, o); err != nil {
		return f, err
	}
	if _, err := io.WriteString(w, floodReport(o, f.flood)+"\n"); err != nil {
		return f, err
	}
	if f.calls, err = runCalls(ctx, o); err != nil {
		return f, err
	}
	_, err = io.WriteString(w, callsReport(o, f.calls))
	return f, err
}
