package spin

import (
	"runtime"
	"sync"
	"testing"
)

// TestSpinMutexExcludes checks that Mutex is a mutex: goroutines that
// increment a plain counter under it, past its spinning tries, lose no
// increment (and -race sees no race).
func TestSpinMutexExcludes(t *testing.T) {
	var mu Mutex
	n := 0
	var wg sync.WaitGroup
	const workers, each = 8, 2000
	for range workers {
		wg.Go(func() {
			for range each {
				mu.Lock()
				n++
				if n%500 == 0 {
					// A long hold sends the others past their tries, to sleep.
					for range 1000 {
						runtime.Gosched()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n != workers*each {
		t.Fatalf("counter = %d, want %d", n, workers*each)
	}
}
