package kernel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type traceKey struct{}

// TestTaskContextValues: a task's context carries the values of the context it was
// submitted with (Submit) or of Task.Values (any submit method), on every
// attempt and whichever way the task travels (now, delayed, retried, in a batch),
// but never the submitter's cancellation or deadline.
func TestTaskContextValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{RetryBudget: RetryBudget{Disabled: true}})
		var mu sync.Mutex
		seen := map[string][]any{} // case → the trace value of each attempt
		record := func(name string, fail int) func(context.Context) error {
			return func(ctx context.Context) error {
				mu.Lock()
				seen[name] = append(seen[name], ctx.Value(traceKey{}))
				n := len(seen[name])
				mu.Unlock()
				if _, ok := ctx.Deadline(); ok {
					return Permanent(errors.New("the task sees a deadline"))
				}
				if ctx.Err() != nil {
					return Permanent(errors.New("the task's context is done at its start"))
				}
				if n <= fail {
					return errors.New("fails, to be retried")
				}
				return nil
			}
		}
		retry := &RetryPolicy{MaxAttempts: 2, Base: time.Millisecond, Jitter: JitterNone}

		// The submitting ctx has a value, a deadline, and is cancelled right after.
		sub, cancel := context.WithTimeout(context.WithValue(context.Background(), traceKey{}, "req"), time.Hour)
		var hs []*Handle
		h, err := k.Submit(sub, Task{Run: record("Submit", 0)})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		h, err = k.Submit(sub, Task{Run: record("Submit retried", 1), Retry: retry})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		h, err = k.Submit(sub, Task{Run: record("Submit delayed", 0), Delay: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		own := context.WithValue(context.Background(), traceKey{}, "own")
		h, err = k.Submit(sub, Task{Run: record("Values beats Submit's ctx", 0), Values: own})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		h, err = k.TrySubmit(Task{Run: record("TrySubmit with Values", 0), Values: own})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		h, err = k.TrySubmit(Task{Run: record("TrySubmit", 0)})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		for _, c := range []struct {
			name string
			task Task
			ctx  context.Context
		}{
			{"Go", Task{}, sub},
			{"Go with Values", Task{Values: own}, sub},
			{"Go delayed with Values", Task{Values: own, Delay: time.Second}, sub},
			{"Go retried with Values", Task{Values: own, Retry: retry}, sub},
			{"TryGo with Values", Task{Values: own}, nil},
			{"TryGo delayed with Values", Task{Values: own, Delay: time.Second}, nil},
		} {
			fail := 0
			if c.task.Retry != nil {
				fail = 1
			}
			c.task.Run = record(c.name, fail)
			var err error
			if c.ctx != nil {
				err = k.Go(c.ctx, c.task)
			} else {
				err = k.TryGo(c.task)
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		cancel()

		// A batch member sees the batch's context's values.
		bctx := context.WithValue(context.Background(), traceKey{}, "batch")
		b := k.NewBatch(bctx, nil)
		b.Go(record("Batch member", 0))
		if err := b.Wait(); err != nil {
			t.Fatalf("Batch.Wait() = %v", err)
		}
		for _, h := range hs {
			if err := h.Wait(context.Background()); err != nil {
				t.Fatalf("task %s: %v", h.ID(), err)
			}
		}
		advance(2 * time.Second)

		want := map[string][]any{
			"Submit":                    {"req"},
			"Submit retried":            {"req", "req"},
			"Submit delayed":            {"req"},
			"Values beats Submit's ctx": {"own"},
			"TrySubmit with Values":     {"own"},
			"TrySubmit":                 {nil},
			"Go":                        {nil},
			"Go with Values":            {"own"},
			"Go delayed with Values":    {"own"},
			"Go retried with Values":    {"own", "own"},
			"TryGo with Values":         {"own"},
			"TryGo delayed with Values": {"own"},
			"Batch member":              {"batch"},
		}
		mu.Lock()
		defer mu.Unlock()
		for name, w := range want {
			got := seen[name]
			if len(got) != len(w) {
				t.Errorf("%s: the attempts saw %v, want %v", name, got, w)
				continue
			}
			for i := range w {
				if got[i] != w[i] {
					t.Errorf("%s: the attempts saw %v, want %v", name, got, w)
					break
				}
			}
		}
		for _, p := range []Priority{High, Normal, Low} {
			s := k.Stats()
			if ps := s.ByPriority.Get(p); ps.Failed != 0 {
				t.Errorf("Stats().ByPriority[%v].Failed = %d, want 0", p, ps.Failed)
			}
		}
	})
}
