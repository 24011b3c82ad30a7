package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// The crash test's knobs. The parent passes the child its part in the environment.
const (
	envCrashTasks = "AX_E2E_CRASH_TASKS" // tasks in all; default crashTasksDefault
	envCrashKills = "AX_E2E_CRASH_KILLS" // SIGKILLs; default crashKillsDefault

	envChild       = "AX_E2E_CRASH_CHILD" // "1": TestCrashChild runs
	envChildTable  = "AX_E2E_CRASH_TABLE"
	envChildDir    = "AX_E2E_CRASH_DIR"
	envChildRun    = "AX_E2E_CRASH_RUN"    // the child's number, 0 first
	envChildShare  = "AX_E2E_CRASH_SHARE"  // tasks to submit; 0: the final child
	envChildSignal = "AX_E2E_CRASH_SIGNAL" // write to fd 3 once this many are acknowledged

	crashTasksDefault = 100_000
	crashKillsDefault = 20
	crashSubmitters   = 50
	crashKind         = "e2e.crash"
	crashDelayMax     = 200 * time.Millisecond
	crashWorkMax      = 2 * time.Millisecond
	crashKillDelayMax = 50 * time.Millisecond
	crashChildTimeout = 90 * time.Second
)

// TestCrashSIGKILL runs durable tasks in child processes (this test binary, in
// TestCrashChild) and kills them with SIGKILL at random moments. Each child submits
// its share of the tasks from crashSubmitters goroutines in acknowledged mode and logs
// every acknowledgement (ack-NN.log) and every start and end of a task (run-NN.log),
// one write(2) per line, so that the lines survive the kill. (A task is known by its
// payload, "rNN-NNNNNN": a DurableFunc does not see its ID; the ack line maps the one
// to the other.) After the last kill a
// final child submits nothing and runs until the store has no live task. Then:
//
//   - no acknowledged task is lost: each has an end line and its row is Succeeded;
//   - the tasks run more than once are at most the rows Running at the kills;
//   - no delayed task started before its due time: the one its child gave (µs
//     precision), and, once recovered by a later child, the stored one (the due
//     time rounded up to the millisecond).
func TestCrashSIGKILL(t *testing.T) {
	t.Parallel()
	total := envInt(t, envCrashTasks, crashTasksDefault)
	kills := envInt(t, envCrashKills, crashKillsDefault)
	if kills == 0 || total < kills {
		t.Fatalf("%s = %d, %s = %d: want at least one kill and one task per kill", envCrashTasks, total, envCrashKills, kills)
	}
	db := openDB(t)
	table := ownTable(t, db, "crash")
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))

	began := time.Now()
	var (
		acked     int
		inFlight  []map[string]bool // the tasks (payloads) whose rows were Running at each kill
		ackRates  []float64
		killAfter []int // acknowledgements of each child before the parent killed it
	)
	for run := range kills {
		share := (total - acked + kills - run - 1) / (kills - run)
		signal := share // the last killed child: after its whole share
		if run < kills-1 {
			signal = share/4 + rng.IntN(share-share/4+1)
		}
		signal = max(signal, 1)
		c := startChild(t, dir, table, run, share, signal)
		c.waitSignal(t)
		// A random moment after the signal: mid-submit, mid-run, or idle between.
		c.kill(t, time.Duration(rng.Int64N(int64(crashKillDelayMax))))

		live, err := s.Recover(ctx)
		if err != nil {
			t.Fatalf("after kill %d: Recover() = %v", run+1, err)
		}
		running := map[string]bool{}
		for _, st := range live {
			if st.State == store.Running {
				running[string(st.Payload)] = true
			}
		}
		inFlight = append(inFlight, running)
		acks := readLog(t, filepath.Join(dir, ackLog(run)))
		n, rate := ackStats(t, acks)
		acked += n
		killAfter = append(killAfter, n)
		ackRates = append(ackRates, rate)
	}
	killed := time.Since(began)
	final := startChild(t, dir, table, kills, 0, 0)
	final.waitExit(t)
	elapsed := time.Since(began)

	counts := make([]int, len(inFlight))
	for i, m := range inFlight {
		counts[i] = len(m)
	}
	t.Logf("%d kills in %v, the final child done after %v; %d tasks acknowledged (%v per child before its kill)",
		kills, killed.Round(time.Millisecond), elapsed.Round(time.Millisecond), acked, killAfter)
	t.Logf("rows Running at the kills: %v", counts)
	t.Logf("acknowledgements per second in each child: %v", roundAll(ackRates))
	checkCrashRun(t, db, s, table, dir, kills+1, inFlight)
}

