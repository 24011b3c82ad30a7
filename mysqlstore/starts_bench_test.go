package mysqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// BenchmarkStartsCycle measures the journal's steady state without the kernel: each
// CommitAs starts the next 100 stored tasks of its owner and ends the 100 it started
// before (a cycle of a kernel with MaxConcurrency 100 whose tasks were acknowledged
// already), and reports tasks/s and the database server's CPU per task (the
// mariadbd processes' in /proc, other clients' work included).
//
//	cd mysqlstore && go test -run '^$' -bench StartsCycle -benchtime 200x
func BenchmarkStartsCycle(b *testing.B) {
	const conc = 100
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	s, _ := setup(b, mysqlstore.Options{})
	o, err := s.Join(ctx, "bench", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	must := func(changes []store.Change) {
		b.Helper()
		res, err := s.CommitAs(ctx, o, changes)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range res {
			if r != nil {
				b.Fatalf("results[%d] = %v", i, r)
			}
		}
	}
	id := func(i int) string { return fmt.Sprintf("task-%09d", i) }
	n := (b.N + 1) * conc
	var ins []store.Change
	for i := range n {
		ins = append(ins, store.Change{Op: store.OpInsert, Task: store.StoredTask{
			ID: id(i), Kind: "bench.kind", Payload: make([]byte, 16), Priority: store.Normal, RunAt: now,
			MaxAttempts: 3, Fence: 1, State: store.Queued, CreatedAt: now, UpdatedAt: now,
		}})
		if len(ins) == 1000 || i == n-1 {
			must(ins)
			ins = ins[:0]
		}
	}
	changes := make([]store.Change, 0, 2*conc)
	cpu0 := serverCPU(b)
	b.ResetTimer()
	for c := range b.N + 1 {
		changes = changes[:0]
		for i := c * conc; i < (c+1)*conc; i++ {
			changes = append(changes, store.Change{Op: store.OpStart, Fence: 1, Task: store.StoredTask{ID: id(i), Fence: 2, Attempt: 1, UpdatedAt: now}})
		}
		for i := (c - 1) * conc; c > 0 && i < c*conc; i++ {
			changes = append(changes, store.Change{Op: store.OpSucceed, Fence: 2, Task: store.StoredTask{ID: id(i), UpdatedAt: now}})
		}
		must(changes)
	}
	b.StopTimer()
	tasks := float64(b.N * conc)
	b.ReportMetric(tasks/b.Elapsed().Seconds(), "tasks/s")
	if cpu := serverCPU(b); cpu0 >= 0 && cpu >= 0 {
		b.ReportMetric(float64((cpu-cpu0).Microseconds())/tasks, "server-µs/task")
	}
}

// serverCPU returns the CPU time of the mariadbd (or mysqld) processes, -1 when none
// is readable.
func serverCPU(b *testing.B) time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	total, found := time.Duration(0), false
	for _, p := range dirs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		line := string(raw)
		open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
		if open < 0 || end < open {
			continue
		}
		if comm := line[open+1 : end]; comm != "mariadbd" && comm != "mysqld" {
			continue
		}
		f := strings.Fields(line[end+1:])
		if len(f) < 13 {
			continue
		}
		for _, v := range f[11:13] { // utime, stime
			t, _ := strconv.ParseInt(v, 10, 64)
			total += time.Duration(t) * 10 * time.Millisecond
		}
		found = true
	}
	if !found {
		return -1
	}
	return total
}
