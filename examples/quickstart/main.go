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
	k, err := kernel.New(kernel.Config{MaxConcurrency: 100}) // the zero Config is valid too
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// An urgent task: it runs before Normal and Low work, each attempt within 2 s.
	h, err := k.TrySubmit(kernel.Task{Priority: kernel.High, Timeout: 2 * time.Second, Run: func(ctx context.Context) error {
		info, _ := kernel.TaskInfo(ctx)
		fmt.Println("running", info.Priority, "attempt", info.Attempt)
		return nil
	}})
	if err != nil {
		log.Fatal(err) // ErrQueueFull or ErrDegraded: no room for it now
	}
	fmt.Println(h.Wait(ctx), h.State())
	upper, err := kernel.Map(ctx, k, []string{"alpha", "beta"}, func(_ context.Context, w string) (string, error) {
		return strings.ToUpper(w), nil // a fan-out at Low priority: results in order
	}, &kernel.BatchOptions{Priority: kernel.Low})
	fmt.Println(upper, err)
	fmt.Println(k.Shutdown(ctx)) // stop intake; what was accepted finishes
}
