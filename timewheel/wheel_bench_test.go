package timewheel

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// benchPending is how many timers the wheel (or the runtime) already holds while a
// benchmark schedules and cancels.
const benchPending = 10_000

// BenchmarkWheelSchedule schedules a timer 10 minutes out and cancels it, on a 1 ms wheel
// that already holds benchPending timers spread over an hour.
func BenchmarkWheelSchedule(b *testing.B) {
	w, err := New[uint64](time.Millisecond, origin)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range uint64(benchPending) {
		w.Schedule(origin.Add(time.Duration(rng.Int64N(int64(time.Hour)))), i)
	}
	at := origin.Add(10 * time.Minute)
	b.ReportAllocs()
	var v uint64
	for b.Loop() {
		h := w.Schedule(at, v)
		w.Cancel(h)
		v++
	}
}

// BenchmarkAfterFuncSchedule is the baseline: the runtime's timers, time.AfterFunc 10
// minutes out and Stop, with benchPending timers already pending.
func BenchmarkAfterFuncSchedule(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := func() {}
	pending := make([]*time.Timer, benchPending)
	for i := range pending {
		pending[i] = time.AfterFunc(time.Hour+time.Duration(rng.Int64N(int64(time.Hour))), f)
	}
	b.Cleanup(func() {
		for _, t := range pending {
			t.Stop()
		}
	})
	b.ReportAllocs()
	for b.Loop() {
		t := time.AfterFunc(10*time.Minute, f)
		t.Stop()
	}
}

// BenchmarkWheelMemory schedules 1,000,000 timers (delays up to 30 days) on a new wheel and
// reports the heap they take per timer, measured between two garbage collections.
func BenchmarkWheelMemory(b *testing.B) {
	b.Run("value=uint64", benchMemory[uint64](func(i int) uint64 { return uint64(i) }))
	type ref struct {
		p    *int
		kind int
	}
	x := new(int)
	b.Run("value=16B", benchMemory[ref](func(i int) ref { return ref{x, i} }))
}

func benchMemory[T any](value func(i int) T) func(b *testing.B) {
	return func(b *testing.B) {
		const n = 1_000_000
		rng := rand.New(rand.NewPCG(3, 4))
		delays := make([]time.Duration, n)
		for i := range delays {
			delays[i] = time.Duration(rng.Int64N(int64(30 * 24 * time.Hour)))
		}
		var perEntry float64
		b.ReportAllocs()
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			w, err := New[T](time.Millisecond, origin)
			if err != nil {
				b.Fatal(err)
			}
			for i, d := range delays {
				w.Schedule(origin.Add(d), value(i))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if w.Len() != n {
				b.Fatalf("Len() = %d, want %d", w.Len(), n)
			}
			perEntry = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
			runtime.KeepAlive(w)
		}
		b.ReportMetric(perEntry, "B/entry")
	}
}
