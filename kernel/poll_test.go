package kernel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// TestPollClaimsAtOnce: a task inserted into the pool behind the kernel's back waits
// for the idle claimer's next poll; after Poll it is claimed and runs at once.
func TestPollClaimsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s, Owner: "solo"})
		ran := make(chan string, 2)
		if err := k.Register("k", func(_ context.Context, p []byte) error { ran <- string(p); return nil }); err != nil {
			t.Fatal(err)
		}
		insert := func(id string) {
			t.Helper()
			now := time.Now()
			res, err := s.Commit(context.Background(), []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
				ID: id, Kind: "k", Payload: []byte(id), State: kernel.Queued, Fence: 1, CreatedAt: now, UpdatedAt: now,
			}}})
			if err != nil || res[0] != nil {
				t.Fatalf("Commit() = %v, %v", res, err)
			}
		}
		<-time.After(time.Minute) // the bubble's clock: the claimer found the pool empty and polls at its slowest
		synctest.Wait()

		insert("unpolled")
		start := time.Now()
		if got := <-ran; got != "unpolled" || time.Since(start) < 50*time.Millisecond {
			t.Fatalf("ran %q after %v without Poll; want unpolled, claimed at the next poll", got, time.Since(start))
		}
		<-time.After(time.Minute)
		synctest.Wait()

		insert("polled")
		start = time.Now()
		k.Poll()
		if got := <-ran; got != "polled" || time.Since(start) != 0 {
			t.Fatalf("ran %q after %v with Poll; want polled, at once", got, time.Since(start))
		}
	})
}

// TestPollWithoutSharedStore: Poll on a kernel without a shared store, and after
// Close, does nothing and does not block.
func TestPollWithoutSharedStore(t *testing.T) {
	k, err := kernel.New(kernel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k.Poll()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	k.Poll()
}

// TestClockIsConfigClock: Clock returns Config.Clock, or a real clock without one.
func TestClockIsConfigClock(t *testing.T) {
	mock := clock.NewMock()
	k := newTestKernel(t, kernel.Config{Clock: mock})
	if k.Clock() != mock {
		t.Errorf("Clock() = %v, want Config.Clock", k.Clock())
	}
	rk := newTestKernel(t, kernel.Config{})
	if c := rk.Clock(); c == nil || c.Since(time.Now()) > time.Second {
		t.Errorf("Clock() = %v, want the real clock", c)
	}
}

// TestStopping: Stopping's channel is open while the kernel runs, closed once
// Shutdown or Close began, and the same at every call.
func TestStopping(t *testing.T) {
	for _, stop := range []string{"Shutdown", "Close"} {
		t.Run(stop, func(t *testing.T) {
			k, err := kernel.New(kernel.Config{})
			if err != nil {
				t.Fatal(err)
			}
			ch := k.Stopping()
			select {
			case <-ch:
				t.Fatal("Stopping() closed before the stop")
			default:
			}
			if stop == "Shutdown" {
				err = k.Shutdown(context.Background())
			} else {
				err = k.Close()
			}
			if err != nil {
				t.Fatalf("%s() = %v", stop, err)
			}
			select {
			case <-ch:
			default:
				t.Fatalf("Stopping() open after %s", stop)
			}
			if k.Stopping() != ch {
				t.Error("Stopping() returned another channel")
			}
		})
	}
}
