// Package mysqlstore keeps ax's durable tasks in a MySQL or MariaDB table: an
// implementation of [store.Store] and [store.SharedStore] on
// github.com/go-sql-driver/mysql.
//
// The table is a journal. The kernel runs durable tasks from memory and records their
// lifecycle here in group commits, many changes per transaction; it reads the table at
// start, to recover what was live, and, when several kernels share it, claims tasks from
// its pool (see "The pool") when the kernel asks.
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
// New tasks go in with a multi-row INSERT of their final rows. Stored tasks are changed
// by one UPDATE per set of rows that write the same values, each ID written once:
//
//	UPDATE <table> SET state = 5, updated_at = 1767225600000,
//	    live_key = IF(unique_until = 0 AND unique_for_ms = 0, NULL, live_key),
//	    version = version + 1 WHERE id IN (X'…', X'…', …) AND fence = 8 AND state <= 4
//	    AND owner IN (0, 12)
//
// (the owner condition: only in a commit's optimistic plan, see "Starts"). The ends of
// a batch are one or a few such sets (one per distinct UpdatedAt, in milliseconds),
// and so are the starts it writes in task rows; the starts of an owner's own stored
// tasks are no task-row write at all, but entries of the owner's start set (see
// "Starts"). A set of fewer than 8 rows, or beyond the 8 largest,
// joins the rows with values of their own (retries with their own due times and
// errors) in one multi-row INSERT … ON DUPLICATE KEY UPDATE whose assignments apply a
// row only when its stored fence is the one the change expects and the task is live.
// A store made by [New], which pays a round trip per statement, writes the rows of a
// batch of several sets with that one upsert. Either way, the count of rows affected
// proves that every row applied. When the batch cannot be applied optimistically (an
// ID exists already, a fence moved, a unique key is taken), the transaction is rolled
// back and planned again from the rows locked with SELECT … FOR UPDATE, so each change
// gets its exact outcome. Deadlocks (1213), lock wait timeouts (1205) and lost
// connections are retried with backoff ([Options.Retries]); a batch whose answer was
// lost is simply committed again, which the [store.Store] contract makes safe. When
// the retries run out, the error wraps [store.ErrOutcomeUnknown] if a try sent COMMIT
// (or a write outside a transaction) and never got its answer, so that it may have
// applied, and [store.ErrStoreUnavailable] otherwise: then nothing applied, since the
// server rolls back the transaction of a connection it loses.
//
// With [Options.DropCompleted], a task that completes in the batch that inserts it (a
// periodic snapshot taken after the task ended) is not written at all; one read of the
// primary key checks that no such ID is stored already.
//
// # Schema
//
// The task table is named by [Options.Table] (validated, never escaped). IDs, kinds and
// keys are binary strings compared byte for byte; times are BIGINT milliseconds since the
// Unix epoch; Timeout is BIGINT nanoseconds; State and Priority are small integers of this
// package's own stable encoding. owner is the epoch of the owner the task belongs to
// (see "Owners"), 0 for none, the pool: [Store.Commit], [Store.Requeue] and the inserts
// of a [store.Change] with Pool write 0.
//
// Besides the primary key (id), two indexes, each for a reason:
//
//   - UNIQUE live_key: a copy of the task's unique key while the task holds it, NULL
//     once the task is terminal (and for tasks without a key), keeps one holder per
//     key. A task with a window (unique_until, unique_for_ms: see "Unique keys with
//     a window") keeps live_key when it ends.
//   - (state, owner, priority, run_at), the state index: the live rows of each owner in
//     the order recovery reads them, so that the live tasks of given owners
//     ([Store.Rescue], [Store.Owners]) are a few ranges of it, one per live state and
//     owner; the due pool tasks of a priority ([Store.Claim]) one range per waiting
//     state, in run_at order; the live rows ([Store.Recover], [Store.Join]) and the dead
//     letters ([Store.DeadLetters]) ranges of state; and the completed rows the
//     retention purge reads, oldest due first (see [Store.PurgeCompleted]).
//
// With [Options.ListIndexes], two more serve the operators' listing
// ([Store.ListTasks]): (kind) and (grp, gkey), the tasks of a kind, of a group or of
// a group's key. Their columns never change after the insert, so they cost an insert
// (and a purge) one entry each and no other write anything.
//
// No other index holds state or updated_at, the columns every state change writes, so
// each write of a task moves at most one secondary index entry:
//
//   - an insert writes the row, its state index entry and its live_key entry (and
//     its entries of the listing's indexes, with Options.ListIndexes);
//   - a start by the task's owner writes no task row at all: it goes to the owner's
//     start set, in the owner row that the commit's renewal rewrites anyway (see
//     "Starts"); a start that rides on an insert, a retry or an end of the same batch,
//     or by no owner, rewrites the row's state, attempt, fence, updated_at and version
//     in place, and moves its state index entry;
//   - an end (Succeeded, Failed, …) rewrites state, updated_at and version in place
//     (last_error too for a failure; attempt and fence too after a start recorded in
//     the set) and moves its state index entry from the live state to the terminal
//     one; it sets live_key to NULL (unless the task has a window), which moves that
//     entry only for a task that held a key;
//   - a retry moves the state index entry (state and run_at), and so does a claim
//     (owner, state, attempt, fence, updated_at), a rescue (owner, fence) and a
//     requeue.
//
// Each index costs every write that changes its columns a delete-mark and an insert (the
// server purges the marked entries later), so the schema has no index that a state
// change would move for nothing: finished rows are found by the state index alone.
//
// grp (VARBINARY(64)) and gkey (VARBINARY(255)) hold the task's group and key
// ([store.StoredTask] Group and Key, from DurableTask.Group and Key), ” for none:
// written by inserts only, returned by every read of tasks, in no index but the
// listing's (grp, gkey). The store only keeps them: it enforces no group
// limit. Each kernel enforces its own Config.Groups on the tasks it runs, so the limits
// are per process: N processes with PerKey.Concurrency 5 run up to 5N tasks of a key at
// once. headers (BLOB) holds [store.StoredTask] Headers (a trace context, see
// kernel.Hooks), NULL for none: written by inserts only, in no index.
//
// result (MEDIUMBLOB, NULL for none) holds [store.StoredTask] Result, written by the
// end that carries it ([Options.MaxResult]), and history (MEDIUMBLOB) the task's
// attempt records ([store.Attempt]) but the last one's when the row reproduces it:
// started_at (BIGINT, unix ms) and last_owner (BINARY(64): written in place) hold that record's
// start and owner, and its number, end, outcome and error are the row's attempt,
// updated_at, state and last_error (none for a success).
// A change that ends an attempt writes started_at (0 when its record is not the
// row's); every other record (a retry's, an interrupted attempt's, or one the row
// does not reproduce) is appended by the write of its change, in SQL (CONCAT, then
// SUBSTRING_INDEX keeps the last [Options.AttemptsKept]), without reading the row,
// through a CASE on id over at most 128 rows. So a task that succeeds at its first
// attempt writes no history, and the ends of tasks started in one commit share their
// values: one UPDATE … WHERE id IN (…). [Store.Requeue] moves the implicit record into
// history. None of them is in an index; only [Store.Get] and [Store.LookupTask] read
// them.
// The store's throughput is in docs/performance.md.
//
// # Unique keys with a window
//
// unique_until (BIGINT ms, 0 for none) and unique_for_ms (BIGINT, 0 for none) hold a
// task's window ([store.StoredTask] UniqueUntil and UniqueFor), written by inserts
// only. An end keeps live_key of a row with a window, so that the UNIQUE index goes on
// refusing the key; the window ends at GREATEST(unique_until, updated_at +
// unique_for_ms). An insert that meets the key (a duplicate entry, then the holder
// read under lock) is refused while the holder is live or its window runs at the
// insert's UpdatedAt; otherwise the holder's live_key is set to NULL in the same
// transaction, before the INSERT. [Store.Requeue] frees the keys of windows over at
// its now the same way, and [Store.PurgeCompleted] deletes no row whose window ends
// after its cutoff.
//
// # Transactional submit
//
// [Store.SubmitTx] writes pool rows (owner 0, Queued or Delayed, fence 1) with the
// caller's transaction: the tasks without a key in one multi-row INSERT, each keyed
// task in an INSERT of its own, due times and states computed by the server from
// UTC_TIMESTAMP(6), the clock claims compare due times with. A held key is read with
// LOCK IN SHARE MODE (the shared locks of the transactions that race for a key never
// deadlock one another); a call of several tasks runs inside a SAVEPOINT, rolled back
// to on a refusal. Nothing else is written: no owner row, no lease, so the caller's
// transaction locks only the rows it inserts (and a holder whose window it ends).
// [Store.Notify] wakes the claimers of this process's kernels ([store.PoolWaker]).
//
// Six more tables are named after it, which is why a table name is at most [TableMax]
// bytes:
//
//   - <table>_owners: one row per membership: epoch (primary key), name, lease_us,
//     expires_at (DATETIME(6), UTC on the server's clock), ended, set when the owner
//     left, was replaced by a new epoch of its name, or had tasks rescued, conn_id,
//     the CONNECTION_ID() of the row's last writer (see "Stuck transactions"), and the
//     owner's start set (see "Starts"): started (BLOB, its first page) and started_v
//     (a count of the set's writes).
//   - <table>_starts: the further pages of the start sets that outgrow one page:
//     epoch and page (primary key), entries (BLOB). Empty unless an owner runs more
//     tasks at once than a page holds.
//   - <table>_leases: one row per named lease while granted: name (primary key),
//     holder, fence and expires_at.
//   - <table>_epochs: an AUTO_INCREMENT counter. Each epoch and each named-lease fence is
//     the value of a row inserted into it, so none is handed out twice; rows below the
//     latest are deleted now and then. InnoDB keeps the counter across restarts on the
//     servers the store supports (MariaDB >= 10.2.4, MySQL >= 8.0), and the latest row
//     is never deleted, so even a server that recomputes the counter from the rows at
//     restart does not hand out an epoch again.
//   - <table>_sched: one row per durable schedule ([store.ScheduleStore]): name
//     (primary key), spec, next_fire (unix ms, NULL when the schedule has no next
//     occurrence), last_fire (unix ms: the latest target of the last fire with
//     occurrences, whose state OverlapSkip reads), paused, version, fire_token (the
//     random token of the last fire, by which a fire retried after a lost answer finds
//     out whether it committed) and updated_at. A fire is one transaction: UPDATE … SET next_fire = <new> … WHERE name
//     = <name> AND paused = 0 AND next_fire <=> <expected>, then, only when it changed
//     the row, the INSERT of the occurrence tasks, whose IDs (sched/<name>/<unix ms>)
//     make a second insert of an occurrence a no-op.
//   - <table>_stats: the figures each owner's kernel published last
//     ([store.ReplicaStore]): epoch (primary key), name, figures (JSON of
//     [store.ReplicaFigures]) and published_at. Written by one upsert per publication,
//     on the kernel's schedule, never in a commit, and read joined with the live owner
//     rows without locking them. Rows published last more than [store.ReplicaKeep] ago
//     are deleted now and then.
//
// [Store.Migrate] creates missing tables, and adds the owner column (an in-place ALTER
// TABLE where the server can) and the index (state, owner, priority, run_at) (an online
// index build, which reads the whole table) to a task table that lacks them, dropping the
// index (state, priority, run_at) it replaces, the grp and gkey columns (in place where
// the server can; the rows already stored get ”, no group), the unique_until and
// unique_for_ms columns (0), the headers, result and history columns (NULL), and the
// started_at (0) and last_owner (empty) columns to a task table that lacks them, the conn_id, started and started_v columns to an owner table that lacks them
// (in place: MariaDB >= 10.3 and MySQL >= 8.0 add a column with a default without
// copying the table), and creates <table>_starts. It drops the index
// (state, updated_at) that task tables of earlier versions have: ALTER TABLE … DROP KEY
// state_updated_at, ALGORITHM=INPLACE, LOCK=NONE, a change of the table's metadata that
// neither copies the table nor blocks its readers and writers. Stores of earlier
// versions work without that index, their purge reading the completed rows instead.
// Every index change of Migrate is online (ALGORITHM=INPLACE, LOCK=NONE, which MariaDB
// >= 10.6 and MySQL >= 8.0 do). Stores of this version need it: migrate before they
// start.
//
// # Owners
//
// The store implements [store.SharedStore]: several kernels, in one process or many,
// share the tables, each as an owner with a lease. Every lease runs on the database's
// clock (UTC_TIMESTAMP(6)), never a process's, and so do due times: the store is a
// [store.Clock] ([Store.Now]), and the kernels store and claim tasks' RunAt on the
// database's clock. So the kernels' clocks need not agree.
//
// [Store.Join] takes an epoch from the counter, which is above the epoch part of every
// live task's fence (a counter found empty beside stored tasks is first raised above
// them, with one read of the live rows' index range), ends the earlier epochs of the
// same name, whose tasks become rescuable at once, and inserts the owner row. A kernel with no Config.Owner
// joins under a default name held per host, user and store (see kernel.Config.Owner),
// the store being told apart by [Store.Identity]: the server's @@hostname and @@port,
// the database and the table, so that processes reaching one table through other
// addresses or pools agree. A process restarted after a crash so takes its
// predecessor's name, and its Join hands it the dead owner's tasks without waiting out
// the lease. [Store.CommitAs] is
// [Store.Commit] whose transaction first renews the owner's lease:
//
//	UPDATE <table>_owners SET expires_at = UTC_TIMESTAMP(6) + INTERVAL lease_us MICROSECOND,
//	    conn_id = CONNECTION_ID()
//	WHERE epoch = ? AND name = ? AND ended = 0 AND expires_at > UTC_TIMESTAMP(6)
//
// When it changes no row (and a read confirms that the lease ended), the transaction is
// rolled back and the call returns an error wrapping [store.ErrLeaseLost]. The renewal
// costs a batch one statement more; a batch that Commit sends as one statement without a
// transaction (one INSERT, or one UPDATE of one row) costs BEGIN and COMMIT as well. A
// store made by [Open] sends START TRANSACTION, the renewal, the batch's writes and
// COMMIT as one multi-statement query on a pool of its own: one round trip a batch
// whatever its statements, where a store made by [New] takes one per statement, plus
// BEGIN and COMMIT. Each statement whose count of rows the plan knows (the renewal's
// one, an UPDATE's rows) is checked before the next one runs. When the next one is an
// UPDATE that must change rows, its WHERE checks the count,
//
//	UPDATE <table> SET … WHERE id IN (X'…', …) AND fence = 1 AND state <= 4
//	    AND owner IN (0, 12) AND ROW_COUNT() = 1
//
// (ROW_COUNT() is still the statement before's, a constant the server evaluates
// once: a count that differs makes the UPDATE change no row, and its own count is
// checked in turn); otherwise, and after the last one, a guard stops the query before
// COMMIT when the count differs:
//
//	SET @ax_rows = REGEXP_INSTR('', IF(ROW_COUNT() = 1, 'a', '('))
//
// (a pattern the server cannot compile: an error). So a commit of a renewal, the
// UPDATEs of its ends and an INSERT has one guard, before the INSERT (which stops the
// query by itself on a duplicate ID). When a check stops it (the renewal changed no
// row, a fence moved), or a statement fails, the transaction is rolled
// back and the batch planned again from locked rows, whose transaction renews with
// the check above. A CommitAs of no changes is the UPDATE alone: the heartbeat of an idle
// owner. A batch retried after a lost answer renews again, which is harmless; when its
// lease ended in between, the error wraps [store.ErrOutcomeUnknown] as well as
// ErrLeaseLost, since the first try may have applied. A batch that changes stored
// tasks renews with the UPDATE shown in "Starts", which also writes the owner's start
// set and checks the version it was planned with.
//
// # Starts
//
// A task runs only once its start is committed, and after a crash a task that was
// started counts an attempt, so every start is stored; but a start written in the
// task row rewrites the row and moves its state index entry, which the end moves
// again. So the start of a task by its owner is recorded
// in the owner's start set instead, which the owner row holds: the row every commit of
// the owner rewrites anyway to renew the lease. An entry holds the task's ID, the
// fence its row has (pre), and the attempt's fence, attempt and UpdatedAt. A page
// holds its entries in ID order, each ID as the length of the prefix it shares with
// the one before and the rest, each UpdatedAt as the difference from the one before:
// the entries of a kernel's tasks, whose IDs share a prefix, take under 10 bytes
// each. A page holds entries of up to 8 KiB as counted at their longest (51 to 56
// bytes for an ID of 36, 150 to 160 a page; page 0 in the started column, the others
// in <table>_starts), so a set is as large as the owner's running tasks.
//
// An entry speaks for its task while the task row is still where the start found it:
// live, its owner the set's owner, its fence pre. Every read of tasks ([Store.Get],
// [Store.Recover], [Store.States], [Store.Rescue], the locking plan of a commit)
// reads the rows, then the sets of their owners, and shows a row an entry speaks for
// as the entry says: Running, with the entry's attempt, fence and UpdatedAt. Get,
// Recover and States read both in one read-only transaction (one snapshot). Any write
// that moves a row on (an end, a retry, a rescue, a claim) changes its fence or makes
// it terminal, so an entry left behind says nothing; the owner drops the entry in the
// same commit anyway.
//
// What a commit writes, for owner o:
//
//   - a start of a task row of o (live at the change's fence), with no other change of
//     it in the batch: an entry of o's set, nothing in the task row;
//   - a change of a task in the set (an end, a retry): the row, whole (state, attempt
//     and fence from the set too), checked against the row's stored fence; the entry
//     is dropped;
//   - a claim ([Store.Claim]) and an adopt (an OpStart with [store.Change] Adopt) start
//     the task in its row, as the write that gives the row its owner, and so does a
//     start in the batch that inserts the task: one row write either way. A later
//     start of such a task by its owner (after a retry) goes to the set;
//   - a commit by no owner ([Store.Commit]) writes starts in the rows.
//
// The store keeps each owner's set in memory between its commits, together with the
// started_v it was read or written at, and plans a batch with it. The optimistic plan
// writes the set's changed first page and the new started_v in the renewal itself:
//
//	UPDATE <table>_owners SET expires_at = …, conn_id = CONNECTION_ID(),
//	    started = X'…', started_v = 8
//	WHERE epoch = ? AND name = ? AND ended = 0 AND expires_at > UTC_TIMESTAMP(6)
//	  AND started_v = 7
//	  AND (SELECT COUNT(*) FROM <table> FORCE INDEX (PRIMARY) WHERE owner = ?
//	       AND state <= 4 AND (id IN (X'…', …) AND fence = 1 OR …)
//	       LOCK IN SHARE MODE) = 100
//
// So a batch of starts alone is START TRANSACTION, that UPDATE, its guard and COMMIT:
// one round trip and one row written, where starts in the task rows rewrite a row and move an
// index entry each. The count checks that the rows started for the first time are o's,
// live, at the fences the plan assumed (a read of the primary key per start, no
// write); its shared locks make a writer that holds one of those rows finish first,
// and one that comes later wait for this commit and then read the set. When the
// renewal changes no row (the lease ended, another commit of o wrote the set, or a
// row is not where the plan assumed), the transaction is rolled back and the batch
// planned again from locked rows: the renewal, a read of o's set, the rows locked with
// SELECT … FOR UPDATE and seen through the sets of their owners, then the writes,
// and an UPDATE of o's row for the set. The further pages of a set are written with
// one INSERT … ON DUPLICATE KEY UPDATE of the changed pages in the same transaction.
// A commit whose outcome is unknown drops the set from memory; the next one reads it.
// The updates of an optimistic plan also require owner IN (0, o): a row of another
// owner may be in that owner's set, which only the locking plan reads.
//
// A rescue reads the sets of the ended owners it locked, returns the tasks they record
// Running at their attempt (so they count it, as any attempt that could have begun),
// and the others as they wait, their attempt unchanged: a task whose start was never
// committed never counts an attempt, and no task becomes a dead letter for work that
// never began. The rescue's UPDATE writes the Running state, attempt and UpdatedAt of
// the started ones into their rows with the new fence. A stale owner cannot record a
// start: its renewal fails, and with it the whole commit. An owner restarted under its
// name gets a new epoch and an empty set; the old epoch's set stays with its ended
// row until a rescue (the restarted owner's, at once) has taken its tasks, and is
// deleted with that row. [Store.RunNow] reads the caller's set and leaves a task it
// records alone.
//
// Stores of versions that write starts in the task rows do not read the sets: run one
// version on a table at a time (a rolling upgrade may let an old rescuer take a task
// started in a set as never started, which runs it again without counting the
// attempt).
//
// # Inserts beside commits
//
// [Store.InsertAs] ([store.InsertStore]) stores new tasks of an owner without the
// renewal: the kernel sends its acknowledged inserts there while its group commit
// (CommitAs, which holds the owner row from its renewal to its end) is in flight, on
// a connection of their own, so that starts and ends never wait behind a large insert
// and the server runs the two on two threads. A batch of inserts without a unique key
// is one query on the multi-statement pool, COMMIT included:
//
//	SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION;
//	INSERT INTO <table> (…, owner) VALUES (…), …;
//	SELECT COUNT(*) INTO @ax_insert_live FROM <table>_owners
//	    WHERE epoch = ? AND name = ? AND ended = 0 AND expires_at > UTC_TIMESTAMP(6);
//	DELETE FROM <table> WHERE id IN (…) AND @ax_insert_live = 0;
//	COMMIT
//
// The SELECT is a consistent read: it takes no lock, so it never waits for the owner
// row a commit holds. It comes after the INSERT, and a rescue locks an ended owner's
// row before it reads that owner's task rows with SELECT … FOR UPDATE, which waits
// for rows another transaction inserted and has not committed: so either the SELECT
// reads the owner live before the rescue locked its row, and the rescue then finds
// the inserted rows (committed, after its wait), or it reads the row as the rescue
// found it, ended or its lease over (no renewal commits while the rescue holds the
// row), and the DELETE undoes the inserts before the COMMIT. No inserted task is left
// with an owner that no rescue takes. The server runs the query to its end whatever
// becomes of the client, so a process stopped meanwhile leaves no transaction open.
// Ownership is checked again where it matters, when a task starts: a start is a
// commit of the owner, with its renewal. When the DELETE undid the batch, a statement
// failed (a duplicate entry: the query stops there, and a ROLLBACK follows), or the
// batch does not allow it (a unique key, a store made by [New], a batch beyond the
// statement budget), the batch goes the way of CommitAs, which reports each change's
// outcome, and [store.ErrLeaseLost] for an ended owner. Inserts cost a commit one
// round trip that way, and no renewal.
//
// # Rescue and lock order
//
// Every transaction that changes stored tasks for an owner locks rows in one order:
// owner rows first, then task rows (an InsertAs locks only the rows it inserts, see
// "Inserts beside commits"). CommitAs and [Store.RequeueAs] lock their own owner row with the
// renewal, then their task rows. [Store.Rescue] runs at read committed (no gap locks) and
//
//  1. renews the rescuer's lease, locking its row (a try after a kill first waits for
//     the rows of the owners whose holders it killed: see "Stuck transactions");
//  2. locks the rows of ended owners with SELECT … FOR UPDATE SKIP LOCKED: an owner whose
//     row is locked is in a commit, and is left for a later rescue (but see "Stuck
//     transactions");
//  3. reads the start sets of those owners (see "Starts"), locks the live tasks of
//     those owners and the Running tasks of no owner with
//     SELECT … FOR UPDATE on ranges of the index (state, owner, …) (forced, so that it
//     never scans and waits for the rows of other owners), in recovery order; with a
//     limit, every candidate is locked until the transaction ends, not only the first
//     limit. The waiting tasks of no owner are the pool's (see "The pool"): a rescue
//     neither takes nor locks them;
//  4. takes a new epoch, above the epoch part of those tasks' fences, and gives them
//     the rescuer as owner and the epoch's first fence (and to those a set records
//     started, the state Running and the set's attempt and UpdatedAt);
//  5. deletes the ended owners left without a live task (and their sets' further
//     pages), and marks the others ended.
//
// So a commit by an ended owner either renewed (and committed) before the rescue locked
// its row, and the rescue then sees it live and leaves its tasks alone, or it waits for
// the rescue and then finds its row ended (or gone) and applies nothing. A rescue never
// overwrites a completion that landed, and a completion never lands on a rescued task:
// its fence is stale. A rescue retried after a lost answer also returns the tasks an
// earlier try of the same call took.
//
// # The pool
//
// A task of owner 0 is in the pool: inserted by [Store.Commit] or [Store.Requeue], or by
// [Store.CommitAs] with [store.Change] Pool. [Store.Claim] takes due pool tasks for an
// owner in one transaction at read committed, which finds its candidates with one
// consistent read (no lock), a UNION ALL of one part per waiting state (Delayed, Queued,
// Retrying) and wanted priority:
//
//	(SELECT id FROM <table> WHERE state = ? AND owner = 0 AND priority = ? AND run_at <= ?
//	  AND kind IN (…) ORDER BY run_at, id LIMIT 2*want)
//
// Each part is one range of the index (state, owner, priority, run_at) read in its order
// (the index ends with the primary key, id), so it stops after 2*want rows: kind is not
// in the index, so rows of other kinds on the way are read and passed over. The
// transaction
//
//  1. renews the owner's lease, locking its row, as CommitAs does (owner rows before
//     task rows);
//  2. reads the candidates' IDs as above, then locks them by primary key alone:
//     SELECT … FORCE INDEX (PRIMARY) WHERE id IN (…) AND owner = 0 AND state IN
//     (waiting) AND run_at <= ? FOR UPDATE SKIP LOCKED, which locks exactly the rows it
//     returns (a locking read of a range would also lock the index record past its end,
//     which may be another owner's task) and skips the rows another claim (or a commit)
//     holds; of the locked rows of a priority, the first Want by run_at and id are
//     claimed, and the others stay locked until the transaction ends; a priority of Want
//     0 has no part. With [store.ClaimRequest] Max, every priority has a part of LIMIT
//     2*Max, and the shares a priority cannot fill go to the others, High first
//     (storekit.ClaimShares), so one claim fills the caller's free slots;
//  3. takes a new epoch, above the owner's and the epoch part of the claimed rows'
//     fences, and starts them with one UPDATE … WHERE id IN (…) AND owner = 0 AND state
//     IN (waiting): owner, state Running, attempt + 1, the epoch's first fence,
//     updated_at; the returned tasks are the locked rows with those values;
//  4. reads next, the earliest run_at of the waiting pool tasks of the kinds left, with
//     one consistent read: MIN over a UNION ALL of (SELECT run_at … ORDER BY run_at
//     LIMIT 1) per waiting state and priority, each the first row of the kinds in one
//     range of the index. Rows that another claim has locked but not yet committed still
//     count, so next may be due when nothing is left: the caller claims again and finds
//     nothing.
//
// So a claim costs one round trip for SET TRANSACTION ISOLATION LEVEL READ COMMITTED,
// START TRANSACTION and the renewal (one multi-statement query, on a store made by
// [Open]; three round trips on a store made by [New]), then the read of candidates,
// the locking read, the epoch (one INSERT, two when the counter must be raised), the
// UPDATE, the read of next and COMMIT: seven round trips, four when no row is due,
// three when no priority is wanted, and one (the renewal) for no Kinds; a retry reads the rows of each earlier try
// as well. A claim locks no row but those it may take: two claims never wait for each
// other's task rows, nor for a commit that holds a pool row, and no commit waits for a
// claim's locks but on the pool rows the claim takes. A rescue takes only the Running
// rows of no owner and the rows of ended owners, which no claim locks. A claim retried
// after a lost answer reads, by primary key, the rows an earlier try of the call gave
// its fence, and returns them as well, counted against Want.
//
// An adopt (an OpStart with [store.Change] Adopt, by which the kernel that put a task
// in the pool starts it itself) rides in a group commit: one UPDATE by primary key for
// the adopts that share their values (owner, fence, state, attempt, updated_at), found
// by id IN (…) AND owner = 0 AND the fence AND a waiting state, so that a row a claim
// took is not touched, and the batch is planned again from locked rows, which refuses
// that adopt with [store.ErrStaleFence]. That plan reads the adopted rows with SELECT
// … FOR UPDATE SKIP LOCKED: a row another owner's claim holds (a consistent read tells
// it from an absent one) refuses its adopt too, so the UPDATE that found such a row
// waits at most [Options.LockWait], once. No epoch: the adopted attempt's fence is the
// pool row's plus one.
//
// [Store.RunNow] makes a waiting task of the pool or of its owner due in one
// transaction at read committed: the renewal (owner row first), then one UPDATE by
// primary key of run_at and updated_at, conditioned on the state, the owner (0 or the
// caller) and a later run_at, and, when that changed no row, one locking read by
// primary key that tells whether the task waits there due already. A claim that holds
// the row makes it wait for that claim's end, and then find the row Running.
//
// # Stuck transactions
//
// A process stopped between the statements of a transaction (SIGSTOP, a long GC or VM
// freeze) or cut off by a partition that leaves its TCP connection half open holds the
// transaction's locks until the server notices, which for an idle connection is
// wait_timeout (8 h by default). When that transaction renewed an owner's lease, step 2
// of every rescue would skip the owner's row for as long. So a rescue also reads,
// without locking, the owners whose lease ended at least one lease ago; when it could
// not lock one of them, it rolls back before it locks any task, and looks for the
// connection that holds the row:
//
//   - every statement that writes an owner row (the renewal, Join, Leave, a rescue's
//     marking) sets conn_id = CONNECTION_ID(), so the newest version of the row, read at
//     READ UNCOMMITTED, names its writer;
//   - that version must differ from the committed one the rescue read: then it is not
//     committed, and its writer is the transaction that holds the row's lock (a
//     transaction that only locked the row, such as another rescue, wrote nothing, and
//     names nobody);
//   - even that version's lease ended at least a lease ago: a renewal in a transaction
//     open for over two leases;
//   - information_schema.PROCESSLIST lists the connection, in the store's database, as
//     idle (Sleep) for at least a lease and at least a second.
//
// Then it runs KILL CONNECTION on it: the server rolls the transaction back and frees
// its locks, and the rescue's next try waits for the owner's row, before it locks its
// own (so that its own renewals never queue behind the wait), and takes its tasks.
// The stopped process, once resumed, finds its connection dead: its commit's outcome is
// unknown, and its retry is refused with [store.ErrLeaseLost], as for any lost lease.
// Each kill is counted ([Store.Kills]) and logged as a warning. Killing costs nothing
// but that commit: a connection ID names one connection while it lives (IDs are unique
// among the server's connections), the holder's lease is over, and the store retries
// any statement whose connection was killed. So the tasks of an owner stopped inside a
// transaction run again within about two leases and a quarter, instead of Lease +
// Lease/3.
//
// A transaction of a live owner holds the owner's row from its renewal to its end, so
// the owner's next renewal waits for it. Such a transaction waits for a task row only
// when a transaction of another owner holds that row: a row or unique key another
// commit holds, or, once per commit, a pool row it adopts that a claim holds (see "The
// pool"); never a rescue's (a rescue takes the rows of ended owners alone). Each such
// wait is bounded by [Options.LockWait] (innodb_lock_wait_timeout, set on every
// connection of a store made by [Open]), after which the transaction rolls back,
// releasing the owner's row, and is retried: a transaction stuck in one process costs
// the other owners a failed commit at worst, never their leases. The bound costs no
// round trip of a commit: the driver sets it once per connection.
//
// KILL needs no privilege for connections of the same user; killing another user's
// connection takes CONNECTION ADMIN (MariaDB) or CONNECTION_ADMIN (MySQL), and a user
// sees other users' connections in PROCESSLIST only with PROCESS. Give every process
// sharing the tables the same user, or those privileges. A rescue that already waits for
// a task row that such a transaction holds (which a rescue locks only when the
// transaction took it from an ended owner, or from no owner) waits until
// innodb_lock_wait_timeout, and its next try kills. On MariaDB, idle_transaction_timeout
// ends such transactions too, for every client of the server.
//
// # Named leases
//
// [Store.AcquireLease] locks the lease's row (SELECT … FOR UPDATE, read committed) and,
// when no other holder's grant is live, writes a grant with a fence from the epoch
// counter, so the fences of a name only grow. [Store.RenewLease] is one UPDATE of a live
// grant, [Store.ReleaseLease] one DELETE of it.
//
// # Servers
//
// The store needs MariaDB >= 10.6 or MySQL >= 8.0, for SKIP LOCKED (in [Store.Rescue] and
// [Store.Claim]).
//
// Clusters that certify writes at commit (Galera: MariaDB Cluster, Percona XtraDB
// Cluster; MySQL Group Replication in multi-primary mode) need a single writer for
// every call of every kernel: Group Replication's single-primary mode, or a proxy that
// sends all writes to one Galera node. Row locks there are local to the node that takes
// them, and SELECT … FOR UPDATE is not certified across nodes, so the serialization the
// store relies on does not happen: two nodes lock the same owner or task rows at once,
// and the loser learns it only at COMMIT, as a certification failure (reported as a
// deadlock and retried), a storm of them when every owner's heartbeat and every rescue
// races. And each node hands out AUTO_INCREMENT values of its own residue
// (auto_increment_increment and _offset), so epochs and lease fences taken on different
// nodes do not grow in the order they are handed out: a lease granted after another
// could get the smaller fence.
//
// # Secrets
//
// A DSN is never logged and never appears in an error: errors of a store made by [Open]
// have its password removed, and driver messages go to [Options.Logger] the same way.
package mysqlstore
