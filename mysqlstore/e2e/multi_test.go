package e2e

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
)

// The multi-process tests' knobs, and the environment of their child, TestMultiChild.
const (
	envMultiTasks = "AX_E2E_MULTI_TASKS" // tasks in all; default multiTasksDefault
	envMultiKills = "AX_E2E_MULTI_KILLS" // SIGKILLs; default multiKillsDefault

	envMultiChild      = "AX_E2E_MULTI_CHILD" // "1": TestMultiChild runs
	envMultiDSN        = "AX_E2E_MULTI_DSN"
	envMultiTable      = "AX_E2E_MULTI_TABLE"
	envMultiDir        = "AX_E2E_MULTI_DIR"
	envMultiOwner      = "AX_E2E_MULTI_OWNER"      // Config.Owner: p0, p1, p2
	envMultiGen        = "AX_E2E_MULTI_GEN"        // the owner's process: 0 first, one more per restart
	envMultiLease      = "AX_E2E_MULTI_LEASE"      // Config.Lease
	envMultiWorkMin    = "AX_E2E_MULTI_WORK_MIN"   // the shortest work of an attempt
	envMultiWorkMax    = "AX_E2E_MULTI_WORK_MAX"   // the longest work of an attempt
	envMultiSubmitters = "AX_E2E_MULTI_SUBMITTERS" // goroutines that submit, each waiting for its task's end
	envMultiTimeout    = "AX_E2E_MULTI_STORE_TIMEOUT"

	multiTasksDefault = 20_000
	multiKillsDefault = 10
	multiProcs        = 3
	multiKind         = "e2e.multi"
	multiLease        = time.Second
	multiChildTimeout = 30 * time.Minute
	multiStatsTag     = "MULTI-STATS"
	multiRejoinMsg    = "joined the store again"
	multiKillMsg      = "mysqlstore: killed the connection"
	multiLapseMsg     = "the lease on the store was not renewed in time"
)

// multiConf is what the children of one multi-process test share.
type multiConf struct {
	dsn, table, dir  string
	lease            time.Duration
	workMin, workMax time.Duration
	submitters       int
	storeTimeout     time.Duration // 0: the kernel's default
	// test is the child's test function; "" is TestMultiChild. Another child reads
	// the same environment and env besides.
	test string
	env  []string
}

// multiProc is one child process: an owner's process of one generation.
type multiProc struct {
	name   string // the owner, p0…
	gen    int
	pid    int
	c      *child
	killed time.Time // when the parent sent SIGKILL; zero if it did not
}

// up reports whether the child's kernel is running (it wrote its first byte to fd 3).
func (p *multiProc) up() bool { return p.c.bytes.Load() > 0 }

// acks returns the tasks the child acknowledged so far (a byte each on fd 3).
func (p *multiProc) acks() int64 { return max(p.c.bytes.Load()-1, 0) }

func (p *multiProc) String() string { return fmt.Sprintf("%s/g%d (pid %d)", p.name, p.gen, p.pid) }

// multiRun is the parent's view of a multi-process test: the children it started and
// each owner's process now.
type multiRun struct {
	conf  multiConf
	procs []*multiProc // every child, in the order started
	cur   [multiProcs]*multiProc
}

// start starts owner i's next process (restarting it if it ran before).
func (r *multiRun) start(t *testing.T, i int) *multiProc {
	t.Helper()
	gen := 0
	if old := r.cur[i]; old != nil {
		gen = old.gen + 1
	}
	name := fmt.Sprintf("p%d", i)
	cf := r.conf
	env := append([]string{
		envMultiChild + "=1", envMultiDSN + "=" + cf.dsn, envMultiTable + "=" + cf.table, envMultiDir + "=" + cf.dir,
		envMultiOwner + "=" + name, envMultiGen + "=" + strconv.Itoa(gen), envMultiLease + "=" + cf.lease.String(),
		envMultiWorkMin + "=" + cf.workMin.String(), envMultiWorkMax + "=" + cf.workMax.String(),
		envMultiSubmitters + "=" + strconv.Itoa(cf.submitters), envMultiTimeout + "=" + cf.storeTimeout.String(),
	}, cf.env...)
	c := spawnChildFor(t, cmp.Or(cf.test, "TestMultiChild"), len(r.procs), multiChildTimeout, env...)
	p := &multiProc{name: name, gen: gen, pid: c.cmd.Process.Pid, c: c}
	r.procs = append(r.procs, p)
	r.cur[i] = p
	return p
}

