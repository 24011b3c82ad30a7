package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"
	"github.com/go-sql-driver/mysql"
)

// Store is a [store.SharedStore] on MySQL or MariaDB tables. Make one with [New] or
// [Open], create its tables with [Store.Migrate], and Close it when done. It is safe for
// concurrent use.
type Store struct {
	db     *sql.DB // immutable
	ownDB  bool    // immutable; Close closes db (made by Open)
	multi  *sql.DB // immutable; the multi-statement pool of commits (multiTx), made by Open; nil from New
	opts   Options // immutable; defaults resolved
	table  string  // immutable; `name`, quoted for SQL
	owners string  // immutable; the owner table, quoted
	leases string  // immutable; the named-lease table, quoted
	epochs string  // immutable; the epoch counter table, quoted
	sched  string  // immutable; the schedule table, quoted
	// replicas is the table of the figures owners publish (<table>_stats), quoted.
	replicas      string       // immutable
	replicaPruned atomic.Int64 // unix ns of the last delete of old figures (PublishReplica)
	// startsTable is the table of the start sets' pages beyond the owner row's, quoted.
	startsTable string   // immutable
	secrets     []string // immutable; strings removed from every error and log line
	// multiOff is set when the server refused a multi-statement query as unparsable
	// (a proxy that does not take them): commits then go statement by statement.
	multiOff atomic.Bool
	log      *slog.Logger

	closed    atomic.Bool
	base      context.Context    // canceled by Close; bounds the purger's calls
	stop      context.CancelFunc // cancels base
	purgeDone sync.WaitGroup     // the purger

	packetMu sync.Mutex   // serializes reading max_allowed_packet
	packet   atomic.Int64 // max_allowed_packet; 0 until read

	kills atomic.Int64 // connections of stuck transactions killed by rescues (see freeStuck)

	startsState // the start sets of the owners that commit through this store

	wakeMu sync.Mutex    // guards wake
	wake   chan struct{} // closed by Notify; nil until PoolWake makes one
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.SharedStore = (*Store)(nil)
	_ store.PoolWaker   = (*Store)(nil)
)

// New returns a store on db, which the caller keeps owning: Close does not close it. It
// validates opts before anything else and runs no SQL; call [Store.Migrate] before use.
// The store leaves db's settings alone: give it more idle connections than
// database/sql's 2 (db.SetMaxIdleConns; [Open] keeps 32), or a busy store connects
// again for almost every statement.
// Unless Options.Retention is negative, it starts a goroutine that purges completed
// tasks every Options.PurgeInterval; Close stops it.
//
// Statements are built with literal values (hex for strings and bytes), so they cost
// one round trip each whatever the DSN's interpolateParams.
func New(db *sql.DB, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("mysqlstore: New: nil *sql.DB")
	}
	return newStore(db, false, opts, nil), nil
}

// Open opens dsn (a go-sql-driver/mysql DSN, e.g. "user:pass@tcp(127.0.0.1:3306)/db")
// and returns a store that owns the connection pool: Close closes it. It validates opts
// before parsing dsn, and connects lazily: the first call that needs the server (usually
// Migrate) reports an unreachable one. When the DSN sets no dial timeout, Open sets 5 s.
// The password never appears in an error or a log line of the store.
//
// Its group commits go through a second pool on dsn with multiStatements on, used for
// nothing else (see [Store.CommitAs]); [Store.DB] returns the first, dsn as given.
// Each pool keeps up to 32 idle connections, each for up to 5 minutes, where
// database/sql keeps 2: the store has more callers in flight than that, and a pool
// that closes what it cannot keep connects again for almost every statement. Change
// them with [Store.DB]'s SetMaxIdleConns and SetConnMaxIdleTime.
func Open(dsn string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	secrets := dsnSecrets(dsn)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, redact(fmt.Errorf("mysqlstore: Open: %w", err), secrets)
	}
	if cfg.Passwd != "" {
		secrets = append(secrets, cfg.Passwd)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	o := opts.withDefaults()
	cfg.Logger = driverLogger{log: o.Logger, secrets: secrets}
	if _, ok := cfg.Params[lockWaitVar]; !ok {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[lockWaitVar] = strconv.FormatInt(int64((o.LockWait+time.Second-1)/time.Second), 10)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, redact(fmt.Errorf("mysqlstore: Open: %w", err), secrets)
	}
	mcfg := cfg.Clone()
	mcfg.MultiStatements = true
	mconn, err := mysql.NewConnector(mcfg)
	if err != nil {
		return nil, redact(fmt.Errorf("mysqlstore: Open: %w", err), secrets)
	}
	db, mdb := sql.OpenDB(conn), sql.OpenDB(mconn)
	keepIdle(db)
	keepIdle(mdb)
	s := newStore(db, true, opts, secrets)
	s.multi = mdb
	return s, nil
}

