package kernel

import (
	"context"
	"log/slog"
	"runtime"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/kernel/internal/callback"
	"github.com/benbjohnson/clock"
)

// logQueueLen bounds the records waiting for Config.Logger's handler; past it
// records are dropped and counted (Stats.LogsDropped).
const logQueueLen = 256

// kernelLog writes the kernel's records to Config.Logger. No goroutine of the
// kernel calls the user's handler: each builds its record (level, message,
// attributes, source) and hands it to a callback.Queue, whose goroutine calls the
// handler's Enabled and Handle. A handler that blocks, panics or calls
// runtime.Goexit so holds up or ends no goroutine whose progress the kernel
// promises, and Shutdown and Close wait for it within their bounds, like OnEvent.
// A nil *kernelLog (no Logger) logs nothing. Immutable.
type kernelLog struct {
	h       slog.Handler
	q       *callback.Queue[slog.Record]
	clk     clock.Clock
	dropped *metrics.Counter
}

// newKernelLog returns nil when l is nil.
func newKernelLog(l *slog.Logger, clk clock.Clock, panics, dropped *metrics.Counter) *kernelLog {
	if l == nil {
		return nil
	}
	kl := &kernelLog{h: l.Handler(), clk: clk, dropped: dropped}
	kl.q = callback.NewQueue(kl.handle, logQueueLen, panics)
	return kl
}

// handle passes r to the user's handler. It runs on the queue's goroutine.
func (l *kernelLog) handle(r slog.Record) {
	ctx := context.Background()
	if l.h.Enabled(ctx, r.Level) {
		_ = l.h.Handle(ctx, r) // as slog.Logger does, a handler's error goes nowhere
	}
}

// log queues a record; the caller of warn, info or Log is its source.
func (l *kernelLog) log(level slog.Level, msg string, args ...any) {
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // skip Callers, log and warn or info
	r := slog.NewRecord(l.clk.Now(), level, msg, pcs[0])
	r.Add(args...)
	if l.q.Push(r) > 0 {
		l.dropped.Inc()
	}
}

func (l *kernelLog) warn(msg string, args ...any) {
	if l != nil {
		l.log(slog.LevelWarn, msg, args...)
	}
}

func (l *kernelLog) info(msg string, args ...any) {
	if l != nil {
		l.log(slog.LevelInfo, msg, args...)
	}
}

// Log is log for the durable goroutines ([durable.Logger]).
func (l *kernelLog) Log(level slog.Level, msg string, args ...any) { l.log(level, msg, args...) }

// stop waits for the records queued before it to be handled, until deadline (nil:
// no bound), and reports whether the handler returned. A nil l reports true.
func (l *kernelLog) stop(deadline <-chan struct{}) bool {
	return l == nil || l.q.Stop(deadline)
}
