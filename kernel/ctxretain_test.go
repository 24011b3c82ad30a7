package kernel

import (
	"context"
	"sync"
	"testing"
	"time"
)

type retainKey struct{}

// TestRetainedContextOutlivesTask: a task's function may hand its context to a
// goroutine that uses it after the function returned (net/http's dialer does): the
// context stays valid and keeps its own values, however many tasks run
// after it.
func TestRetainedContextOutlivesTask(t *testing.T) {
	k := newTestKernel(t, Config{})
	later := make(chan struct{})
	var wg sync.WaitGroup
	bad := make(chan string, 1)
	const n = 500
	var ended sync.WaitGroup
	ended.Add(n)
	for i := range n {
		values := context.WithValue(context.Background(), retainKey{}, i)
		err := k.Go(context.Background(), Task{Timeout: time.Minute, Values: values, Run: func(ctx context.Context) error {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ended.Wait()
				<-later
				if v, _ := ctx.Value(retainKey{}).(int); v != i {
					select {
					case bad <- "Value() = another task's value":
					default:
					}
				}
				if _, ok := ctx.Deadline(); !ok {
					select {
					case bad <- "Deadline() lost":
					default:
					}
				}
			}()
			ended.Done()
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	ended.Wait()
	// More tasks reuse whatever the kernel recycles.
	for range n {
		if err := k.Go(context.Background(), Task{Timeout: time.Minute, Run: func(context.Context) error { return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(later)
	wg.Wait()
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
}
