package storetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storekit"
	"github.com/axsched/ax/kernel/storetest"
)

func TestFaultStoreConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) kernel.Store {
		s := storetest.NewFaultStore(storekit.NewMemoryStore())
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestFaultStoreInjectFault(t *testing.T) {
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
			s := storetest.NewFaultStore(storekit.NewMemoryStore())
			s.InjectFault(1, tt.applied)
			if res, err := s.Commit(ctx, nil); res != nil || err != nil {
				t.Fatalf("Commit(nil) = %v, %v; want nil, nil without using up the fault", res, err)
			}
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

func TestFaultStoreClear(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewFaultStore(storekit.NewMemoryStore())
	s.InjectFault(5, false)
	s.InjectFault(0, false)
	c := kernel.Change{Op: kernel.OpInsert, Task: kernel.StoredTask{ID: "a", Kind: "k", State: kernel.Queued, UpdatedAt: time.Now()}}
	if res, err := s.Commit(ctx, []kernel.Change{c}); err != nil || res[0] != nil {
		t.Fatalf("Commit() after InjectFault(0) = %v, %v; want [nil], nil", res, err)
	}
}
