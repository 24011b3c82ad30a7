package schedule

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

// script is a schedule's function whose calls do, in turn, what its steps say.
type script struct {
	mu    sync.Mutex
	calls int
	steps []func(ctx context.Context) error
}

func (s *script) run(ctx context.Context, _ Fire) error {
	s.mu.Lock()
	i := s.calls
	s.calls++
	s.mu.Unlock()
	if i >= len(s.steps) {
		return nil
	}
	return s.steps[i](ctx)
}

func fail(text string) func(context.Context) error {
	return func(context.Context) error { return errors.New(text) }
}

// wantLast fails the test unless e's last outcome is o with error text errText
// and a time within [from, to].
func wantLast(t *testing.T, e *Entry, o Outcome, errText string, from, to time.Time) {
	t.Helper()
	l := e.Last()
	if l.Outcome != o || l.Err != errText || l.At.Before(from) || l.At.After(to) {
		t.Fatalf("Last() = {%v %v %.40q}, want {%v in [%v, %v] %.40q}", l.Outcome, l.At, l.Err, o, from, to, errText)
	}
	if st := e.Stats(); st.Outcome != l {
		t.Fatalf("Stats().Outcome = %+v, want Last()'s %+v", st.Outcome, l)
	}
}

// TestLastOutcome follows one schedule's last outcome through a run, a skip, a
// success, failures (one with a hostile error text, one too long), a misfire and a
// success again.
func TestLastOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(2)>` + "\xff\xfe"
		long := "a" + strings.Repeat("é", ErrTextMax) // 'é' is 2 bytes: ErrTextMax falls inside one
		g := make(gate)
		sc := &script{steps: []func(context.Context) error{g.run, fail(hostile), fail(long)}}
		t0 := time.Now()
		at := func(d time.Duration) time.Time { return t0.Add(d) }
		e := mustSchedule(t, sch, Every(time.Second), sc.run, &Options{Name: "o", Misfire: MisfireSkip, Grace: 100 * time.Millisecond, Retry: &kernel.RetryPolicy{MaxAttempts: 1}})
		if l := e.Last(); l != (LastOutcome{}) {
			t.Fatalf("Last() before the first fire = %+v, want zero", l)
		}
		advance(1500 * time.Millisecond)
		wantLast(t, e, OutcomeRunning, "", at(time.Second), at(time.Second))
		advance(time.Second) // 2.5 s: the target of 2 s was skipped
		wantLast(t, e, OutcomeSkipped, "", at(2*time.Second), at(2500*time.Millisecond))
		g.open()
		synctest.Wait()
		wantLast(t, e, OutcomeSucceeded, "", at(time.Second), at(time.Second))
		advance(time.Second) // 3.5 s
		wantLast(t, e, OutcomeFailed, hostile, at(3*time.Second), at(3*time.Second))
		advance(time.Second) // 4.5 s
		l := e.Last()
		if l.Outcome != OutcomeFailed || !strings.HasSuffix(l.Err, "…") || len(l.Err) != ErrTextMax-1+len("…") || !utf8.ValidString(l.Err) {
			t.Fatalf("Last() after a long error = {%v %d bytes, valid UTF-8 %v}, want failed, %d bytes ending in …", l.Outcome, len(l.Err), utf8.ValidString(l.Err), ErrTextMax-1+len("…"))
		}
		if err := e.Pause(); err != nil {
			t.Fatal(err)
		}
		advance(5 * time.Second) // 9.5 s: the targets 5 s to 9 s are late
		if err := e.Resume(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		wantLast(t, e, OutcomeMisfired, "", at(9500*time.Millisecond), at(9500*time.Millisecond))
		advance(time.Second) // 10.5 s: the target of 10 s succeeded
		wantLast(t, e, OutcomeSucceeded, "", at(10*time.Second), at(10*time.Second))
	})
}

// TestLastOutcomeIsTheLastOccurrences: under OverlapAllow an earlier occurrence that
// ends after the last one does not change the outcome.
func TestLastOutcomeIsTheLastOccurrences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		g1, g2 := make(gate), make(gate)
		sc := &script{steps: []func(context.Context) error{
			func(ctx context.Context) error {
				if err := g1.run(ctx); err != nil {
					return err
				}
				return errors.New("the first failed")
			},
			g2.run,
		}}
		t0 := time.Now()
		e := mustSchedule(t, sch, Every(time.Second), sc.run, &Options{Overlap: OverlapAllow, Retry: &kernel.RetryPolicy{MaxAttempts: 1}})
		advance(2500 * time.Millisecond)
		wantLast(t, e, OutcomeRunning, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
		g2.open()
		synctest.Wait()
		wantLast(t, e, OutcomeSucceeded, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
		g1.open()
		synctest.Wait()
		wantLast(t, e, OutcomeSucceeded, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
		e.Remove()
	})
}

// TestLastOutcomeReplace: under OverlapReplace the occurrence replaced ends
// canceled, which is not the outcome: the last one's is.
func TestLastOutcomeReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		g1, g2 := make(gate), make(gate)
		sc := &script{steps: []func(context.Context) error{g1.run, g2.run}}
		t0 := time.Now()
		e := mustSchedule(t, sch, Every(time.Second), sc.run, &Options{Overlap: OverlapReplace, Retry: &kernel.RetryPolicy{MaxAttempts: 1}})
		advance(2500 * time.Millisecond) // the first was canceled at 2 s
		wantLast(t, e, OutcomeRunning, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
		g2.open()
		synctest.Wait()
		wantLast(t, e, OutcomeSucceeded, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
		e.Remove()
	})
}

// TestLastOutcomeQueueOne: under OverlapQueueOne the occurrence waiting is
// submitted when the live one ends; the outcome follows the last one submitted.
func TestLastOutcomeQueueOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sch := setup(t, kernel.Config{}, Config{})
		g := make(gate)
		sc := &script{steps: []func(context.Context) error{func(ctx context.Context) error {
			if err := g.run(ctx); err != nil {
				return err
			}
			return errors.New("the first failed")
		}}}
		t0 := time.Now()
		e := mustSchedule(t, sch, Every(time.Second), sc.run, &Options{Overlap: OverlapQueueOne, Retry: &kernel.RetryPolicy{MaxAttempts: 1}})
		advance(2500 * time.Millisecond) // the occurrence of 2 s waits behind the first
		wantLast(t, e, OutcomeRunning, "", t0.Add(time.Second), t0.Add(time.Second))
		g.open()
		synctest.Wait() // the first failed; the one of 2 s ran and succeeded
		wantLast(t, e, OutcomeSucceeded, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
		e.Remove()
	})
}

// TestLastOutcomeRefusedAndCanceled: an occurrence the kernel has no room for is
// refused, with the kernel's error; one the kernel's Close cancels ends canceled.
func TestLastOutcomeRefusedAndCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, sch := setup(t, kernel.Config{MaxConcurrency: 1, Capacity: kernel.ByPriority[int]{High: 1, Normal: 1, Low: 1}}, Config{})
		g := make(gate)
		mustSubmit(t, k, kernel.Task{Run: g.run}) // runs
		synctest.Wait()
		mustSubmit(t, k, kernel.Task{Run: g.run}) // fills Normal's capacity
		block := make(gate)
		sc := &script{steps: []func(context.Context) error{block.run}}
		t0 := time.Now()
		e := mustSchedule(t, sch, Every(time.Second), sc.run, &Options{Name: "r"})
		advance(1500 * time.Millisecond)
		l := e.Last()
		if l.Outcome != OutcomeRefused || l.Err == "" || !l.At.Equal(t0.Add(time.Second)) {
			t.Fatalf("Last() = %+v, want refused at 1 s with the kernel's error", l)
		}
		g.open()
		advance(time.Second) // 2.5 s: the occurrence of 2 s runs, blocked
		wantLast(t, e, OutcomeRunning, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		wantLast(t, e, OutcomeCanceled, "", t0.Add(2*time.Second), t0.Add(2*time.Second))
	})
}

// TestLastOutcomeDurable: a durable schedule's occurrence is submitted to the
// store; its end is not followed.
func TestLastOutcomeDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		l := newOccLog()
		sch := durKernel(t, s, "a", l, nil)
		e := mustScheduleDurable(t, sch, Every(time.Second), Options{})
		advance(1500 * time.Millisecond)
		st := e.Stats()
		if st.Fires != 1 || st.Outcome.Outcome != OutcomeSubmitted || !st.Outcome.At.Equal(st.Last) || st.Outcome.Err != "" {
			t.Fatalf("Stats() = %+v, want one fire, its outcome submitted at Last", st)
		}
		e.Remove()
	})
}

func TestOutcomeString(t *testing.T) {
	want := []string{"none", "running", "succeeded", "failed", "canceled", "misfired", "skipped", "refused", "submitted", "outcome(?)"}
	for o := range Outcome(len(want)) {
		if got := o.String(); got != want[o] {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, got, want[o])
		}
	}
}
