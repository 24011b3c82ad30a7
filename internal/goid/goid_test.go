package goid

import (
	"bytes"
	"testing"
)

// TestIDAndStack: goroutines have distinct non-zero IDs, and Stack finds a live
// goroutine's stack by its ID and nothing for an ID that is gone or zero.
func TestIDAndStack(t *testing.T) {
	self := ID()
	if self == 0 {
		t.Fatal("ID() = 0")
	}
	got := make(chan uint64)
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		got <- ID()
		<-release
	}()
	other := <-got
	if other == 0 || other == self {
		t.Fatalf("the other goroutine's ID = %d, want non-zero and not %d", other, self)
	}
	st := Stack(other)
	if !bytes.Contains(st, []byte("TestIDAndStack")) {
		t.Errorf("Stack(%d) = %q, want the goroutine's frames", other, st)
	}
	close(release)
	<-done
	if st := Stack(0); st != nil {
		t.Errorf("Stack(0) = %q, want nil", st)
	}
}
