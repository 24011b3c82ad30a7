// Command axbench runs the ax benchmark scenarios on ax and on the schedulers
// people use instead, in the same run, and prints, writes and draws the figures.
//
//	axbench -list
//	axbench -scenario noop,latency -exec ax,pond,chanpool -reps 3 -json out.json -html out.html
//
// Each repetition runs in a fresh process (axbench re-runs itself), the
// executors interleaved; tables show the median with min–max.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
