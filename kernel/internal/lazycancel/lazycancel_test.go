package lazycancel

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestState: a live state has an open Done channel and no Err; Cancel closes it, sets
// Err once (the first error stays), runs the AfterFunc functions not stopped, and a
// later AfterFunc at once.
func TestState(t *testing.T) {
	var s State
	if s.Canceled() || s.Err() != nil {
		t.Fatalf("zero State: Canceled() = %v, Err() = %v; want live", s.Canceled(), s.Err())
	}
	done := s.Done()
	ran := make(chan string, 3)
	s.AfterFunc(func() { ran <- "kept" })
	stop := s.AfterFunc(func() { ran <- "stopped" })
	if !stop() {
		t.Fatal("stop() = false before Cancel, want true")
	}
	s.Cancel(context.DeadlineExceeded)
	s.Cancel(context.Canceled)
	<-done
	if !s.Canceled() || !errors.Is(s.Err(), context.DeadlineExceeded) {
		t.Fatalf("after Cancel: Canceled() = %v, Err() = %v; want true, DeadlineExceeded", s.Canceled(), s.Err())
	}
	if got := <-ran; got != "kept" {
		t.Fatalf("AfterFunc ran %q, want kept", got)
	}
	late := s.AfterFunc(func() { ran <- "late" })
	if got := <-ran; got != "late" {
		t.Fatalf("AfterFunc after Cancel ran %q, want late", got)
	}
	if late() {
		t.Error("stop() of a function that ran = true, want false")
	}
	var c State
	c.Cancel(context.Canceled)
	select {
	case <-c.Done():
	default:
		t.Error("Done() made after Cancel is not closed")
	}
}
