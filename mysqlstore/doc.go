// Package mysqlstore keeps ax's durable tasks in a MySQL or MariaDB table: an
// implementation of [kernel.Store] on github.com/go-sql-driver/mysql.
//
// The table is a journal. The kernel runs durable tasks from memory and records their
// lifecycle here in group commits, many changes per transaction; it reads the table only
// at start, to recover what was live. Nothing polls the table for work.
//
//	s, err := mysqlstore.Open(os.Getenv("AX_MYSQL_DSN"), mysqlstore.Options{Table: "ax_tasks"})
//	if err != nil { … }
//	defer s.Close()
//	if err := s.Migrate(ctx); err != nil { … } // CREATE TABLE IF NOT EXISTS; idempotent
//
// # Writes
//
// [Store.Commit] applies a batch in one transaction with a few multi-row statements, and
// all the changes of one task in a batch (insert, start, succeed) become one row write.
// New tasks go in with a multi-row INSERT of their final rows. Stored tasks that share
// most new values (starts and ends) are changed by one UPDATE … WHERE id IN (…) AND
// state <= live AND fence = … that sets each column to a literal, or to a CASE over a few
// groups of IDs; rows with many distinct values (retries with their own due times and
// errors) by a multi-row INSERT … ON DUPLICATE KEY UPDATE whose assignments apply a row
// only when its stored fence is the one the change expects and the task is live. Either
// way, the count of rows affected proves that every row applied. When the batch cannot
// be applied optimistically (an ID exists already, a fence moved, a unique key is
// taken), the transaction is rolled back and
// planned again from the rows locked with SELECT … FOR UPDATE, so each change gets its
// exact outcome. Deadlocks (1213), lock wait timeouts (1205) and lost connections are
// retried with backoff ([Options.Retries]); a batch whose answer was lost is simply
// committed again, which the [kernel.Store] contract makes safe.
//
// With [Options.DropCompleted], a task that completes in the batch that inserts it (a
// periodic snapshot taken after the task ended) is not written at all; one read of the
// primary key checks that no such ID is stored already.
//
// # Throughput
//
// Measured on a 2-core VM with MariaDB 10.11 on the same host (innodb_flush_log_at_trx_commit=1:
// every commit is flushed), 200-byte payloads, medians of 3 runs alternating with the
// store of commit f948f2b ("before": a CASE id UPDATE per 250 rows, three secondary
// indexes, keyed inserts planned from locked rows), load average about 2:
//
//	cd mysqlstore && go test -run '^$' -bench 'Commit/^insert$/^batch=1000$|Lifecycle' -benchtime 2s
//
//	batch                                          unit     before   now (best)
//	insert, 1000 tasks                             rows/s   47,200   51,700 (63,600)
//	lifecycle: 500 inserts + 500 start/succeed     tasks/s  20,900   31,700 (37,600)
//	lifecycle, 2000                                tasks/s  21,300   33,900 (36,300)
//	lifecycle, 500, each task with a unique key    tasks/s  (1)      25,500 (27,400)
//	snapshot: insert+start+succeed of 500          tasks/s  40,300   42,600 (67,700)
//	snapshot, 2000                                 tasks/s  47,300   60,200 (65,700)
//	snapshot of 500 with DropCompleted             tasks/s  -        298,000
//
// (1) Not measured before; the store then planned every such batch from locked rows.
//
// The server thread of the connection spends about 19 µs of CPU per lifecycle task, down
// from 25 to 29 µs (the benchmarks report client-µs and server-µs per task; the server
// figure counts every thread of a server on this host, other clients included). The
// figures move by ±30 % with other load on the machine.
//
// # Schema
//
// One table, named by [Options.Table] (validated, never escaped). IDs, kinds and keys are
// binary strings compared byte for byte; times are BIGINT milliseconds since the Unix
// epoch; Timeout is BIGINT nanoseconds; State and Priority are small integers of this
// package's own stable encoding. A unique index on live_key, a copy of the task's unique
// key that is NULL once the task is terminal, keeps one live task per key. Two secondary
// indexes: (state, priority, run_at) holds the live rows in the order recovery reads them
// (and the order a later multi-process version claims due rows in), and (state,
// updated_at) serves dead letters and the retention purge. Each costs every state change
// one more index write: the second one took the lifecycle benchmark from about 30,000 to
// about 24,500 tasks/s (n=500, same run, load average 2).
//
// The figures above were measured with the (state, updated_at) index only. With both
// indexes, one run (load average 1.9): insert of 1000 46,000 rows/s; lifecycle 21,100
// (n=100), 23,800 (n=500), 30,300 (n=2000) tasks/s; keyed 23,400; snapshot 35,800 /
// 37,200 / 32,600; snapshot with DropCompleted 176,000–244,000 tasks/s.
//
// # Secrets
//
// A DSN is never logged and never appears in an error: errors of a store made by [Open]
// have its password removed, and driver messages go to [Options.Logger] the same way.
package mysqlstore
