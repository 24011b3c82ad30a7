package mysqlstore

import "strings"

// The tables of a store: their names, schemas and columns (see doc.go, "Schema").

// Suffixes of the tables named after Options.Table.
const (
	ownersSuffix = "_owners"
	leasesSuffix = "_leases"
	epochsSuffix = "_epochs"
	startsSuffix = "_starts"
)

// schema is the task table's definition; %s is the quoted table name. Do not renumber
// the state and priority codes (stateCode, priorityCode): they are stored.
const schema = `CREATE TABLE IF NOT EXISTS %s (
	id           VARBINARY(128)  NOT NULL,
	kind         VARBINARY(255)  NOT NULL,
	payload      LONGBLOB        NOT NULL,
	priority     TINYINT UNSIGNED NOT NULL,
	run_at       BIGINT          NOT NULL COMMENT 'unix ms',
	timeout_ns   BIGINT          NOT NULL,
	max_attempts INT             NOT NULL,
	attempt      INT             NOT NULL,
	fence        BIGINT UNSIGNED NOT NULL,
	unique_key   VARBINARY(255)  NOT NULL,
	live_key     VARBINARY(255)  NULL COMMENT 'unique_key while held: live, or ended in its window',
	state        TINYINT UNSIGNED NOT NULL,
	last_error   BLOB            NOT NULL,
	created_at   BIGINT          NOT NULL COMMENT 'unix ms',
	updated_at   BIGINT          NOT NULL COMMENT 'unix ms',
	version      BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'bumped by every write',
	` + ownerColumn + `,
	` + groupColumn + `,
	` + keyColumn + `,
	` + uniqueUntilColumn + `,
	` + uniqueForColumn + `,
	` + headersColumn + `,
	` + resultColumn + `,
	` + historyColumn + `,
	` + startedAtColumn + `,
	` + lastOwnerColumn + `,
	PRIMARY KEY (id),
	UNIQUE KEY live_key (live_key),
	` + ownerIndex + `
) ENGINE=InnoDB`

// The result and history columns of a task (store.StoredTask.Result and History),
// which Migrate adds to a task table that lacks them. history holds the attempt
// records (see history.go); both are NULL until a change writes them.
const (
	resultColumn  = "result MEDIUMBLOB NULL COMMENT 'StoredTask.Result, set by succeed and fail'"
	historyColumn = "history MEDIUMBLOB NULL COMMENT 'StoredTask.History: attempt records (history.go)'"
	// startedAtColumn: the Start of the last attempt's record, kept implicitly (history.go).
	startedAtColumn = "started_at BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms; 0: no implicit attempt record'"
	// lastOwnerColumn: fixed-size (padded with 0 bytes), so that an end writes it in place.
	lastOwnerColumn = "last_owner BINARY(64) NOT NULL DEFAULT '' COMMENT 'the owner of the implicit attempt record'"
)

// stateUpdatedIndex is the index (state, updated_at) of the task tables of earlier
// versions, which Migrate drops: the state index serves what it served (see doc.go,
// "Schema"), and without it an end moves one secondary index entry, not two.
const stateUpdatedIndex = "state_updated_at"

// The owner column and the index that holds it, which Migrate adds to a task table that
// lacks them. The index replaces (state, priority, run_at): owner comes second, so that
// the live rows of given owners are a few ranges of it, and every column of it but owner
// changes with the state anyway, so that it costs a state change nothing more.
const (
	ownerColumn    = "owner BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'epoch of the owner, 0 for none'"
	ownerIndexName = "state_owner_priority_run_at"
	ownerIndex     = "KEY " + ownerIndexName + " (state, owner, priority, run_at)"
	ownerIndexOld  = "state_priority_run_at"
)

// The group and key columns of a task (store.StoredTask.Group and Key), which Migrate
// adds to a task table that lacks them. Written by inserts only: they never change.
// Only the listing's index (grp, gkey) holds them, with [Options.ListIndexes].
const (
	groupColumn = "grp VARBINARY(" + groupMaxStr + ") NOT NULL DEFAULT '' COMMENT 'group (DurableTask.Group), empty for none'"
	keyColumn   = "gkey VARBINARY(" + keyMaxStr + ") NOT NULL DEFAULT '' COMMENT 'key within the group (DurableTask.Key)'"
	groupMaxStr = "64"  // store.GroupNameMax
	keyMaxStr   = "255" // store.GroupKeyMax
)

