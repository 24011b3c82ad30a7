// Command quickstart runs an urgent task and a fan-out on an ax kernel.
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/axsched/ax/kernel"
)

func main() {
	// The zero Config is valid; MaxConcurrency bounds the tasks that run at once.
	k, err := kernel.New(kernel.Config{MaxConcurrency: 100})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// An urgent task: it runs before Normal and Low work, each attempt within 2 s.
	h, err := k.TrySubmit(kernel.Task{
		Priority: kernel.High,
		Timeout:  2 * time.Second,
		Run: func(ctx context.Context) error {
			info, _ := kernel.TaskInfo(ctx)
			fmt.Println("running", info.Priority, "attempt", info.Attempt)
			return nil
		},
	})
	if err != nil {
		log.Fatal(err) // ErrQueueFull or ErrDegraded: no room for it now
	}
	if err := h.Wait(ctx); err != nil {
		log.Fatal(err)
	}

	// A fan-out at Low priority: results in order; the first error cancels the rest.
	words := []string{"alpha", "beta", "gamma"}
	upper, err := kernel.Map(ctx, k, words, func(_ context.Context, w string) (string, error) {
		return strings.ToUpper(w), nil
	}, &kernel.BatchOptions{Priority: kernel.Low})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(upper)

	// Stop intake and let what was accepted finish.
	if err := k.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
}
