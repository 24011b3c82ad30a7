package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// BenchmarkCommit measures group commits on the real database: rows/s is the rate of
// task rows written (inserted or updated), at batches of 1, 100 and 1,000 tasks.
//
//	cd mysqlstore && go test -run '^$' -bench Commit -benchtime 3s
func BenchmarkCommit(b *testing.B) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	payload := make([]byte, 200)
	newTask := func(id string) store.StoredTask {
		return store.StoredTask{
			ID: id, Kind: "bench.kind", Payload: payload, Priority: store.Normal, RunAt: now,
			Timeout: time.Second, MaxAttempts: 3, Fence: 1, State: store.Queued, CreatedAt: now, UpdatedAt: now,
		}
	}
	for _, size := range []int{1, 100, 1000} {
		// insert: acknowledged submits, one row per task.
		b.Run(fmt.Sprintf("insert/batch=%d", size), func(b *testing.B) {
			s, db := setup(b, mysqlstore.Options{})
			changes := make([]store.Change, size)
			seq := 0
			cpu := startCPU(b, db)
			b.ReportAllocs()
			for b.Loop() {
				for i := range changes {
					seq++
					changes[i] = store.Change{Op: store.OpInsert, Task: newTask(fmt.Sprintf("task-%09d", seq))}
				}
				mustBatch(b, s, changes)
			}
			b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "rows/s")
			cpu.report(b, seq, "row")
		})
		// start: the attempt of each task begins (queued → running, fence bumped).
		b.Run(fmt.Sprintf("start/batch=%d", size), func(b *testing.B) {
			benchUpdates(b, size, newTask, func(id string) []store.Change {
				return []store.Change{{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}}}
			})
		})
		// complete: start and success of each task, one row write per task.
		b.Run(fmt.Sprintf("complete/batch=%d", size), func(b *testing.B) {
			benchUpdates(b, size, newTask, func(id string) []store.Change {
				return []store.Change{
					{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}},
					{Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: now.Add(time.Millisecond)}},
				}
			})
		})
		// complete-history: the same, each success with its attempt's record (whose
		// start is of its own millisecond, so that the records differ), as the kernel
		// writes it.
		b.Run(fmt.Sprintf("complete-history/batch=%d", size), func(b *testing.B) {
			n := 0
			benchUpdates(b, size, newTask, func(id string) []store.Change {
				n++
				start := now.Add(-time.Duration(n%size) * time.Millisecond)
				return []store.Change{
					{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: now}},
					{
						Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: now.Add(time.Millisecond)},
						Attempt: store.Attempt{Number: 1, Start: start, End: now.Add(time.Millisecond), Outcome: store.Succeeded, Owner: "ax-bench-host-0"},
					},
				}
			})
		})
	}
}

// benchUpdates times commits of the changes ops makes for size tasks queued beforehand
// (untimed): the state of every row changes, as it does for the kernel.
func benchUpdates(b *testing.B, size int, newTask func(string) store.StoredTask, ops func(id string) []store.Change) {
	s, _ := setup(b, mysqlstore.Options{})
	ins := make([]store.Change, size)
	var changes []store.Change
	seq, rows := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		changes = changes[:0]
		for i := range ins {
			seq++
			id := fmt.Sprintf("task-%09d", seq)
			ins[i] = store.Change{Op: store.OpInsert, Task: newTask(id)}
			changes = append(changes, ops(id)...)
		}
		mustBatch(b, s, ins)
		b.StartTimer()
		mustBatch(b, s, changes)
		rows += size
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

func mustBatch(b *testing.B, s store.Store, changes []store.Change) {
	b.Helper()
	res, err := s.Commit(context.Background(), changes)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		if r != nil {
			b.Fatalf("results[%d] = %v", i, r)
		}
	}
}

