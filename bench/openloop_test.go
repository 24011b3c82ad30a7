package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// loopFunc is OpenLoop's signature, shared by OpenLoopYield.
type loopFunc func(ctx context.Context, start time.Time, n int, rate float64, fire func(i int, due time.Duration)) error

func TestOpenLoopHonoursSchedule(t *testing.T) {
	gens := []struct {
		name string
		loop loopFunc
	}{
		{"OpenLoop", OpenLoop},
		{"OpenLoopYield", OpenLoopYield},
	}
	tests := []struct {
		name    string
		n       int
		rate    float64
		lateBy0 int // intervals by which the first call makes the generator late
	}{
		{"fast calls", 2000, 20_000, 0},
		{"slow start catches up", 300, 10_000, 10},
		{"sparse arrivals sleep", 6, 200, 0},
	}
	for _, gen := range gens {
		for _, tt := range tests {
			t.Run(gen.name+"/"+tt.name, func(t *testing.T) {
				start := time.Now()
				calls := make([]time.Duration, 0, tt.n)
				dues := make([]time.Duration, 0, tt.n)
				interval := time.Duration(1e9 / tt.rate)
				err := gen.loop(context.Background(), start, tt.n, tt.rate, func(i int, due time.Duration) {
					calls = append(calls, time.Since(start))
					dues = append(dues, due)
					if i == 0 {
						// The next lateBy0 calls are due when this one returns.
						for time.Since(start) < time.Duration(tt.lateBy0)*interval {
							continue
						}
					}
				})
				if err != nil {
					t.Fatalf("%s() error = %v", gen.name, err)
				}
				if len(calls) != tt.n {
					t.Fatalf("%s made %d calls, want %d", gen.name, len(calls), tt.n)
				}
				for i := range calls {
					if want := time.Duration(i) * interval; dues[i] < want-time.Microsecond || dues[i] > want+time.Microsecond {
						t.Fatalf("call %d: due = %v, want %v", i, dues[i], want)
					}
					if calls[i] < dues[i] {
						t.Fatalf("call %d at %v, before its due time %v", i, calls[i], dues[i])
					}
				}
				// The schedule is not stretched: the last call comes soon after it is due.
				last := calls[tt.n-1] - dues[tt.n-1]
				if slack := 500 * time.Millisecond; last > slack {
					t.Errorf("last call %v after its due time, want at most %v", last, slack)
				}
			})
		}
	}
}

func TestOpenLoopStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := OpenLoop(ctx, time.Now(), 1_000_000, 1e9, func(i int, _ time.Duration) {
		calls++
		if i == 10 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenLoop() error = %v, want context.Canceled", err)
	}
	if calls > 1024 {
		t.Errorf("OpenLoop made %d calls after cancel, want it to stop within 1024", calls)
	}
}