// The window of a task's unique key (store.StoredTask.UniqueUntil and UniqueFor), which
// Migrate adds to a task table that lacks them. Written by inserts only. A row with a
// window keeps live_key when it ends (see keyAtEnd); an insert that meets it after its
// window frees it (see freeKeys).
const (
	uniqueUntilColumn = "unique_until BIGINT NOT NULL DEFAULT 0 COMMENT 'unix ms; 0: none'"
	uniqueForColumn   = "unique_for_ms BIGINT NOT NULL DEFAULT 0 COMMENT 'window after the end, ms; 0: none'"
)

// keyAtEnd is the value of live_key when a task ends: NULL (the key is free) unless the
// row has a window, which holds the key on.
const keyAtEnd = "IF(unique_until = 0 AND unique_for_ms = 0, NULL, live_key)"

// windowEnd is the SQL of store.StoredTask.KeyHeldUntil of a row, in unix ms (0 without
// a window).
const windowEnd = "GREATEST(unique_until, IF(unique_for_ms > 0, updated_at + unique_for_ms, 0))"

// heldWindowEnd is windowEnd of the rows named h.
var heldWindowEnd = strings.NewReplacer("unique_until", "h.unique_until", "unique_for_ms", "h.unique_for_ms", "updated_at", "h.updated_at").Replace(windowEnd)

// headersColumn holds a task's headers (store.StoredTask.Headers), NULL for none:
// each pair, by key, as a length-prefixed key and value (encodeHeaders). Migrate adds
// it to a task table that lacks it. Written by inserts only: it never changes, and no
// index holds it.
const headersColumn = "headers BLOB NULL COMMENT 'StoredTask.Headers, NULL for none'"

// ownersSchema is the owner table: one row per membership ([Store.Join]) until
// [Store.Rescue] forgets it. Times are UTC on the server's clock (UTC_TIMESTAMP(6)).
const ownersSchema = `CREATE TABLE IF NOT EXISTS %s (
	epoch      BIGINT UNSIGNED NOT NULL,
	name       VARBINARY(64)   NOT NULL,
	lease_us   BIGINT          NOT NULL,
	expires_at DATETIME(6)     NOT NULL COMMENT 'UTC, server clock',
	ended      TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT '1: left, replaced or rescued; never renewed again',
	` + connIDColumn + `,
	` + startedColumn + `,
	` + startedVColumn + `,
	PRIMARY KEY (epoch),
	KEY name (name)
) ENGINE=InnoDB`

// connIDColumn is the owner table's record of the connection that last wrote a row,
// which Migrate adds to an owner table that lacks it: every statement that writes an
// owner row sets it to CONNECTION_ID(), so that a rescue can tell which connection holds
// the row in a transaction left open (see freeStuck).
const connIDColumn = "conn_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'CONNECTION_ID() of the last writer'"

// The owner table's columns of the owner's start set (see doc.go, "Starts"), which
// Migrate adds to an owner table that lacks them: started holds page 0 of the set,
// started_v counts the writes of the set (every page of it), by which a commit checks
// that the set it planned with is the stored one.
const (
	startedColumn  = "started BLOB NULL COMMENT 'page 0 of the start set'"
	startedVColumn = "started_v BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'bumped by every write of the start set'"
)

// startsSchema holds the pages of the owners' start sets beyond the first, which
// the owner row holds: rows only of owners with more starts than a page holds.
const startsSchema = `CREATE TABLE IF NOT EXISTS %s (
	epoch   BIGINT UNSIGNED NOT NULL,
	page    INT UNSIGNED    NOT NULL,
	entries BLOB            NULL,
	PRIMARY KEY (epoch, page)
) ENGINE=InnoDB`

// leasesSchema is the named-lease table: one row per name while granted.
const leasesSchema = `CREATE TABLE IF NOT EXISTS %s (
	name       VARBINARY(255)  NOT NULL,
	holder     VARBINARY(64)   NOT NULL,
	fence      BIGINT UNSIGNED NOT NULL,
	expires_at DATETIME(6)     NOT NULL COMMENT 'UTC, server clock',
	PRIMARY KEY (name)
) ENGINE=InnoDB`

// epochsSchema is the counter that hands out epochs and lease fences: each is the
// AUTO_INCREMENT value of a row inserted for it (see nextEpoch).
const epochsSchema = `CREATE TABLE IF NOT EXISTS %s (
	epoch BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
	PRIMARY KEY (epoch)
) ENGINE=InnoDB`

// baseColumns are the task columns every version of the store had; Migrate checks that
// an existing table has them before it adds the others.
const baseColumns = "id, kind, payload, priority, run_at, timeout_ns, max_attempts, attempt, fence, unique_key, state, last_error, created_at, updated_at"

// columns are the task columns in the order scanTask reads them.
const columns = baseColumns + ", grp, gkey, unique_until, unique_for_ms, headers"