// BenchmarkLifecycle measures the batches the kernel's journal commits in steady state:
// each holds n new tasks (OpInsert) and the start and success (OpStart, OpSucceed) of the
// n tasks inserted by the batch before. tasks/s counts completed tasks.
//
// lifecycle-keyed is the same with a unique key on every task.
//
// BenchmarkLifecycle/snapshot measures the batches of periodic snapshots, where a task is
// inserted, started and completed within one batch (OpInsert, OpStart, OpSucceed);
// snapshot-drop the same with Options.DropCompleted, which writes none of them.
//
//	cd mysqlstore && go test -run '^$' -bench Lifecycle -benchtime 3s
func BenchmarkLifecycle(b *testing.B) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	payload := make([]byte, 200)
	newTask := func(id string) store.StoredTask {
		return store.StoredTask{
			ID: id, Kind: "bench.kind", Payload: payload, Priority: store.Normal, RunAt: now,
			Timeout: time.Second, MaxAttempts: 3, Fence: 1, State: store.Queued, CreatedAt: now, UpdatedAt: now,
		}
	}
	start := func(id string, at time.Time) store.Change {
		return store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id, Fence: 2, Attempt: 1, UpdatedAt: at}}
	}
	succeed := func(id string, at time.Time) store.Change {
		return store.Change{Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id, UpdatedAt: at}}
	}
	cases := []struct {
		name  string
		n     int
		keyed bool // every task holds a unique key of its own
	}{
		{"lifecycle", 100, false}, {"lifecycle", 500, false}, {"lifecycle", 2000, false}, {"lifecycle-keyed", 500, true},
	}
	for _, tc := range cases {
		n := tc.n
		newTask, plain := newTask, newTask
		if tc.keyed {
			newTask = func(id string) store.StoredTask {
				t := plain(id)
				t.UniqueKey = "key-" + id
				return t
			}
		}
		b.Run(fmt.Sprintf("%s/n=%d", tc.name, n), func(b *testing.B) {
			s, db := setup(b, mysqlstore.Options{})
			seq, done := 0, 0
			prev := make([]string, n)
			changes := make([]store.Change, 0, 3*n)
			for i := range prev { // the first batch's predecessor, untimed
				seq++
				prev[i] = fmt.Sprintf("task-%09d", seq)
				changes = append(changes, store.Change{Op: store.OpInsert, Task: newTask(prev[i])})
			}
			mustBatch(b, s, changes)
			cpu := startCPU(b, db)
			b.ReportAllocs()
			for b.Loop() {
				changes = changes[:0]
				// In the order the kernel meets them: submits and completions interleaved.
				for i := range prev {
					seq++
					id := fmt.Sprintf("task-%09d", seq)
					at := now.Add(time.Duration(seq) * time.Microsecond)
					changes = append(changes, store.Change{Op: store.OpInsert, Task: newTask(id)},
						start(prev[i], at), succeed(prev[i], at.Add(time.Microsecond)))
					prev[i] = id
				}
				mustBatch(b, s, changes)
				done += n
			}
			b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "tasks/s")
			cpu.report(b, done, "task")
		})
	}
	for _, n := range []int{100, 500, 2000} {
		for _, drop := range []bool{false, true} {
			name := "snapshot"
			if drop {
				name = "snapshot-drop"
			}
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				benchSnapshot(b, n, mysqlstore.Options{DropCompleted: drop}, newTask, start, succeed)
			})
		}
	}
}

// benchSnapshot commits batches that insert, start and complete n tasks each.
func benchSnapshot(b *testing.B, n int, opts mysqlstore.Options, newTask func(string) store.StoredTask,
	start, succeed func(string, time.Time) store.Change,
) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, db := setup(b, opts)
	seq, done := 0, 0
	changes := make([]store.Change, 0, 3*n)
	cpu := startCPU(b, db)
	b.ReportAllocs()
	for b.Loop() {
		changes = changes[:0]
		for range n {
			seq++
			id := fmt.Sprintf("task-%09d", seq)
			at := now.Add(time.Duration(seq) * time.Microsecond)
			changes = append(changes, store.Change{Op: store.OpInsert, Task: newTask(id)},
				start(id, at), succeed(id, at.Add(time.Microsecond)))
		}
		mustBatch(b, s, changes)
		done += n
	}
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "tasks/s")
	cpu.report(b, done, "task")
}

// cpuClock reads the CPU time of the benchmark's process and, when the server runs on
// this machine and its /proc entry is readable, of the server's process (all its
// threads: purge and log writing count). On a machine that runs other work too, CPU
// per task varies less than the wall-clock rate.
type cpuClock struct {
	serverStat     string // /proc/PID/stat of the server, or ""
	client, server time.Duration
}

func startCPU(b *testing.B, db *sql.DB) *cpuClock {
	c := &cpuClock{}
	var pidFile string
	if db.QueryRow("SELECT @@pid_file").Scan(&pidFile) == nil {
		if pid, err := os.ReadFile(pidFile); err == nil {
			c.serverStat = "/proc/" + strings.TrimSpace(string(pid)) + "/stat"
		}
	}
	c.client, c.server = clientCPU(), procCPU(c.serverStat)
	return c
}

// report adds client-µs/unit and server-µs/unit metrics for n units done since start.
func (c *cpuClock) report(b *testing.B, n int, unit string) {
	if n == 0 {
		return
	}
	b.ReportMetric(float64((clientCPU()-c.client).Microseconds())/float64(n), "client-µs/"+unit)
	if c.serverStat != "" {
		b.ReportMetric(float64((procCPU(c.serverStat)-c.server).Microseconds())/float64(n), "server-µs/"+unit)
	}
}

func clientCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns utime+stime of the process whose /proc stat file is path, or 0.
func procCPU(path string) time.Duration {
	if path == "" {
		return 0
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
