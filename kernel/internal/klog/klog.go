// Package klog writes a kernel's log records to the user's slog.Logger without
// letting the user's handler hold up a goroutine of the kernel.
package klog

import (
	"context"
	"log/slog"
	"runtime"

	"github.com/VictoriaMetrics/metrics"
	"github.com/axsched/ax/kernel/internal/callback"
	"github.com/benbjohnson/clock"
)

// queueLen bounds the records waiting for the handler; past it records are
// dropped and counted (kernel.Stats.LogsDropped).
const queueLen = 256

// Log writes the kernel's records to Config.Logger. No goroutine of the kernel
// calls the user's handler: each builds its record (level, message, attributes,
// source) and hands it to a callback.Queue, whose goroutine calls the handler's
// Enabled and Handle. A handler that blocks, panics or calls runtime.Goexit so
// holds up or ends no goroutine whose progress the kernel promises, and Shutdown
// and Close wait for it within their bounds, like OnEvent. A nil *Log (no Logger)
// logs nothing. Immutable; safe for concurrent use.
type Log struct {
	h       slog.Handler
	q       *callback.Queue[slog.Record]
	clk     clock.Clock
	dropped *metrics.Counter
}

// New returns nil when l is nil. panics counts the handler's panics, dropped the
// records dropped.
func New(l *slog.Logger, clk clock.Clock, panics, dropped *metrics.Counter) *Log {
	if l == nil {
		return nil
	}
	kl := &Log{h: l.Handler(), clk: clk, dropped: dropped}
	kl.q = callback.NewQueue(kl.handle, queueLen, panics)
	return kl
}

// handle passes r to the user's handler. It runs on the queue's goroutine.
func (l *Log) handle(r slog.Record) {
	ctx := context.Background()
	if l.h.Enabled(ctx, r.Level) {
		_ = l.h.Handle(ctx, r) // as slog.Logger does, a handler's error goes nowhere
	}
}

// log queues a record; the caller of Warn, Info or Log is its source.
func (l *Log) log(level slog.Level, msg string, args ...any) {
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // skip Callers, log and Warn, Info or Log
	r := slog.NewRecord(l.clk.Now(), level, msg, pcs[0])
	r.Add(args...)
	if l.q.Push(r) > 0 {
		l.dropped.Inc()
	}
}

// Warn queues a record at level Warn.
func (l *Log) Warn(msg string, args ...any) {
	if l != nil {
		l.log(slog.LevelWarn, msg, args...)
	}
}

// Info queues a record at level Info.
func (l *Log) Info(msg string, args ...any) {
	if l != nil {
		l.log(slog.LevelInfo, msg, args...)
	}
}

// Log queues a record at level (the durable goroutines' Logger). l must not be nil.
func (l *Log) Log(level slog.Level, msg string, args ...any) { l.log(level, msg, args...) }

// Stop waits for the records queued before it to be handled, until deadline (nil:
// no bound), and reports whether the handler returned. A nil l reports true.
func (l *Log) Stop(deadline <-chan struct{}) bool {
	return l == nil || l.q.Stop(deadline)
}

// OnGoroutine reports whether gid is the goroutine that calls the handler. A nil
// l reports false.
func (l *Log) OnGoroutine(gid uint64) bool { return l != nil && l.q.GID() == gid }
