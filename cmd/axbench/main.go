// Command axbench runs the ax benchmark scenarios on ax and on the schedulers
// people use instead, in the same run, and prints, writes and draws the figures.
//
//	axbench -list
//	axbench -scenario noop,latency -exec ax,pond,chanpool -reps 3 -json out.json -html out.html
//
// Each repetition runs in a fresh process (axbench re-runs itself), the
// executors interleaved; tables show the median with min–max.
//
// The latency scenarios differ in their generator: latency makes each task in
// the executor's own form before the timed hand-over and waits for arrivals by
// yielding; latency-yield waits like a busy service thread (it sleeps until
// 300 µs before each arrival, then yields) and hands every executor a fresh
// func() closure, as users hold their work (ax wraps it into its task).
// -scenario all runs both:
//
//	axbench -scenario latency,latency-yield -exec ax,chanpool,workerpool
//
// The saturation scenario shows who waits behind whom while Low work saturates
// the executor three times over (open-loop arrivals of every priority, for a
// fixed time), on ax, ax-reserve, the strict-priority pool priopool (the ideal
// for High, which starves Low) and pools with one FIFO:
//
//	axbench -scenario saturation -reps 3 -duration 4s
//
// The flood scenario is the short version of the point: a Low
// flood while High and Normal ask for more than the rest of the capacity, so
// that FIFO pools make High wait behind Low and the strict-priority pool
// starves Low. Its table fits 100 columns and ends with a conclusion computed
// from the figures:
//
//	axbench -scenario flood -reps 1
//
// The durable scenario runs on durable configurations instead of executors:
// ax-memstore, ax on MariaDB ($AX_MYSQL_DSN, default
// root@tcp(127.0.0.1:3306)/test), river on PostgreSQL ($AX_PG_DSN) and asynq
// on Redis ($AX_REDIS_ADDR); each run uses a fresh table, schema or queue and
// drops it after. Beside tasks/s it reports the CPU per task of the client
// (axbench's process) and of the database server (mariadbd, every postgres
// process, redis-server: their /proc/PID/stat, the one listening on the DSN's
// port where several run) over each shape's measured phase; where the server's
// processes cannot be read (another host or container, another user's under
// hidepid) the cell is a dash and a note says why. The server's figure counts
// all its work, other clients' included: a server of the run's own gives it
// alone.
//
//	axbench -scenario durable -reps 1
//
// The flows-durable scenario runs the flows scenario's pipeline (fetch → 64
// shards of clean → store) durably: ax's durable flows (package flow's Register)
// on ax-memstore and ax-mariadb-ack, river-pg as a chain of jobs each inserting
// the next in the transaction that completes it (river.JobCompleteTx), and
// ax-flow-mem, ax's flows in memory, for reference:
//
//	axbench -scenario flows-durable -exec ax-flow-mem,ax-mariadb-ack,river-pg -reps 3
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
