package callback

import (
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

func TestQueueDeliversInOrderPastPanicsAndGoexit(t *testing.T) {
	var mu sync.Mutex
	var got []int
	panics := new(metrics.Counter)
	q := NewQueue(func(v int) {
		switch v {
		case 2:
			panic("boom")
		case 4:
			runtime.Goexit()
		}
		mu.Lock()
		got = append(got, v)
		mu.Unlock()
	}, 100, panics)
	if n := q.Push(1, 2, 3, 4, 5); n != 0 {
		t.Fatalf("Push() dropped %d, want 0", n)
	}
	if !q.Stop(nil) {
		t.Fatalf("Stop(nil) = false, want true")
	}
	if want := []int{1, 3, 5}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	if n := panics.Get(); n != 2 {
		t.Errorf("panics = %d, want 2 (a panic and a Goexit)", n)
	}
}

func TestQueueDropsPastLimit(t *testing.T) {
	block := make(chan struct{})
	q := NewQueue(func(int) { <-block }, 2, new(metrics.Counter))
	dropped := q.Push(1, 2, 3, 4, 5) // the goroutine may have taken one already
	close(block)
	q.Stop(nil)
	if dropped < 2 || dropped > 3 {
		t.Errorf("Push(5 values) with limit 2 dropped %d, want 2 or 3", dropped)
	}
}

func TestPool(t *testing.T) {
	panics := new(metrics.Counter)
	p := NewPool(2, 8, panics)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	wg.Add(3)
	for _, f := range []func(){
		func() { panic("boom") },
		func() { runtime.Goexit() },
		func() { mu.Lock(); ran++; mu.Unlock() },
	} {
		if !p.Submit(func() { defer wg.Done(); f() }) {
			t.Fatalf("Submit() = false, want true")
		}
	}
	wg.Wait()
	if n := p.Stop(nil); n != 0 {
		t.Errorf("Stop(nil) = %d still running, want 0", n)
	}
	if ran != 1 || panics.Get() != 2 {
		t.Errorf("ran %d, panics %d, want 1 and 2", ran, panics.Get())
	}
	if p.Has(0) {
		t.Errorf("Has(0) = true, want false")
	}
}
