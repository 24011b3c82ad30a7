package schedule

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
)

// BenchmarkScheduleMemory adds 100,000 Every schedules of 1 to 60 s to a scheduler
// and reports the heap they hold and the allocations of the calls, per schedule.
func BenchmarkScheduleMemory(b *testing.B) {
	const n = 100_000
	run := func(context.Context, Fire) error { return nil }
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	var perSchedule, allocs float64
	for b.Loop() {
		k, err := kernel.New(kernel.Config{})
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(k, Config{})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			if _, err := s.Add(Every(time.Duration(1+r.IntN(60))*time.Second), run, nil); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perSchedule = float64(after.HeapAlloc-before.HeapAlloc) / n
		allocs = float64(after.Mallocs-before.Mallocs) / n
		s.Stop()
		if err := k.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perSchedule, "bytes/schedule")
	b.ReportMetric(allocs, "allocs/schedule")
}
