package kernel_test

import (
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
)

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
