// Command axctl is the operator's command line for ax: it lists and shows the
// durable tasks, requeues and purges dead letters, lists the owners, lists,
// pauses, resumes and triggers schedules and migrates the tables, against the
// database (--dsn), or against a running kernel's console (--url), which also
// serves the in-memory figures: the overview, the groups, the zombies, and
// pausing and resuming a group, a key, a priority or a kind, and the durable
// flows' runs, their cancel and the retry of a failed stage.
//
//	axctl --dsn 'user:pass@tcp(db:3306)/app' dead list
//	axctl --dsn "$DSN" dead requeue --all
//	axctl --url http://app:8080/console/ stats
//	axctl --url http://app:8080/console/ --json groups | jq .
//
// Tables fit 100 columns (--width), --json prints what scripts read, and the
// exit status says what happened: 0 done, 1 an error (the database or the
// console could not be reached, or failed), 2 a usage error (a bad flag or
// argument, or a command the chosen target does not serve), 3 not found (an
// unknown task or schedule), 4 refused (the console refused the request, the
// purge was not confirmed, or some of the named tasks were not dead letters).
// docs/axctl.md describes every command.
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
