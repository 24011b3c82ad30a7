package storetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
	"github.com/axsched/ax/store/storetest"
)

func TestFaultStoreConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s := storetest.NewFaultStore(storekit.NewMemoryStore())
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestFaultStoreInjectFault(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	insert := func(id string) []store.Change {
		return []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
			ID: id, Kind: "k", State: store.Queued, UniqueKey: "key-" + id, UpdatedAt: now,
		}}}
	}
	tests := []struct {
		name    string
		applied bool
		want    error
	}{
		{"unreachable", false, store.ErrStoreUnavailable},
		{"answer lost", true, store.ErrOutcomeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := storetest.NewFaultStore(storekit.NewMemoryStore())
			s.InjectFault(1, tt.applied)
			if res, err := s.Commit(ctx, nil); res != nil || err != nil {
				t.Fatalf("Commit(nil) = %v, %v; want nil, nil without using up the fault", res, err)
			}
			batch := insert("a")
			if _, err := s.Commit(ctx, batch); !errors.Is(err, tt.want) || tt.applied && errors.Is(err, store.ErrStoreUnavailable) {
				t.Fatalf("Commit() error = %v, want %v (and only it)", err, tt.want)
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
	c := store.Change{Op: store.OpInsert, Task: store.StoredTask{ID: "a", Kind: "k", State: store.Queued, UpdatedAt: time.Now()}}
	if res, err := s.Commit(ctx, []store.Change{c}); err != nil || res[0] != nil {
		t.Fatalf("Commit() after InjectFault(0) = %v, %v; want [nil], nil", res, err)
	}
}
