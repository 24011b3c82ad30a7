package taskctx

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestSetFreeze(t *testing.T) {
	var s Result
	if got := s.Get(); got != nil {
		t.Fatalf("Get() before Freeze = %q, want nil", got)
	}
	b := []byte("abc")
	if err := s.Set(b, 3); err != nil {
		t.Fatalf("Set(3 bytes, 3) = %v, want nil", err)
	}
	b[0] = 'x' // Set copied it
	if err := s.Set([]byte("abcd"), 3); err == nil || !strings.Contains(err.Error(), "limit of 3 bytes") {
		t.Fatalf("Set(4 bytes, 3) = %v, want an error naming the limit", err)
	}
	if got := string(s.Freeze()); got != "abc" {
		t.Fatalf("Freeze() = %q, want abc", got)
	}
	if err := s.Set([]byte("z"), 3); !errors.Is(err, ErrEnded) {
		t.Fatalf("Set after Freeze = %v, want ErrEnded", err)
	}
	if got := string(s.Get()); got != "abc" {
		t.Fatalf("Get() = %q, want abc", got)
	}
}

func TestFreezeRacesSet(t *testing.T) {
	for range 200 {
		var s Result
		var wg sync.WaitGroup
		var setErr error
		wg.Go(func() { setErr = s.Set([]byte("r"), 8) })
		got := s.Freeze()
		wg.Wait()
		// Either Set came first (and Freeze returned its result) or it was refused.
		if (setErr == nil) != (string(got) == "r") {
			t.Fatalf("Set = %v, Freeze = %q, Get = %q: a result accepted but lost", setErr, got, s.Get())
		}
	}
}
