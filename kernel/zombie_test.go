package kernel

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recordHandler keeps the messages of the records it handles.
type recordHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// zombieLogs returns the messages about zombies.
func (h *recordHandler) zombieLogs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range h.msgs {
		if strings.Contains(m, "zombie") {
			out = append(out, m)
		}
	}
	return out
}

// TestZombieLoggedOnlyPastGrace: a function that returns soon after its timeout
// is not logged; one that outlives ZombieGrace is logged as still running, then
// as returned.
func TestZombieLoggedOnlyPastGrace(t *testing.T) {
	for _, tt := range []struct {
		name string
		runs time.Duration // how long the function ignores its context
		want int           // zombie log records
	}{
		{"returns within the grace", 11 * time.Millisecond, 0},
		{"outlives the grace", 2 * time.Second, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &recordHandler{}
				k := newTestKernel(t, Config{MaxConcurrency: 2, ZombieGrace: time.Second, Logger: slog.New(h)})
				task := mustSubmit(t, k, Task{Timeout: 10 * time.Millisecond, Retry: &RetryPolicy{MaxAttempts: 1}, Run: stubborn(tt.runs)})
				<-task.Done()
				advance(tt.runs + time.Second)
				if got := h.zombieLogs(); len(got) != tt.want {
					t.Errorf("zombie log records = %q, want %d", got, tt.want)
				}
				if n := len(k.Zombies()); n != 0 {
					t.Errorf("Zombies() after the function returned = %d, want 0", n)
				}
			})
		})
	}
}
