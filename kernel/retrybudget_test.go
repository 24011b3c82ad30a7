package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// tightBudget allows two retries a second and nothing more: a 1 s window with a
// floor of 1 retry, and a ratio too small to add one.
var tightBudget = kernel.RetryBudget{Ratio: 1e-9, MinPerSecond: 1, Window: time.Second}

// eventLog records the events of a kernel.
type eventLog struct {
	mu  sync.Mutex
	evs []kernel.Event
}

func (l *eventLog) add(ev kernel.Event) { l.mu.Lock(); l.evs = append(l.evs, ev); l.mu.Unlock() }

// refusals returns the NoteRetryRefused events, and the state the event after
// each one enters.
func (l *eventLog) refusals() (evs []kernel.Event, next []kernel.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ev := range l.evs {
		if ev.Note == kernel.NoteRetryRefused {
			evs = append(evs, ev)
			if i+1 < len(l.evs) {
				next = append(next, l.evs[i+1].To)
			}
		}
	}
	return evs, next
}

func refusedMetric(t *testing.T, k *kernel.Kernel) string {
	t.Helper()
	var b bytes.Buffer
	k.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, `ax_retries_refused_total{priority="normal"}`) {
			return line
		}
	}
	return ""
}

// TestRetryBudgetRefusalEndsInMemoryTask: a retry the budget refuses ends the
// task with an error that wraps both ErrRetryBudget and the attempt's error, and
// is counted, exported and reported as an event.
func TestRetryBudgetRefusalEndsInMemoryTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		k := newTestKernel(t, kernel.Config{RetryBudget: tightBudget, OnEvent: log.add})
		errDown := errors.New("upstream down")
		h, err := k.TrySubmit(kernel.Task{
			ID:    "t1",
			Retry: &kernel.RetryPolicy{MaxAttempts: 5, Base: time.Millisecond, Jitter: kernel.JitterNone},
			Run:   func(context.Context) error { return errDown },
		})
		if err != nil {
			t.Fatal(err)
		}
		err = h.Wait(context.Background())
		if !errors.Is(err, kernel.ErrRetryBudget) || !errors.Is(err, errDown) {
			t.Fatalf("Wait() = %v, want ErrRetryBudget and the attempt's error", err)
		}
		if h.State() != kernel.Failed || h.Attempts() != 3 {
			t.Fatalf("State(), Attempts() = %v, %d, want Failed, 3 (two retries allowed)", h.State(), h.Attempts())
		}
		if got := k.Stats().ByPriority.Normal.RetriesRefused; got != 1 {
			t.Errorf("Stats().ByPriority.Normal.RetriesRefused = %d, want 1", got)
		}
		if got, want := refusedMetric(t, k), `ax_retries_refused_total{priority="normal"} 1`; got != want {
			t.Errorf("metric = %q, want %q", got, want)
		}
		synctest.Wait() // the events are delivered
		evs, next := log.refusals()
		if len(evs) != 1 || evs[0].TaskID != "t1" || evs[0].Attempt != 3 || !errors.Is(evs[0].Err, errDown) || evs[0].From != 0 || evs[0].To != 0 {
			t.Fatalf("NoteRetryRefused events = %+v, want one for t1's attempt 3 with its error", evs)
		}
		if len(next) != 1 || next[0] != kernel.Failed {
			t.Errorf("state after the refusal = %v, want Failed", next)
		}
	})
}

// TestRetryBudgetRefusalDurableWaits: a durable task's retry that the budget
// refuses waits, Retrying, until the budget allows it, without spending an
// attempt: it never becomes a dead letter with attempts left.
func TestRetryBudgetRefusalDurableWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{
			Store: s, RetryBudget: tightBudget, OnEvent: log.add,
			Retry: kernel.ByPriority[kernel.RetryPolicy]{Normal: kernel.RetryPolicy{Base: 10 * time.Millisecond, Jitter: kernel.JitterNone}},
		})
		var calls atomic.Int32
		_ = k.Register("flaky", func(context.Context, []byte) error {
			if calls.Add(1) < 4 {
				return errors.New("flaky")
			}
			return nil
		})
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "flaky", MaxAttempts: 4})
		if err != nil {
			t.Fatal(err)
		}
		<-time.After(500 * time.Millisecond) // virtual: three attempts ran, the third retry was refused
		synctest.Wait()
		if h.State() != kernel.Retrying || calls.Load() != 3 {
			t.Fatalf("State() = %v after %d calls, want Retrying after 3 (the budget refused the retry)", h.State(), calls.Load())
		}
		if n, _ := s.CountDeadLetters(context.Background()); n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
		if got := k.Stats().ByPriority.Normal.RetriesRefused; got != 1 {
			t.Errorf("Stats().ByPriority.Normal.RetriesRefused = %d, want 1", got)
		}
		if got, want := refusedMetric(t, k), `ax_retries_refused_total{priority="normal"} 1`; got != want {
			t.Errorf("metric = %q, want %q", got, want)
		}
		if evs, next := log.refusals(); len(evs) != 1 || evs[0].TaskID != h.ID() || len(next) != 1 || next[0] != kernel.Retrying {
			t.Errorf("NoteRetryRefused events = %+v then %v, want one for the task, then Retrying", evs, next)
		}
		if err := h.Wait(context.Background()); err != nil { // the window slid: the retry runs
			t.Fatalf("Wait() = %v, want success at the fourth attempt", err)
		}
		if h.Attempts() != 4 || calls.Load() != 4 {
			t.Fatalf("Attempts() = %d after %d calls, want 4", h.Attempts(), calls.Load())
		}
		if err := k.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := stored(t, s, h.ID()); st.State != kernel.Succeeded || st.Attempt != 4 {
			t.Fatalf("stored %+v, want Succeeded at attempt 4", st)
		}
	})
}
