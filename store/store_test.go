package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

func TestChangeValidate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := store.Change{Op: store.OpInsert, Task: store.StoredTask{ID: "a", Kind: "k", State: store.Queued, UpdatedAt: now}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	bad := ok
	bad.Task.Kind = ""
	err := bad.Validate()
	if !errors.Is(err, store.ErrInvalidChange) {
		t.Fatalf("Validate() = %v, want ErrInvalidChange", err)
	}
	if want := `store: invalid change: insert "a": Task.Kind must not be empty`; err.Error() != want {
		t.Errorf("Validate() = %q, want %q", err.Error(), want)
	}
}

func TestChangeOpString(t *testing.T) {
	for op, want := range map[store.ChangeOp]string{
		store.OpInsert: "insert", store.OpStart: "start", store.OpRetry: "retry",
		store.OpSucceed: "succeed", store.OpFail: "fail", store.OpCancel: "cancel", 0: "op(0)", 42: "op(42)",
	} {
		if got := op.String(); got != want {
			t.Errorf("ChangeOp(%d).String() = %q, want %q", op, got, want)
		}
	}
}
