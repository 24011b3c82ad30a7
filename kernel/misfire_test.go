package kernel

import (
	"testing"

	"github.com/axsched/ax/internal/recur"
)

func TestMisfireString(t *testing.T) {
	for _, tt := range []struct {
		m    Misfire
		want string
	}{
		{MisfireDefault, "once"}, {MisfireOnce, "once"}, {MisfireSkip, "skip"}, {MisfireAll, "all"}, {Misfire(9), "misfire(9)"},
	} {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("Misfire(%d).String() = %q, want %q", tt.m, got, tt.want)
		}
	}
	if Misfire(4).Valid() || !MisfireAll.Valid() || !MisfireDefault.Valid() {
		t.Error("Valid() accepts an unknown policy or refuses a defined one")
	}
}

// TestMisfireIsPolicy: kernel's misfire policies and limits are internal/recur's, value
// for value, as the kernel converts one into the other.
func TestMisfireIsPolicy(t *testing.T) {
	for _, tt := range []struct {
		m Misfire
		p recur.Policy
	}{{MisfireDefault, recur.Default}, {MisfireOnce, recur.Once}, {MisfireSkip, recur.Skip}, {MisfireAll, recur.All}} {
		if recur.Policy(tt.m) != tt.p {
			t.Errorf("recur.Policy(%v) = %d, want %d", tt.m, recur.Policy(tt.m), tt.p)
		}
	}
	if MaxCatchUpDefault != recur.CatchUpDefault {
		t.Errorf("MaxCatchUpDefault = %d, recur.CatchUpDefault = %d", MaxCatchUpDefault, recur.CatchUpDefault)
	}
	// Fire and recur.Fire convert into each other.
	if f := Fire(recur.Fire{Missed: 3}); f.Missed != 3 {
		t.Errorf("Fire(recur.Fire{Missed: 3}).Missed = %d", f.Missed)
	}
}
