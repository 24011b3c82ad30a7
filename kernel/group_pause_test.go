package kernel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestPauseResume(t *testing.T) {
	tests := []struct {
		name   string
		sel    Selector
		paused Task // a task the pause holds back
		free   Task // a task it does not
	}{
		{"group", Selector{Group: "g"}, Task{Group: "g", Key: "a"}, Task{Group: "h", Key: "a"}},
		{"key", Selector{Group: "g", Key: "a"}, Task{Group: "g", Key: "a"}, Task{Group: "g", Key: "b"}},
		{"priority", Selector{Priority: Low}, Task{Priority: Low}, Task{Priority: High}},
		{"priority of a group", Selector{Priority: Low}, Task{Group: "g", Key: "a", Priority: Low}, Task{Group: "g", Key: "a", Priority: High}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// One slot: starts happen one at a time, in the order the kernel chose.
				k := newTestKernel(t, Config{MaxConcurrency: 1, Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1}}, "h": {}}})
				if err := k.Pause(tt.sel); err != nil {
					t.Fatalf("Pause() = %v", err)
				}
				tr := newTracker()
				var paused []*Handle
				for i := range 10 {
					task := tt.paused
					task.Run = tr.run("paused", strconv.Itoa(i), time.Millisecond, nil)
					paused = append(paused, mustSubmit(t, k, task))
				}
				task := tt.free
				task.Run = tr.run("free", "free", time.Millisecond, nil)
				free := mustSubmit(t, k, task)
				if err := free.Wait(context.Background()); err != nil {
					t.Fatalf("free task: Wait() = %v", err)
				}
				advance(time.Second)
				for _, h := range paused {
					if s := h.State(); s != Queued {
						t.Fatalf("paused task's State() = %v, want queued", s)
					}
				}
				if tr.started.Load() != 1 {
					t.Fatalf("%d tasks started while paused, want only the free one", tr.started.Load()-1)
				}
				if err := k.Resume(tt.sel); err != nil {
					t.Fatalf("Resume() = %v", err)
				}
				if got := waitAll(t, paused); got[Succeeded] != 10 {
					t.Fatalf("outcomes = %v", got)
				}
				want := "free 0 1 2 3 4 5 6 7 8 9"
				if got := strings.Join(tr.order, " "); got != want {
					t.Errorf("order = %s, want %s", got, want)
				}
			})
		})
	}
}

// TestPauseStopsGrantedTasks: tasks of a group that hold a permit but have not
// started go back to their key's queue when the group pauses.
func TestPauseStopsGrantedTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, Config{MaxConcurrency: 1, Groups: map[string]GroupConfig{"g": {}}})
		block := make(chan struct{})
		g := gate(block)
		first := mustSubmit(t, k, Task{Run: g.run})
		synctest.Wait()
		tr := newTracker()
		var hs []*Handle
		for i := range 5 {
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: tr.run("k", strconv.Itoa(i), 0, nil)}))
		}
		synctest.Wait()
		if st := k.Stats().Groups["g"]; st.Running != 5 {
			t.Fatalf("permits held = %d, want 5 (in the bucket)", st.Running)
		}
		if err := k.Pause(Selector{Group: "g", Key: "k"}); err != nil {
			t.Fatal(err)
		}
		if st := k.Stats().Groups["g"]; st.Running != 0 || st.Waiting != 5 || st.PausedKeys != 1 {
			t.Fatalf("after Pause: %+v, want 0 running, 5 waiting, 1 paused key", st)
		}
		g.open()
		<-first.Done()
		advance(time.Second)
		if n := tr.started.Load(); n != 0 {
			t.Fatalf("%d started while paused", n)
		}
		if err := k.Resume(Selector{Group: "g", Key: "k"}); err != nil {
			t.Fatal(err)
		}
		waitAll(t, hs)
		if got := strings.Join(tr.order, " "); got != "0 1 2 3 4" {
			t.Errorf("order = %s", got)
		}
	})
}