// TestCrashChild is the child process of TestCrashSIGKILL; without AX_E2E_CRASH_CHILD
// it returns at once.
func TestCrashChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		return
	}
	table := os.Getenv(envChildTable)
	dir := os.Getenv(envChildDir)
	run := envInt(t, envChildRun, 0)
	share := envInt(t, envChildShare, 0)
	signal := envInt(t, envChildSignal, 0)

	ackF := openAppend(t, filepath.Join(dir, ackLog(run)))
	runF := openAppend(t, filepath.Join(dir, runLog(run)))
	progress := os.NewFile(3, "progress")
	defer func() { _ = progress.Close() }()

	s, err := mysqlstore.Open(testDSN(), mysqlstore.Options{Table: table, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	k, err := kernel.New(kernel.Config{Store: s, Owner: "e2e-crash"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Close() }()
	err = k.Register(crashKind, func(ctx context.Context, p []byte) error {
		writeLine(runF, 'S', string(p), time.Now().UnixMicro())
		work := time.NewTimer(rand.N(crashWorkMax))
		defer work.Stop()
		select {
		case <-work.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		writeLine(runF, 'E', string(p), time.Now().UnixMicro())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var next, acked atomic.Int64
	var signalOnce sync.Once
	sendSignal := func() { signalOnce.Do(func() { _, _ = progress.Write([]byte{'k'}) }) }
	var wg sync.WaitGroup
	prios := []store.Priority{store.High, store.Normal, store.Low}
	for range crashSubmitters {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(share) {
					return
				}
				token := fmt.Sprintf("r%02d-%06d", run, n)
				dt := kernel.DurableTask{
					Kind: crashKind, Payload: []byte(token), Priority: prios[rand.IntN(len(prios))],
					MaxAttempts: 1000, // interruptions count as attempts; no task may run out of them here
				}
				var due int64
				if rand.IntN(3) == 0 {
					at := time.Now().Add(rand.N(crashDelayMax + 1))
					dt.At = at
					due = at.UnixMicro()
				}
				h, err := k.SubmitDurable(context.Background(), dt)
				if err != nil {
					writeLine(ackF, 'X', token+" "+strconv.Quote(err.Error()), 0)
					continue
				}
				writeLine(ackF, 'A', token+" "+h.ID()+" "+strconv.FormatInt(due, 10), time.Now().UnixMicro())
				if acked.Add(1) == int64(signal) {
					sendSignal()
				}
			}
		})
	}
	wg.Wait()
	if share > 0 {
		sendSignal() // even if failed submits kept it from the count: the parent reports them
		// Wait to be killed; the parent's end of stdin closes if it goes away.
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	// The final child: run what the others left until nothing is live.
	deadline := time.Now().Add(crashChildTimeout - 10*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		live, err := s.Recover(context.Background())
		if err != nil {
			t.Fatalf("Recover() = %v", err)
		}
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks still live, first %+v", len(live), live[0])
		}
		<-tick.C
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	if st := k.Stats().Store; st.Refused != 0 || st.Errors != 0 {
		t.Errorf("Stats().Store = %+v, want no refused change and no commit error", st)
	}
}

func ackLog(run int) string { return fmt.Sprintf("ack-%02d.log", run) }

// submittedBy returns the child that submitted the task of token
// (r<child>-<n>), or -1.
func submittedBy(token string) int {
	var run, n int
	if _, err := fmt.Sscanf(token, "r%02d-%06d", &run, &n); err != nil {
		return -1
	}
	return run
}

func runLog(run int) string { return fmt.Sprintf("run-%02d.log", run) }

func openAppend(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// writeLine appends "<kind> <text> <micros>\n" to f in one write(2): the file holds
// it once the call returns, even if the process is killed right after.
func writeLine(f *os.File, kind byte, text string, micros int64) {
	b := make([]byte, 0, 64+len(text))
	b = append(b, kind, ' ')
	b = append(b, text...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, micros, 10)
	b = append(b, '\n')
	_, _ = f.Write(b)
}

// child is one child process of the crash test.
type child struct {
	run    int
	cmd    *exec.Cmd
	out    *bytes.Buffer
	stdin  *os.File      // the parent's end of the child's stdin
	signal chan struct{} // receives once the child wrote to fd 3
	bytes  atomic.Int64  // bytes the child wrote to fd 3 so far
	reader chan struct{} // closed when fd 3 reached EOF
	exited chan struct{} // closed once the process was reaped
	err    error         // cmd.Wait's, once exited is closed
}

func startChild(t *testing.T, dir, table string, run, share, signal int) *child {
	t.Helper()
	return spawnChild(t, "TestCrashChild", run, envChild+"=1", envChildTable+"="+table, envChildDir+"="+dir,
		envChildRun+"="+strconv.Itoa(run), envChildShare+"="+strconv.Itoa(share), envChildSignal+"="+strconv.Itoa(signal))
}

// spawnChild runs the test named test of this binary as child number run, with env
// added to the environment: it writes to fd 3 to signal the parent, and its stdin
// closes when the parent goes away. t.Cleanup kills and reaps it. The child's test
// times out after crashChildTimeout.
func spawnChild(t *testing.T, test string, run int, env ...string) *child {
	t.Helper()
	return spawnChildFor(t, test, run, crashChildTimeout, env...)
}

// spawnChildFor is spawnChild with the child's test timeout given.
func spawnChildFor(t *testing.T, test string, run int, timeout time.Duration, env ...string) *child {
	t.Helper()
	progR, progW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{
		run: run, out: &bytes.Buffer{}, stdin: inW,
		signal: make(chan struct{}, 1), reader: make(chan struct{}), exited: make(chan struct{}),
	}
	c.cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout="+timeout.String())
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout = c.out
	c.cmd.Stderr = c.out
	c.cmd.Stdin = inR
	c.cmd.ExtraFiles = []*os.File{progW}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start child %d: %v", run, err)
	}
	_ = progW.Close()
	_ = inR.Close()
	go func() {
		defer close(c.reader)
		defer func() { _ = progR.Close() }()
		var b [16]byte
		for {
			n, err := progR.Read(b[:])
			if n > 0 {
				c.bytes.Add(int64(n))
				select {
				case c.signal <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
		<-c.reader
		_ = c.stdin.Close()
	})
	return c
}

// waitSignal waits until the child acknowledged its signal count.
func (c *child) waitSignal(t *testing.T) {
	t.Helper()
	timer := time.NewTimer(crashChildTimeout)
	defer timer.Stop()
	select {
	case <-c.signal:
	case <-c.exited:
		t.Fatalf("child %d exited before its signal: %v\n%s", c.run, c.err, tail(c.out.String(), 4000))
	case <-timer.C:
		t.Fatalf("child %d: no signal within %v\n", c.run, crashChildTimeout)
	}
}

// kill sends SIGKILL after delay and reaps the child.
func (c *child) kill(t *testing.T, delay time.Duration) {
	t.Helper()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-c.exited:
		t.Fatalf("child %d exited before its kill: %v\n%s", c.run, c.err, tail(c.out.String(), 4000))
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child %d: %v", c.run, err)
	}
	<-c.exited
	<-c.reader
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child %d ended with %v, want killed by SIGKILL\n%s", c.run, c.err, tail(c.out.String(), 4000))
	}
}

// waitExit waits until the final child exits, which must be a success.
func (c *child) waitExit(t *testing.T) {
	t.Helper()
	timer := time.NewTimer(crashChildTimeout)
	defer timer.Stop()
	select {
	case <-c.exited:
	case <-timer.C:
		t.Fatalf("final child still running after %v", crashChildTimeout)
	}
	<-c.reader
	if c.err != nil {
		t.Fatalf("final child: %v\n%s", c.err, tail(c.out.String(), 8000))
	}
}

// logLine is one line of an ack or run log: kind, fields, and the trailing time in µs.
type logLine struct {
	kind   byte
	fields []string
	micros int64
}

// readLog parses a log. A last line without its newline (cut by the kill) is dropped;
// any other malformed line fails the test.
func readLog(t *testing.T, path string) []logLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || len(f[0]) != 1 {
			t.Fatalf("%s: malformed line %q", path, sc.Text())
		}
		us, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("%s: malformed line %q", path, sc.Text())
		}
		out = append(out, logLine{kind: f[0][0], fields: f[1 : len(f)-1], micros: us})
	}
	return out
}

