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
// [Store.Commit] applies a batch in one transaction with a few multi-row statements: an
// UPDATE joined to the batch's rows for state changes, whose WHERE clause checks each
// task's fence and liveness (the number of rows it changed is verified), and multi-row
// INSERTs for new tasks. Several changes to one task in a batch (insert, start, succeed)
// become one row write. When the batch cannot be applied optimistically (an ID exists
// already, a fence moved, a unique key is taken), the transaction is rolled back and
// planned again from the rows locked with SELECT … FOR UPDATE, so each change gets its
// exact outcome. Deadlocks (1213), lock wait timeouts (1205) and lost connections are
// retried with backoff ([Options.Retries]); a batch whose answer was lost is simply
// committed again, which the [kernel.Store] contract makes safe.
//
// # Schema
//
// One table, named by [Options.Table] (validated, never escaped). IDs, kinds and keys are
// binary strings compared byte for byte; times are BIGINT milliseconds since the Unix
// epoch; Timeout is BIGINT nanoseconds; State and Priority are small integers of this
// package's own stable encoding. A unique index on live_key, a copy of the task's unique
// key that is NULL once the task is terminal, keeps one live task per key. An index on
// (state, priority, run_at) serves recovery and one on (state, updated_at) serves dead
// letters and retention.
//
// # Secrets
//
// A DSN is never logged and never appears in an error: errors of a store made by [Open]
// have its password removed, and driver messages go to [Options.Logger] the same way.
package mysqlstore
