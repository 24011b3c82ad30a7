package callback

import (
	"runtime"
	"sync"
	"testing"

	"github.com/axsched/ax/internal/goid"
)

// TestGuarded: Guarded returns f's panic value, survives runtime.Goexit, and
// keeps the goroutine's ID in own while f runs, only then.
func TestGuarded(t *testing.T) {
	var own sync.Map
	mine := false
	if r, ok := Guarded(&own, func() { _, mine = own.Load(goid.ID()) }); r != nil || !ok || !mine {
		t.Errorf("Guarded(returns) = %v, %v, own while running %v; want nil, true, true", r, ok, mine)
	}
	if r, ok := Guarded(&own, func() { panic("boom") }); r != "boom" || ok {
		t.Errorf("Guarded(panics) = %v, %v; want boom, false", r, ok)
	}
	if r, ok := Guarded(&own, runtime.Goexit); r != nil || ok {
		t.Errorf("Guarded(Goexit) = %v, %v; want nil, false", r, ok)
	}
	n := 0
	own.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Errorf("own holds %d goroutines after the calls, want 0", n)
	}
}
