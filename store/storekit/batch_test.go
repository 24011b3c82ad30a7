package storekit_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

var now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func insert(id string) store.Change {
	return store.Change{Op: store.OpInsert, Task: store.StoredTask{ID: id, Kind: "k", State: store.Queued, Fence: 1, UpdatedAt: now}}
}

func start(id string, from, to uint64, attempt int) store.Change {
	return store.Change{Op: store.OpStart, Fence: from, Task: store.StoredTask{ID: id, Fence: to, Attempt: attempt, UpdatedAt: now}}
}

func succeed(id string, fence uint64) store.Change {
	return store.Change{Op: store.OpSucceed, Fence: fence, Task: store.StoredTask{ID: id, UpdatedAt: now}}
}

func TestRefuseBeforeInsert(t *testing.T) {
	errTooLarge := errors.New("too large")
	tests := []struct {
		name    string
		changes []store.Change
		pre     map[int]error // refusals decided before the call
		refused []int         // indexes refused by the call
	}{
		{"start before insert", []store.Change{start("a", 1, 2, 1), insert("a"), succeed("a", 1)}, nil, []int{0}},
		{"insert first", []store.Change{insert("a"), start("a", 1, 2, 1)}, nil, nil},
		{"no insert in the batch", []store.Change{start("a", 1, 2, 1), succeed("a", 2)}, nil, nil},
		{"other task's insert", []store.Change{start("a", 1, 2, 1), insert("b")}, nil, nil},
		{"refused insert does not count", []store.Change{start("a", 1, 2, 1), insert("a")}, map[int]error{1: errTooLarge}, nil},
		{"refused change is kept", []store.Change{start("a", 1, 2, 1), insert("a")}, map[int]error{0: errTooLarge}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := make([]error, len(tt.changes))
			for i, err := range tt.pre {
				results[i] = err
			}
			storekit.RefuseBeforeInsert(tt.changes, results)
			for i, err := range results {
				switch {
				case tt.pre[i] != nil:
					if err != tt.pre[i] { //nolint:errorlint // the very error passed in must be kept
						t.Errorf("results[%d] = %v, want %v kept", i, err, tt.pre[i])
					}
				case slices.Contains(tt.refused, i):
					if !errors.Is(err, store.ErrInvalidChange) {
						t.Errorf("results[%d] = %v, want ErrInvalidChange", i, err)
					}
				case err != nil:
					t.Errorf("results[%d] = %v, want nil", i, err)
				}
			}
		})
	}
}

func TestNextOfTask(t *testing.T) {
	changes := []store.Change{insert("a"), insert("b"), start("a", 1, 2, 1), succeed("b", 1), succeed("a", 2)}
	if got, want := storekit.NextOfTask(changes), []int{2, 3, 4, -1, -1}; !slices.Equal(got, want) {
		t.Errorf("NextOfTask() = %v, want %v", got, want)
	}
	if got := storekit.NextOfTask(nil); len(got) != 0 {
		t.Errorf("NextOfTask(nil) = %v, want empty", got)
	}
}

func TestAlreadyApplied(t *testing.T) {
	tests := []struct {
		name    string
		changes []store.Change
		i       int
		fence   uint64
		state   store.State
		attempt int
		want    bool
	}{
		{"where the change leaves it", []store.Change{start("a", 1, 2, 1)}, 0, 2, store.Running, 1, true},
		{"where the batch leaves it", []store.Change{start("a", 1, 2, 1), succeed("a", 2)}, 0, 2, store.Succeeded, 1, true},
		{"terminal change done", []store.Change{succeed("a", 2)}, 0, 2, store.Succeeded, 1, true},
		{"another attempt owns it", []store.Change{start("a", 1, 2, 1)}, 0, 3, store.Running, 2, false},
		{"same fence, other attempt", []store.Change{start("a", 1, 2, 1)}, 0, 2, store.Running, 2, false},
		{"attempt unknown", []store.Change{start("a", 1, 2, 1)}, 0, 2, store.Running, -1, false},
		{"succeeded is not failed", []store.Change{succeed("a", 2)}, 0, 2, store.Failed, 1, false},
		{"chain broken by a fence", []store.Change{start("a", 1, 2, 1), succeed("a", 3)}, 0, 3, store.Succeeded, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := make([]error, len(tt.changes))
			next := storekit.NextOfTask(tt.changes)
			if got := storekit.AlreadyApplied(tt.changes, results, next, tt.i, tt.fence, tt.state, tt.attempt); got != tt.want {
				t.Errorf("AlreadyApplied(fence %d, %v, attempt %d) = %v, want %v", tt.fence, tt.state, tt.attempt, got, tt.want)
			}
		})
	}
}