// openIdleConns is how many idle connections each pool of a store made by Open
// keeps, and openIdleTime how long one may stay idle. database/sql keeps 2, fewer
// than the store's callers in flight at once (group commits, claims, lease
// renewals, reads, a kernel's tasks reading results): each connection more
// would be made and closed again for almost every statement, a connect and a
// login's CPU on both sides.
const (
	openIdleConns = 32
	openIdleTime  = 5 * time.Minute
)

func keepIdle(db *sql.DB) {
	db.SetMaxIdleConns(openIdleConns)
	db.SetConnMaxIdleTime(openIdleTime)
}

func newStore(db *sql.DB, own bool, opts Options, secrets []string) *Store {
	o := opts.withDefaults()
	base, stop := context.WithCancel(context.Background())
	s := &Store{
		db:     db,
		ownDB:  own,
		opts:   o,
		table:  "`" + o.Table + "`",
		owners: "`" + o.Table + ownersSuffix + "`",
		leases: "`" + o.Table + leasesSuffix + "`",
		epochs: "`" + o.Table + epochsSuffix + "`",
		sched:  "`" + o.Table + schedSuffix + "`",

		startsTable: "`" + o.Table + startsSuffix + "`",
		replicas:    "`" + o.Table + replicasSuffix + "`",
		secrets:     secrets,
		log:         o.Logger,
		base:        base,
		stop:        stop,
	}
	if o.Retention > 0 {
		s.purgeDone.Go(s.purger)
	}
	return s
}

// DB returns the connection pool the store uses.
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.opts.Table }

// MaxPayload returns the payload cap, Options.MaxPayload or its default: a larger payload
// is refused with [store.ErrPayloadTooLarge]. The kernel reads it to refuse an oversized
// durable submit at once, before any write.
func (s *Store) MaxPayload() int { return s.opts.MaxPayload }

// MaxResult implements [store.ResultLimiter]: it returns Options.MaxResult.
func (s *Store) MaxResult() int { return s.opts.MaxResult }

// Close stops the purger and, for a store made by [Open], closes its connection pool.
// Calls after Close fail with [store.ErrStoreClosed]. It is idempotent; calls running
// when it is called finish or fail on their own.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stop()
	s.purgeDone.Wait()
	if s.ownDB {
		var merr error
		if s.multi != nil {
			merr = s.multi.Close()
		}
		return s.wrap("close", errors.Join(s.db.Close(), merr))
	}
	return nil
}

// Drop deletes the store's tables (the task table and those named after it with the
// suffixes _owners, _leases, _epochs, _sched, _starts and _stats) and everything in them: the inverse of
// [Store.Migrate], for tests and benchmarks. It is idempotent (DROP TABLE IF EXISTS).
// Do not call it while a kernel uses the store.
func (s *Store) Drop(ctx context.Context) error {
	if err := s.checkOpen("drop"); err != nil {
		return err
	}
	for _, suffix := range []string{"", ownersSuffix, leasesSuffix, epochsSuffix, schedSuffix, startsSuffix, replicasSuffix} {
		q := "DROP TABLE IF EXISTS `" + s.opts.Table + suffix + "`"
		if err := s.retry(ctx, "drop", func() error { _, err := s.db.ExecContext(ctx, q); return err }); err != nil {
			return err
		}
	}
	return nil
}