func TestPauseBadSelector(t *testing.T) {
	k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {}}})
	for _, sel := range []Selector{{}, {Key: "k"}, {Group: "g", Priority: High}, {Priority: 9}, {Group: "nope"}} {
		if err := k.Pause(sel); err == nil {
			t.Errorf("Pause(%+v) = nil, want an error", sel)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Pause(Selector{Group: "g"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Pause() after Close = %v, want ErrClosed", err)
	}
}

// TestGroupStop: every task waiting in the gate ends exactly once, whatever ends it.
func TestGroupStop(t *testing.T) {
	cfg := func() Config {
		return Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1, Rate: Rate{N: 1, Per: time.Hour}}}}}
	}
	t.Run("Cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newTestKernel(t, cfg())
			block := make(chan struct{})
			g := gate(block)
			h1 := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: g.run})
			h2 := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: g.run})
			synctest.Wait()
			h2.Cancel()
			if err := h2.Wait(context.Background()); !errors.Is(err, ErrCanceled) {
				t.Fatalf("Wait() = %v, want ErrCanceled", err)
			}
			g.open()
			if err := h1.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := k.Stats(); st.Groups["g"].Waiting != 0 || st.ByPriority.Normal.Canceled != 1 {
				t.Fatalf("Stats = %+v", st.Groups["g"])
			}
		})
	})
	t.Run("Close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newTestKernel(t, cfg())
			var hs []*Handle
			for range 5 {
				hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: noop}))
			}
			synctest.Wait() // the first runs; the rate holds the others
			if err := k.Pause(Selector{Group: "g"}); err != nil {
				t.Fatal(err)
			}
			hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: noop}))
			synctest.Wait()
			if err := k.Close(); err != nil {
				t.Fatal(err)
			}
			got := waitAll(t, hs)
			if got[Succeeded] != 1 || got[Canceled] != 5 {
				t.Fatalf("outcomes = %v, want 1 succeeded, 5 canceled", got)
			}
			if err := hs[5].Err(); !errors.Is(err, ErrClosed) {
				t.Errorf("Err() = %v, want ErrClosed", err)
			}
		})
	})
	t.Run("Shutdown drains the gate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newTestKernel(t, Config{Groups: map[string]GroupConfig{"g": {PerKey: Limits{Concurrency: 1, Rate: Rate{N: 1, Per: time.Second}}}}})
			var hs []*Handle
			for range 3 {
				hs = append(hs, mustSubmit(t, k, Task{Group: "g", Key: "k", Run: noop}))
			}
			start := time.Now()
			if err := k.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown() = %v", err)
			}
			if got := waitAll(t, hs); got[Succeeded] != 3 {
				t.Fatalf("outcomes = %v", got)
			}
			if d := time.Since(start); d < 2*time.Second {
				t.Errorf("Shutdown returned after %v, want the rate's 2 s", d)
			}
		})
	})
	t.Run("Shutdown waits for a paused group", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k := newTestKernel(t, cfg())
			if err := k.Pause(Selector{Group: "g"}); err != nil {
				t.Fatal(err)
			}
			h := mustSubmit(t, k, Task{Group: "g", Key: "k", Run: noop})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := k.Shutdown(ctx)
			var se *ShutdownError
			if !errors.As(err, &se) || se.Queued != 1 {
				t.Fatalf("Shutdown() = %v, want a ShutdownError counting 1 queued", err)
			}
			if err := k.Resume(Selector{Group: "g"}); err != nil {
				t.Fatal(err)
			}
			if err := h.Wait(context.Background()); err != nil {
				t.Fatalf("Wait() = %v", err)
			}
			if err := k.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestGroupEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var notes []string
		groupOf := map[string]string{}
		k := newTestKernel(t, Config{
			Groups: map[string]GroupConfig{"g": {PerKey: Limits{Rate: Rate{N: 1, Per: time.Second}}}},
			OnEvent: func(e Event) {
				mu.Lock()
				defer mu.Unlock()
				if e.Note != 0 {
					notes = append(notes, strconv.Itoa(int(e.Note))+":"+e.Group+"/"+e.Key)
				} else if e.TaskID != "" {
					groupOf[e.TaskID] = e.Group + "/" + e.Key
				}
			},
		})
		h1 := mustSubmit(t, k, Task{ID: "t1", Group: "g", Key: "k", Run: noop})
		h2 := mustSubmit(t, k, Task{ID: "t2", Group: "g", Key: "k", Run: noop})
		waitAll(t, []*Handle{h1, h2})
		if err := k.Pause(Selector{Group: "g", Key: "k"}); err != nil {
			t.Fatal(err)
		}
		if err := k.Resume(Selector{Group: "g"}); err != nil { // not paused: nothing
			t.Fatal(err)
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{strconv.Itoa(int(NoteThrottled)) + ":g/k", strconv.Itoa(int(NotePaused)) + ":g/k"}
		if strings.Join(notes, " ") != strings.Join(want, " ") {
			t.Errorf("notes = %v, want %v", notes, want)
		}
		if groupOf["t1"] != "g/k" {
			t.Errorf("task event's group/key = %q, want g/k", groupOf["t1"])
		}
	})
}
