package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/axsched/ax/kernel"
)

// How both pools call the upstream: callWorkers at once, callAttempts
// attempts per call. ax adds a timeout per attempt, a backoff between
// attempts, a retry budget and a per-key limit; the plain pool retries at once
// and waits for every answer.
const (
	callWorkers  = 16
	callAttempts = 3
	callTimeout  = 200 * time.Millisecond
	keyLimit     = keyCapacity // ax's per-key concurrency: what the upstream serves
	budgetRatio  = 0.1         // ax's retries: at most 10 % of first attempts (and 1/s)
	upstreamName = "upstream"  // ax's group of the calls
)

// callRow is what one pool did with the calls.
type callRow struct {
	label                string
	ok, failed, timedOut int
	retries              int
	cutShort             int // calls that failed with attempts left: the retry budget refused them one
	ended                int // calls that ended (for ax, as Stats counts them)
	wall                 time.Duration
	upstream             upstreamFigures
}

// runCalls makes o.calls calls on ax, then on the plain pool, each with an
// upstream of its own drawn from the same seed.
func runCalls(ctx context.Context, o options) ([]callRow, error) {
	keys := drawKeys(o.seed, o.calls)
	ax, err := axCalls(ctx, newUpstream(o.seed, o.hang), keys)
	if err != nil {
		return nil, err
	}
	plain := plainCalls(newUpstream(o.seed, o.hang), keys)
	return []callRow{ax, plain}, nil
}

// axCalls makes one task per key in keys on a kernel whose group holds each
// key to keyLimit calls at once; each attempt has callTimeout, and failed
// attempts are retried with backoff while the retry budget allows.
func axCalls(ctx context.Context, up *upstream, keys []int) (callRow, error) {
	k, err := kernel.New(kernel.Config{
		MaxConcurrency: callWorkers,
		Groups: map[string]kernel.GroupConfig{
			upstreamName: {PerKey: kernel.Limits{Concurrency: keyLimit}},
		},
		RetryBudget: kernel.RetryBudget{Ratio: budgetRatio, MinPerSecond: 1},
	})
	if err != nil {
		return callRow{}, err
	}
	defer func() { _ = k.Close() }()
	retry := &kernel.RetryPolicy{MaxAttempts: callAttempts, Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}

	row := callRow{label: "ax"}
	handles := make([]*kernel.Handle, 0, len(keys))
	t0 := time.Now()
	for i, key := range keys {
		h, err := k.Submit(ctx, kernel.Task{
			Group:   upstreamName,
			Key:     keyName(key),
			Timeout: callTimeout,
			Retry:   retry,
			Run: func(ctx context.Context) error {
				info, _ := kernel.TaskInfo(ctx)
				return up.call(ctx, i, info.Attempt, key)
			},
		})
		if err != nil {
			return callRow{}, err
		}
		handles = append(handles, h)
	}
	for _, h := range handles {
		_ = h.Wait(ctx) // the state below says how it ended
		row.retries += h.Attempts() - 1
		switch h.State() {
		case kernel.Succeeded:
			row.ok++
		case kernel.TimedOut:
			row.timedOut++
		case kernel.Failed:
			row.failed++
		}
		if h.State() != kernel.Succeeded && h.Attempts() < callAttempts {
			row.cutShort++
		}
	}
	row.wall = time.Since(t0)
	if err := k.Shutdown(ctx); err != nil {
		return callRow{}, err
	}
	st := k.Stats()
	row.ended = int(st.Terminal())
	row.upstream = up.figures()
	return row, nil
}

// plainCalls makes the same calls on a plain pool: callWorkers goroutines
// over a channel, each call tried up to callAttempts times in a row, without
// a timeout or a limit per key.
func plainCalls(up *upstream, keys []int) callRow {
	row := callRow{label: "plain pool"}
	errs := make([]error, len(keys))
	tries := make([]int, len(keys))
	calls := make(chan int, len(keys))
	t0 := time.Now()
	var wg sync.WaitGroup
	for range callWorkers {
		wg.Go(func() {
			for i := range calls {
				for tries[i] = 1; ; tries[i]++ {
					errs[i] = up.call(context.Background(), i, tries[i], keys[i])
					if errs[i] == nil || tries[i] == callAttempts {
						break
					}
				}
			}
		})
	}
	for i := range keys {
		calls <- i
	}
	close(calls)
	wg.Wait()
	row.wall = time.Since(t0)
	for i, err := range errs {
		row.retries += tries[i] - 1
		row.ended++
		switch {
		case err == nil:
			row.ok++
		case errors.Is(err, context.DeadlineExceeded):
			row.timedOut++
		default:
			row.failed++
		}
	}
	row.upstream = up.figures()
	return row
}
