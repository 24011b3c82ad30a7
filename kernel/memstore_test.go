package kernel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) kernel.Store {
		s := kernel.NewMemoryStore()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestMemoryStoreInjectFault(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(id string) []kernel.Change {
		return []kernel.Change{{Op: kernel.OpInsert, Task: kernel.StoredTask{
			ID: id, Kind: "k", State: kernel.Queued, UniqueKey: "key-" + id, UpdatedAt: now,
		}}}
	}
	tests := []struct {
		name    string
		applied bool
	}{
		{"unreachable", false},
		{"answer lost", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := kernel.NewMemoryStore()
			s.InjectFault(1, tt.applied)
			batch := insert("a")
			if _, err := s.Commit(ctx, batch); !errors.Is(err, kernel.ErrStoreUnavailable) {
				t.Fatalf("Commit() error = %v, want ErrStoreUnavailable", err)
			}
			_, err := s.Get(ctx, "a")
			if got := err == nil; got != tt.applied {
				t.Fatalf("task stored after the failed commit = %v, want %v", got, tt.applied)
			}
			res, err := s.Commit(ctx, batch) // the caller's retry
			if err != nil || res[0] != nil {
				t.Fatalf("retried Commit() = %v, %v; want [nil], nil", res, err)
			}
			if live, _ := s.Recover(ctx); len(live) != 1 {
				t.Fatalf("len(Recover()) = %d, want 1", len(live))
			}
		})
	}
}

func TestChangeValidate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := kernel.Change{Op: kernel.OpInsert, Task: kernel.StoredTask{ID: "a", Kind: "k", State: kernel.Queued, UpdatedAt: now}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	bad := ok
	bad.Task.Kind = ""
	err := bad.Validate()
	if !errors.Is(err, kernel.ErrInvalidChange) {
		t.Fatalf("Validate() = %v, want ErrInvalidChange", err)
	}
	if want := `kernel: invalid change: insert "a": Task.Kind must not be empty`; err.Error() != want {
		t.Errorf("Validate() = %q, want %q", err.Error(), want)
	}
}

func TestChangeOpString(t *testing.T) {
	for op, want := range map[kernel.ChangeOp]string{
		kernel.OpInsert: "insert", kernel.OpStart: "start", kernel.OpRetry: "retry",
		kernel.OpSucceed: "succeed", kernel.OpFail: "fail", kernel.OpCancel: "cancel", 0: "op(0)", 42: "op(42)",
	} {
		if got := op.String(); got != want {
			t.Errorf("ChangeOp(%d).String() = %q, want %q", op, got, want)
		}
	}
}