// checkPacket reads max_allowed_packet once and checks that it holds an insert of the
// largest payload (hex-encoded, so twice its size).
func (s *Store) checkPacket(ctx context.Context) error {
	s.packetMu.Lock()
	defer s.packetMu.Unlock()
	if s.packet.Load() == 0 {
		var p int64
		err := s.retry(ctx, "read max_allowed_packet", func() error {
			return s.db.QueryRowContext(ctx, "SELECT @@max_allowed_packet").Scan(&p)
		})
		if err != nil {
			return err
		}
		s.packet.Store(max(p, 1))
	}
	if need := int64(2*s.opts.MaxPayload + 64<<10); s.packet.Load() < need {
		return fmt.Errorf("mysqlstore: Options.MaxPayload = %d needs max_allowed_packet >= %d, the server has %d",
			s.opts.MaxPayload, need, s.packet.Load())
	}
	return nil
}

// statementBudget is the size above which a statement is split: half of
// max_allowed_packet, at most 8 MiB.
func (s *Store) statementBudget() int {
	return int(min(8<<20, s.packet.Load()/2))
}

func (s *Store) purger() {
	t := time.NewTicker(s.opts.PurgeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.base.Done():
			return
		case now := <-t.C:
			ctx, cancel := context.WithTimeout(s.base, s.opts.PurgeInterval)
			n, err := s.purgeDue(ctx, now.Add(-s.opts.Retention))
			cancel()
			switch {
			case err != nil && !s.closed.Load():
				s.warn("purge of completed tasks", "err", err)
			case n > 0 && s.log != nil:
				s.log.Debug("mysqlstore: purged completed tasks", "table", s.opts.Table, "rows", n)
			}
		}
	}
}

func (s *Store) warn(msg string, args ...any) {
	if s.log != nil {
		s.log.Warn("mysqlstore: "+msg, append([]any{"table", s.opts.Table}, args...)...)
	}
}

func (s *Store) checkOpen(what string) error {
	if s.closed.Load() {
		return fmt.Errorf("mysqlstore: %s: %w", what, store.ErrStoreClosed)
	}
	return nil
}

// retry runs f until it succeeds, fails for good, or Options.Retries retries of a
// transient failure (deadlock, lock wait timeout, lost connection) are spent. The error
// it returns is wrapped for the caller (see wrap).
func (s *Store) retry(ctx context.Context, what string, f func() error) error {
	unknown := false // a try may have applied
	fail := func(err error) error {
		if unknown && !outcomeUnknown(err) {
			err = fmt.Errorf("%w (after a try whose outcome is unknown: %w)", err, errMaybeApplied)
		}
		return s.wrap(what, err)
	}
	for try := 0; ; try++ {
		err := f()
		if err == nil {
			return nil
		}
		unknown = unknown || outcomeUnknown(err)
		if ctx.Err() != nil || !transient(err) || try >= s.opts.Retries || s.closed.Load() {
			return fail(err)
		}
		s.warn(what+": retrying", "try", try+1, "err", redact(err, s.secrets))
		if err := sleep(ctx, backoff(try)); err != nil {
			return fail(err)
		}
	}
}

func backoff(try int) time.Duration {
	d := 2 * time.Millisecond << min(try, 6) // 2 ms … 128 ms
	return d/2 + rand.N(d/2+1)               // half fixed, half jitter
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lockWaitVar is the session variable that bounds a wait for a row lock
// ([Options.LockWait]).
const lockWaitVar = "innodb_lock_wait_timeout"

// MySQL and MariaDB error numbers the store handles.
const (
	erDupEntry         = 1062
	erLockWaitTimeout  = 1205
	erLockDeadlock     = 1213
	erNoSuchTable      = 1146
	erServerShutdown   = 1053
	erQueryInterrupted = 1317
	erNoSuchThread     = 1094
	erConnectionKilled = 1927 // MariaDB
	erClientInterrupt  = 3169 // MySQL: ER_CLIENT_INTERACTION_TIMEOUT and kin
)

// transient reports whether err is worth a retry: a deadlock, a lock wait timeout, a
// killed or lost connection, or a plan made stale by a concurrent writer.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, errReplan) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erLockWaitTimeout, erLockDeadlock, erServerShutdown, erQueryInterrupted, erConnectionKilled, erClientInterrupt:
			return true
		}
		return false
	}
	return unavailable(err)
}

