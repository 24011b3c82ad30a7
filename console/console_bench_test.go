package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

// benchConsole is a console with a full ring of samples, three groups and ten
// schedules, on a kernel that ran work of each priority.
func benchConsole(b *testing.B) (*kernel.Kernel, *console) {
	b.Helper()
	k, err := kernel.New(kernel.Config{Groups: map[string]kernel.GroupConfig{"a": {}, "b": {}, "c": {}}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := schedule.New(k, schedule.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		if _, err := s.Add(schedule.Every(time.Hour), func(context.Context, schedule.Fire) error { return nil },
			&schedule.Options{Name: "schedule-of-bench-" + itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range []kernel.Priority{kernel.High, kernel.Normal, kernel.Low} {
		if _, err := kernel.Map(context.Background(), k, make([]int, 100), func(context.Context, int) (int, error) { return 0, nil },
			&kernel.BatchOptions{Priority: p}); err != nil {
			b.Fatal(err)
		}
	}
	h, err := New(Options{Kernel: k, Scheduler: s, Actions: true, Interval: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	c := h.(*console)
	for range historyDefault {
		c.sm.take()
	}
	b.Cleanup(func() {
		_ = k.Close()
		<-c.sm.done
		s.Stop()
	})
	return k, c
}

func benchGet(b *testing.B, path string) {
	_, c := benchConsole(b)
	req := httptest.NewRequest(http.MethodGet, path, nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s = %d", path, rec.Code)
		}
	}
}

// BenchmarkOverview serves the overview page with 300 samples in its charts.
func BenchmarkOverview(b *testing.B) { benchGet(b, "/") }

// BenchmarkOverviewAPI serves GET api/v1/overview with 300 samples.
func BenchmarkOverviewAPI(b *testing.B) { benchGet(b, "/api/v1/overview") }

// BenchmarkSchedules serves the schedules page with ten schedules.
func BenchmarkSchedules(b *testing.B) { benchGet(b, "/schedules") }

// BenchmarkNoopPolled runs no-op tasks through Kernel.Go, alone and beside a
// console whose overview is fetched every 100 ms (and which samples every
// 100 ms).
func BenchmarkNoopPolled(b *testing.B) {
	noop := func(context.Context) error { return nil }
	for _, polled := range []bool{false, true} {
		name := "console=off"
		if polled {
			name = "console=polled"
		}
		b.Run(name, func(b *testing.B) {
			k, err := kernel.New(kernel.Config{MaxConcurrency: 500})
			if err != nil {
				b.Fatal(err)
			}
			stop, done := make(chan struct{}), make(chan struct{})
			if polled {
				h, err := New(Options{Kernel: k, Interval: 100 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer close(done)
					t := time.NewTicker(100 * time.Millisecond)
					defer t.Stop()
					req := httptest.NewRequest(http.MethodGet, "/", nil)
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							h.ServeHTTP(httptest.NewRecorder(), req)
						}
					}
				}()
				defer func() { <-h.(*console).sm.done }()
			} else {
				close(done)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := k.Go(ctx, kernel.Task{Run: noop}); err != nil {
					b.Fatal(err)
				}
			}
			if err := k.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			close(stop)
			<-done
		})
	}
}