// startAll starts the three owners and waits until their kernels run.
func (r *multiRun) startAll(t *testing.T) {
	t.Helper()
	for i := range multiProcs {
		r.start(t, i)
	}
	for _, p := range r.cur {
		p.c.waitSignal(t)
	}
}

// acked returns the tasks acknowledged by every child so far.
func (r *multiRun) acked() int64 {
	var n int64
	for _, p := range r.procs {
		n += p.acks()
	}
	return n
}

// kill kills owner i's process with SIGKILL and reaps it.
func (r *multiRun) kill(t *testing.T, i int) {
	t.Helper()
	p := r.cur[i]
	p.killed = time.Now()
	p.c.kill(t, 0)
}

// killedAt returns when the parent killed each killed child, in µs, by pid.
func (r *multiRun) killedAt() map[int]int64 {
	out := map[int]int64{}
	for _, p := range r.procs {
		if !p.killed.IsZero() {
			out[p.pid] = p.killed.UnixMicro()
		}
	}
	return out
}

// waitAcks polls until p acknowledged at least n tasks.
func waitAcks(t *testing.T, p *multiProc, n int64, timeout time.Duration) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("%v to acknowledge %d tasks", p, n), 10*time.Millisecond, timeout, func() (bool, error) {
		select {
		case <-p.c.exited:
			return false, fmt.Errorf("%v exited: %w\n%s", p, p.c.err, tail(p.c.out.String(), 4000))
		default:
		}
		return p.acks() >= n, nil
	})
}

// multiStats is what a child that quit reported: its kernel's Stats().Store, the times
// its log says it joined the store again, and the times its store's log says it killed
// the connection of a stuck transaction.
type multiStats struct {
	refused, errors, commits uint64
	rejoins, kills           int
	out                      string
}

// finish stops the submits of the owners' processes now, waits until the store holds no
// live task, then has them shut down and exit, and returns what each reported, by
// process.
func (r *multiRun) finish(t *testing.T, s *mysqlstore.Store, timeout time.Duration) map[*multiProc]multiStats {
	t.Helper()
	for _, p := range r.cur {
		if _, err := p.c.stdin.Write([]byte{'s'}); err != nil {
			t.Fatalf("tell %v to stop submitting: %v", p, err)
		}
	}
	pollUntil(t, "the store to hold no live task", 50*time.Millisecond, timeout, func() (bool, error) {
		for _, p := range r.cur {
			select {
			case <-p.c.exited:
				return false, fmt.Errorf("%v exited: %w\n%s", p, p.c.err, tail(p.c.out.String(), 4000))
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		live, err := s.Recover(ctx)
		return len(live) == 0, err
	})
	for _, p := range r.cur {
		if _, err := p.c.stdin.Write([]byte{'q'}); err != nil {
			t.Fatalf("tell %v to quit: %v", p, err)
		}
	}
	out := map[*multiProc]multiStats{}
	for _, p := range r.procs {
		if p.killed.IsZero() {
			p.c.waitExit(t)
		}
		text := p.c.out.String()
		st := multiStats{rejoins: strings.Count(text, multiRejoinMsg), kills: strings.Count(text, multiKillMsg), out: text}
		if p.killed.IsZero() {
			i := strings.Index(text, multiStatsTag)
			if i < 0 {
				t.Fatalf("%v exited without its %s line:\n%s", p, multiStatsTag, tail(text, 4000))
			}
			if _, err := fmt.Sscanf(text[i:], multiStatsTag+" refused=%d errors=%d commits=%d",
				&st.refused, &st.errors, &st.commits); err != nil {
				t.Fatalf("%v: malformed %s line: %v", p, multiStatsTag, err)
			}
		}
		out[p] = st
	}
	return out
}

// createRunsTable creates the side table where the children record each attempt:
// a row inserted when it begins, its end set when its work is done. drop: drop it in
// t.Cleanup.
func createRunsTable(t *testing.T, db *sql.DB, table string, drop bool) string {
	t.Helper()
	runs := table + "_runs"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, "CREATE TABLE `"+runs+"` ("+
		"k VARCHAR(40) NOT NULL PRIMARY KEY, task VARBINARY(64) NOT NULL, token VARBINARY(64) NOT NULL, "+
		"attempt INT NOT NULL, pid INT NOT NULL, owner VARCHAR(8) NOT NULL, gen INT NOT NULL, "+
		"start_us BIGINT NOT NULL, end_us BIGINT NULL)")
	if err != nil {
		t.Fatal(err)
	}
	if drop {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+runs+"`"); err != nil {
				t.Errorf("DROP TABLE %s: %v", runs, err)
			}
		})
	}
	return runs
}

