package callback

import (
	"context"
	"maps"

	"github.com/VictoriaMetrics/metrics"
)

// StartFunc is the shape of a hook called before an attempt runs: it returns the
// context the attempt runs with and a function to call with its outcome.
type StartFunc[I any] func(ctx context.Context, info I) (context.Context, func(error))

// Start calls start(ctx, info) on the calling goroutine. A panic in start is
// recovered and counted in panics; then, as when start returns a nil context, ctx
// and a nil end function are returned, so the attempt runs as if no hook were set.
func Start[I any](panics *metrics.Counter, start StartFunc[I], ctx context.Context, info I) (rctx context.Context, end func(error)) {
	defer func() {
		if r := recover(); r != nil {
			panics.Inc()
			rctx, end = ctx, nil
		}
	}()
	rctx, end = start(ctx, info)
	if rctx == nil {
		return ctx, end
	}
	return rctx, end
}

// End calls end(err) on the calling goroutine, unless end is nil. A panic in it is
// recovered and counted in panics.
func End(panics *metrics.Counter, end func(error), err error) {
	if end == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			panics.Inc()
		}
	}()
	end(err)
}

// Headers calls f(ctx) on the calling goroutine and returns a copy of its headers
// when their keys and values together take at most maxBytes bytes. It returns nil
// when f returns none or panics (a panic is recovered and counted in panics), and
// when they take more (then it calls warn).
func Headers(panics *metrics.Counter, f func(context.Context) map[string]string, ctx context.Context, maxBytes int, warn func(msg string, args ...any)) (h map[string]string) {
	defer func() {
		if r := recover(); r != nil {
			panics.Inc()
			h = nil
		}
	}()
	h = f(ctx)
	n := 0
	for k, v := range h {
		n += len(k) + len(v)
	}
	if n > maxBytes {
		warn("kernel: Hooks.Headers returned more than store.HeadersMax bytes; the tasks are stored without headers", "bytes", n)
		return nil
	}
	if len(h) == 0 {
		return nil
	}
	return maps.Clone(h)
}

// Same reports whether a == b, and true when they hold values of the same type that
// cannot be compared (== panics): a user's value in a config field that cannot
// change is then taken as unchanged.
func Same(a, b any) (same bool) {
	defer func() {
		if recover() != nil {
			same = true
		}
	}()
	return a == b
}