// ackStats counts the acknowledgements of a child's log and their rate. A submit that
// failed (an X line) fails the test: the store was up all along.
func ackStats(t *testing.T, lines []logLine) (n int, perSecond float64) {
	t.Helper()
	var first, last int64
	for _, l := range lines {
		switch l.kind {
		case 'A':
			if n == 0 {
				first = l.micros
			}
			last = l.micros
			n++
		case 'X':
			t.Errorf("a submit failed: %v", l.fields)
		}
	}
	if n > 1 && last > first {
		perSecond = float64(n-1) / (float64(last-first) / 1e6)
	}
	return n, perSecond
}

// checkCrashRun reads every log and the table and checks the crash test's claims.
func checkCrashRun(t *testing.T, db *sql.DB, s *mysqlstore.Store, table, dir string, runs int, inFlight []map[string]bool) {
	t.Helper()
	type ack struct {
		id      string
		due, at int64 // µs: due time (0: not delayed), time of the acknowledgement
	}
	acks := map[string]ack{}
	for run := range runs {
		for _, l := range readLog(t, filepath.Join(dir, ackLog(run))) {
			if l.kind != 'A' {
				continue
			}
			if len(l.fields) != 3 {
				t.Fatalf("malformed ack line %v", l.fields)
			}
			due, err := strconv.ParseInt(l.fields[2], 10, 64)
			if err != nil {
				t.Fatalf("malformed ack line %v", l.fields)
			}
			if _, dup := acks[l.fields[0]]; dup {
				t.Errorf("task %s acknowledged twice", l.fields[0])
			}
			acks[l.fields[0]] = ack{id: l.fields[1], due: due, at: l.micros}
		}
	}

	type row struct {
		id                   string
		state                int
		runAt                int64 // ms
		attempt              int
		createdAt, updatedAt int64 // ms
		lastError            string
	}
	rows := map[string]row{} // by token (the payload)
	ctx := context.Background()
	rs, err := db.QueryContext(ctx, "SELECT id, payload, state, run_at, attempt, created_at, updated_at, last_error FROM `"+table+"`")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var r row
		var token string
		if err := rs.Scan(&r.id, &token, &r.state, &r.runAt, &r.attempt, &r.createdAt, &r.updatedAt, &r.lastError); err != nil {
			t.Fatal(err)
		}
		if prev, dup := rows[token]; dup {
			t.Errorf("task %s stored twice: rows %s and %s", token, prev.id, r.id)
		}
		rows[token] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rs.Close()
	for _, r := range rows { // the bulk read's state codes agree with the store's
		st, err := s.Get(ctx, r.id)
		if err != nil || (r.state == codeSucceeded) != (st.State == store.Succeeded) {
			t.Fatalf("Get(%s) = %v, %v; the row's state code is %d", r.id, st.State, err, r.state)
		}
		break
	}

	starts := map[string]int{}
	ends := map[string]int{}
	startedIn := make([]map[string]bool, runs) // startedIn[run][token]
	history := map[string][]string{}           // token -> its run lines, for failure messages
	var early []string
	for run := range runs {
		startedIn[run] = map[string]bool{}
		for _, l := range readLog(t, filepath.Join(dir, runLog(run))) {
			token := l.fields[0]
			history[token] = append(history[token], fmt.Sprintf("%c in child %d at %d µs", l.kind, run, l.micros))
			switch l.kind {
			case 'S':
				starts[token]++
				startedIn[run][token] = true
				if a, ok := acks[token]; ok && a.due > 0 && l.micros < a.due {
					early = append(early, fmt.Sprintf("%s started at %d µs, due at %d µs (acknowledged)", token, l.micros, a.due))
				}
				// The stored due time is the task's own rounded up to the millisecond.
				// A child that recovered the task knows only the stored one, and must
				// not start it sooner; the child that submitted it knows the exact
				// one (checked above at µs precision), which may lie up to 1 ms
				// before the stored one.
				bound := int64(0)
				if r, ok := rows[token]; ok {
					bound = r.runAt * 1000
					if submittedBy(token) == run {
						bound -= 1000
					}
				}
				if r := rows[token]; bound > 0 && l.micros < bound {
					early = append(early, fmt.Sprintf("%s started at %d µs in child %d, stored due time %d ms", token, l.micros, run, r.runAt))
				}
			case 'E':
				ends[token]++
			}
		}
	}

	var lost, notDone []string
	for token, a := range acks {
		r, ok := rows[token]
		switch {
		case ends[token] == 0:
			lost = append(lost, token+": acknowledged, never ran to its end")
		case !ok:
			lost = append(lost, token+": acknowledged, no row")
		case r.id != a.id || r.state != codeSucceeded:
			lost = append(lost, fmt.Sprintf("%s: acknowledged as %s, row %s in state %d", token, a.id, r.id, r.state))
		}
		if a.due > 0 && ok {
			// The kernel measures a Delay from its own reading of the clock during the
			// submit, after the child computed its due time and before the
			// acknowledgement: the stored due time lies between the two (at ms
			// precision), never before the child's due time.
			if d := r.runAt - a.due/1000; d < -1 || r.runAt > (a.at+crashDelayMax.Microseconds())/1000+1 {
				early = append(early, fmt.Sprintf("%s: due at %d µs, acknowledged at %d µs, stored due time %d ms; row %+v; runs %v",
					token, a.due, a.at, r.runAt, r, history[token]))
			}
		}
	}
	for token, r := range rows {
		if r.state != codeSucceeded || ends[token] == 0 {
			notDone = append(notDone, fmt.Sprintf("%s (%s): state %d, %d end lines", token, r.id, r.state, ends[token]))
		}
	}
	reran, extra, sumInFlight := 0, 0, 0
	for _, n := range starts {
		if n > 1 {
			reran++
			extra += n - 1
		}
	}
	// Each task started in a killed child and started again later: was its row Running
	// at the kill (in flight from the store's point of view) or not?
	var seenRunning, notRunning int
	var notRunningEx []string
	for run, running := range inFlight {
		sumInFlight += len(running)
		for token := range startedIn[run] {
			again := false
			for later := run + 1; later < runs; later++ {
				again = again || startedIn[later][token]
			}
			switch {
			case !again:
			case running[token]:
				seenRunning++
			default:
				notRunning++
				if len(notRunningEx) < 5 {
					notRunningEx = append(notRunningEx, fmt.Sprintf("%s (kill %d)", token, run+1))
				}
			}
		}
	}
	t.Logf("%d rows, %d acknowledged; %d tasks ran more than once (%d extra runs); %d rows Running at the kills",
		len(rows), len(acks), reran, extra, sumInFlight)
	t.Logf("runs cut by a kill and run again: %d had their row Running at the kill, %d did not (their start was not stored)", seenRunning, notRunning)
	if reran > sumInFlight {
		t.Errorf("%d tasks ran more than once, more than the %d rows Running at the kills: %d re-run tasks had run in a killed child "+
			"while their row was not Running (e.g. %v): the kernel runs a durable task before its start is committed",
			reran, sumInFlight, notRunning, notRunningEx)
	}
	slices.Sort(lost)
	slices.Sort(notDone)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged tasks lost, e.g. %v", len(lost), lost[:min(len(lost), 10)])
	}
	if len(notDone) > 0 {
		t.Errorf("%d rows not Succeeded with an end line, e.g. %v", len(notDone), notDone[:min(len(notDone), 10)])
	}
	if len(early) > 0 {
		t.Errorf("%d delayed tasks started before their due time, e.g. %v", len(early), early[:min(len(early), 10)])
	}
}

func roundAll(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}
