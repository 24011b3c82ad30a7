package klog

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/benbjohnson/clock"
)

// recorder keeps the records a handler gets.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// TestLog: a nil Log logs nothing and stops at once; a Log hands each record, with
// its level, attributes and its caller as source, to the handler's goroutine.
func TestLog(t *testing.T) {
	var none *Log
	none.Warn("nothing")
	none.Info("nothing")
	if !none.Stop(nil) || none.OnGoroutine(1) || New(nil, nil, nil, nil) != nil {
		t.Fatalf("a nil Log: Stop false, OnGoroutine true, or New(nil) not nil")
	}
	var rec recorder
	l := New(slog.New(&rec), clock.NewMock(), new(metrics.Counter), new(metrics.Counter))
	l.Warn("w", "k", 1)
	l.Info("i")
	l.Log(slog.LevelError, "e")
	if !l.Stop(nil) {
		t.Fatal("Stop() = false, want true")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.recs) != 3 || rec.recs[0].Level != slog.LevelWarn || rec.recs[1].Level != slog.LevelInfo || rec.recs[2].Level != slog.LevelError {
		t.Fatalf("records = %+v, want warn, info, error", rec.recs)
	}
	if n := rec.recs[0].NumAttrs(); n != 1 {
		t.Errorf("the warning has %d attributes, want 1", n)
	}
	for _, r := range rec.recs {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		if !strings.HasSuffix(f.Function, ".TestLog") {
			t.Errorf("record %q's source is %s, want TestLog", r.Message, f.Function)
		}
	}
}
