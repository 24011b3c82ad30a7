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
// one more index write. The store's throughput is in docs/performance.md.
//
// # Secrets
//
// A DSN is never logged and never appears in an error: errors of a store made by [Open]
// have its password removed, and driver messages go to [Options.Logger] the same way.
package mysqlstore