// TestMultiChild is the child process of the multi-process tests; without
// AX_E2E_MULTI_CHILD it returns at once. It runs a kernel as owner
// AX_E2E_MULTI_OWNER with a short lease and submits acknowledged durable tasks from
// AX_E2E_MULTI_SUBMITTERS goroutines, each waiting for its task's end before the
// next (so that the backlog stays small and an orphan runs again as soon as it is
// rescued). It logs each acknowledgement (ack-<owner>-g<gen>.log, one write(2) a
// line) and writes a byte to fd 3 for it, after one byte once the kernel runs. Each
// attempt inserts a row into the side table <table>_runs as it begins and sets the
// row's end once its work is done. Its stdin commands: 's' stops the submits, 'q'
// shuts the kernel down and prints a MULTI-STATS line; at EOF it returns at once.
func TestMultiChild(t *testing.T) {
	if os.Getenv(envMultiChild) != "1" {
		return
	}
	dsn := os.Getenv(envMultiDSN)
	table := os.Getenv(envMultiTable)
	runs := table + "_runs"
	owner := os.Getenv(envMultiOwner)
	gen := envInt(t, envMultiGen, 0)
	lease := envDuration(t, envMultiLease)
	workMin := envDuration(t, envMultiWorkMin)
	workMax := envDuration(t, envMultiWorkMax)
	storeTimeout := envDuration(t, envMultiTimeout)
	submitters := envInt(t, envMultiSubmitters, 10)
	pid := os.Getpid()

	ackF := openAppend(t, filepath.Join(os.Getenv(envMultiDir), fmt.Sprintf("ack-%s-g%02d.log", owner, gen)))
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()

	side, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Few connections: three children of many attempts each, beside the other test
	// packages, would otherwise reach the server's max_connections.
	side.SetMaxOpenConns(8)
	side.SetMaxIdleConns(8)
	defer func() { _ = side.Close() }()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{Table: table, Retention: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	k, err := kernel.New(kernel.Config{Store: s, Owner: owner, Lease: lease, StoreTimeout: storeTimeout, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	var seq atomic.Int64
	err = k.Register(multiKind, func(ctx context.Context, p []byte) error {
		start := time.Now().UnixMicro()
		info, ok := kernel.TaskInfo(ctx)
		if !ok {
			return kernel.Permanent(fmt.Errorf("no TaskInfo"))
		}
		key := fmt.Sprintf("%d-%d", pid, seq.Add(1))
		// The records outlive the attempt's context: an attempt the kernel cancels
		// (its lease in doubt, a Close) ends when the function returns, and that end
		// must be on record too.
		rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		sideExec(rec, side, "INSERT IGNORE INTO `"+runs+"` (k, task, token, attempt, pid, owner, gen, start_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			key, info.ID, p, info.Attempt, pid, owner, gen, start)
		defer func() {
			sideExec(rec, side, "UPDATE `"+runs+"` SET end_us = ? WHERE k = ?", time.Now().UnixMicro(), key)
		}()
		work := time.NewTimer(workMin + rand.N(workMax-workMin+1))
		defer work.Stop()
		select {
		case <-work.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	quit, gone := make(chan struct{}), make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, err := os.Stdin.Read(b[:]); err != nil {
				close(gone)
				return
			}
			switch b[0] {
			case 's':
				stop.Store(true)
			case 'q':
				close(quit)
				return
			}
		}
	}()
	waitCtx, cancelWait := context.WithCancel(context.Background())
	defer cancelWait()
	var next atomic.Int64
	var progMu sync.Mutex
	var wg sync.WaitGroup
	for range submitters {
		wg.Go(func() {
			for !stop.Load() {
				token := fmt.Sprintf("%s-g%02d-%06d", owner, gen, next.Add(1))
				h, err := k.SubmitDurable(waitCtx, kernel.DurableTask{Kind: multiKind, Payload: []byte(token), MaxAttempts: 1000})
				if err != nil {
					writeLine(ackF, 'X', token+" "+strconv.Quote(err.Error()), time.Now().UnixMicro())
					pause := time.NewTimer(20 * time.Millisecond) // the store is down: try again later, not at once
					select {
					case <-pause.C:
					case <-waitCtx.Done():
						pause.Stop()
					}
					continue
				}
				writeLine(ackF, 'A', token+" "+h.ID(), time.Now().UnixMicro())
				progMu.Lock()
				_, _ = progress.Write([]byte{'a'})
				progMu.Unlock()
				_ = h.Wait(waitCtx)
			}
		})
	}
	progMu.Lock()
	_, _ = progress.Write([]byte{'u'})
	progMu.Unlock()
	select {
	case <-quit:
	case <-gone:
		return // the parent went away
	}
	stop.Store(true)
	cancelWait()
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	st := k.Stats().Store
	fmt.Printf("%s refused=%d errors=%d commits=%d\n", multiStatsTag, st.Refused, st.Errors, st.Commits)
}

// sideExec runs a statement on the side table until it succeeds or ctx is done: the
// server may be down for a while (the outage test).
func sideExec(ctx context.Context, db *sql.DB, q string, args ...any) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := db.ExecContext(cctx, q, args...)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		retry := time.NewTimer(50 * time.Millisecond)
		select {
		case <-retry.C:
		case <-ctx.Done():
			retry.Stop()
			return
		}
	}
}

// envDuration returns the duration in the environment variable name; unset is 0.
func envDuration(t testing.TB, name string) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("%s = %q: want a non-negative duration", name, v)
	}
	return d
}

// TestMultiKill runs three processes, owners p0, p1 and p2 with a lease of
// multiLease, on one table, and kills random ones with SIGKILL while they submit
// and run acknowledged durable tasks; each killed process is restarted under its
// owner's name after a random delay of up to two leases, so that its tasks are
// taken back by the restarted process or rescued by the others first, and a kill may
// come while the others rescue. Then:
//
//   - no acknowledged task is lost: each is stored Succeeded, after an attempt that
//     ended;
//   - no task runs in two processes at once: an attempt began in one process only
//     after every earlier attempt elsewhere ended, or its process was killed;
//   - every attempt but a task's last was cut by the kill of its process: a task runs
//     again at most once per kill of a process that ran it;
//   - the tasks a kill orphaned (running or queued in the killed process) begin again
//     within 2 × Lease + 1 s of the kill.
//
// AX_E2E_MULTI_TASKS and AX_E2E_MULTI_KILLS set its size.
func TestMultiKill(t *testing.T) {
	total := envInt(t, envMultiTasks, multiTasksDefault)
	kills := envInt(t, envMultiKills, multiKillsDefault)
	if kills == 0 || total < kills {
		t.Fatalf("%s = %d, %s = %d: want at least one kill and one task per kill", envMultiTasks, total, envMultiKills, kills)
	}
	db := openDB(t)
	table := ownTable(t, db, "multi")
	createRunsTable(t, db, table, true)
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := &multiRun{conf: multiConf{
		dsn: testDSN(), table: table, dir: t.TempDir(), lease: multiLease,
		workMax: 2 * time.Millisecond, submitters: 50,
	}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	began := time.Now()
	r.startAll(t)

	// The loop polls the children's progress: it kills at evenly spread counts of
	// acknowledgements, and restarts each killed owner at its time.
	var restartAt [multiProcs]time.Time
	var restartDelays []time.Duration
	deadline := time.Now().Add(time.Duration(total/50+300) * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for done := 0; ; {
		now := time.Now()
		for i, p := range r.cur {
			if !p.killed.IsZero() && !now.Before(restartAt[i]) {
				r.start(t, i)
			}
		}
		acked := r.acked()
		if done < kills && acked >= int64(total)*int64(done+1)/int64(kills+1) {
			var live []int
			for i, p := range r.cur {
				if p.killed.IsZero() && p.up() {
					live = append(live, i)
				}
			}
			if len(live) >= 2 { // one at least lives on to rescue
				i := live[rng.IntN(len(live))]
				r.kill(t, i)
				d := time.Duration(rng.Int64N(int64(2 * r.conf.lease)))
				restartAt[i] = time.Now().Add(d)
				restartDelays = append(restartDelays, d.Round(time.Millisecond))
				done++
			}
		}
		if done == kills && acked >= int64(total) && !slices.ContainsFunc(r.cur[:], func(p *multiProc) bool { return !p.up() || !p.killed.IsZero() }) {
			break
		}
		if now.After(deadline) {
			t.Fatalf("after %v: %d of %d tasks acknowledged, %d of %d kills", time.Since(began), acked, total, done, kills)
		}
		<-tick.C
	}
	submitted := time.Since(began)
	stats := r.finish(t, s, 2*time.Minute)
	elapsed := time.Since(began)
	f := readMultiFacts(t, db, r)
	t.Logf("%d processes, %d kills (restarted after %v), %d tasks acknowledged in %v, all done after %v",
		len(r.procs), kills, restartDelays, len(f.acks), submitted.Round(time.Millisecond), elapsed.Round(time.Millisecond))
	checkNoLoss(t, f)
	checkMultiKill(t, r, f, stats)
}
