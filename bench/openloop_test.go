package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestOpenLoopHonoursSchedule(t *testing.T) {
	tests := []struct {
		name string
		n    int
		rate float64
		cost time.Duration // what each call costs the generator
	}{
		{"fast calls", 2000, 20_000, 0},
		{"slow start catches up", 300, 10_000, 0},
		{"sparse arrivals sleep", 6, 200, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			calls := make([]time.Duration, 0, tt.n)
			dues := make([]time.Duration, 0, tt.n)
			err := OpenLoop(context.Background(), start, tt.n, tt.rate, func(i int, due time.Duration) {
				calls = append(calls, time.Since(start))
				dues = append(dues, due)
				if tt.name == "slow start catches up" && i == 0 {
					// The first call is late by 10 intervals: the next ten are due already.
					for time.Since(start) < 10*time.Duration(1e9/tt.rate) {
						continue
					}
				}
			})
			if err != nil {
				t.Fatalf("OpenLoop() error = %v", err)
			}
			if len(calls) != tt.n {
				t.Fatalf("OpenLoop made %d calls, want %d", len(calls), tt.n)
			}
			interval := time.Duration(1e9 / tt.rate)
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
