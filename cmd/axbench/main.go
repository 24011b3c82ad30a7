// Command axbench runs the ax benchmark scenarios on ax and on the schedulers
// people use instead, in the same run, and prints, writes and draws the figures.
//
//	axbench -list
//	axbench -scenario noop,latency -exec ax,pond,chanpool -reps 3 -json out.json -html out.html
//
// Each repetition runs in a fresh process (axbench re-runs itself), the
// executors interleaved; tables show the median with min–max.
//
// The durable scenario runs on durable configurations instead of executors:
// ax-memstore, ax on MariaDB ($AX_MYSQL_DSN, default
// root@tcp(127.0.0.1:3306)/test), river on PostgreSQL ($AX_PG_DSN) and asynq
// on Redis ($AX_REDIS_ADDR); each run uses a fresh table, schema or queue and
// drops it after.
//
//	axbench -scenario durable -reps 1
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