// unavailable reports whether err means the server could not be reached or the
// connection was lost, so that the outcome of the call is unknown.
func unavailable(err error) bool {
	var (
		me *mysql.MySQLError
		ne net.Error
	)
	switch {
	case errors.As(err, &me):
		return me.Number == erServerShutdown || me.Number == erConnectionKilled
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	default:
		return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
			errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.As(err, &ne)
	}
}

// errMaybeApplied marks an error after which a write may have applied: COMMIT (or a
// write outside a transaction) was sent and its answer never came. The call then
// returns an error wrapping [store.ErrOutcomeUnknown], even when a later try fails
// before it reaches the server.
var errMaybeApplied = errors.New("mysqlstore: the answer of a commit was lost")

// maybeApplied marks err, the failure of a COMMIT or of a write outside a transaction,
// with errMaybeApplied unless the server refused the write (a *mysql.MySQLError other
// than a killed or interrupted connection or a shutdown, which may come after the
// write applied), or nothing was sent (driver.ErrBadConn, sql.ErrTxDone).
func maybeApplied(err error) error {
	var me *mysql.MySQLError
	switch {
	case err == nil, errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrTxDone),
		errors.Is(err, errReplan), errors.Is(err, errMaybeApplied):
		return err
	case errors.As(err, &me):
		switch me.Number {
		case erServerShutdown, erQueryInterrupted, erConnectionKilled, erClientInterrupt:
		default:
			return err
		}
	}
	return fmt.Errorf("%w: %w", errMaybeApplied, err)
}

// outcomeUnknown reports whether err says that a try may have applied.
func outcomeUnknown(err error) bool {
	return errors.Is(err, errMaybeApplied) || errors.Is(err, store.ErrOutcomeUnknown)
}

// errReplan: the optimistic plan did not hold (or a concurrent writer raced the
// pessimistic one); roll back and plan again from locked rows.
var errReplan = errors.New("mysqlstore: plan raced, planning again")

// wrap turns err into the error a method returns: prefixed with the package and the
// operation, wrapping store.ErrStoreUnavailable when the server was not reached or
// the outcome is unknown, with a hint for a missing table, and with secrets removed.
func (s *Store) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == erNoSuchTable:
		err = fmt.Errorf("mysqlstore: %s: %w (call Migrate first)", what, err)
	case errors.Is(err, store.ErrOutcomeUnknown):
		err = fmt.Errorf("mysqlstore: %s: %w", what, err)
	case errors.Is(err, errMaybeApplied):
		err = &unavailableError{what: what, err: err, unknown: true}
	case unavailable(err) || transient(err):
		err = &unavailableError{what: what, err: err}
	default:
		err = fmt.Errorf("mysqlstore: %s: %w", what, err)
	}
	return redact(err, s.secrets)
}

// unavailableError wraps both store.ErrStoreUnavailable (store.ErrOutcomeUnknown when
// unknown) and the cause.
type unavailableError struct {
	what    string
	err     error
	unknown bool
}

func (e *unavailableError) sentinel() error {
	if e.unknown {
		return store.ErrOutcomeUnknown
	}
	return store.ErrStoreUnavailable
}

func (e *unavailableError) Error() string {
	return "mysqlstore: " + e.what + ": " + e.sentinel().Error() + ": " + e.err.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{e.sentinel(), e.err} }

// dsnSecrets returns what may be a password in a DSN that does not parse: the text
// between the first ':' and the last '@' before the address.
func dsnSecrets(dsn string) []string {
	at := strings.LastIndexByte(dsn, '@')
	if at < 0 {
		return nil
	}
	colon := strings.IndexByte(dsn[:at], ':')
	if colon < 0 || colon+1 >= at {
		return nil
	}
	return []string{dsn[colon+1 : at]}
}

// redact returns err with every secret replaced by "xxxxx" in its message; errors.Is and
// errors.As still see what err wraps.
func redact(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := redactString(err.Error(), secrets)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

func redactString(msg string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			msg = strings.ReplaceAll(msg, sec, "xxxxx")
		}
	}
	return msg
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// driverLogger routes the driver's messages to the store's logger, secrets removed.
type driverLogger struct {
	log     *slog.Logger
	secrets []string
}

func (l driverLogger) Print(v ...any) {
	if l.log != nil {
		l.log.Warn("mysqlstore: driver: " + redactString(fmt.Sprint(v...), l.secrets))
	}
}
