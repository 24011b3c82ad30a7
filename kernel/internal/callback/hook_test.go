package callback

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// TestHookCalls: Start, End and Headers recover the panics of the user's hooks and
// count them, Start falls back to its ctx, Headers copies and caps.
func TestHookCalls(t *testing.T) {
	var panics metrics.Counter
	ctx := context.Background()
	got, end := Start(&panics, func(context.Context, int) (context.Context, func(error)) { panic("start") }, ctx, 1)
	if got != ctx || end != nil || panics.Get() != 1 {
		t.Fatalf("Start(panicking) = %v, %v, panics %d; want ctx, nil, 1", got, end != nil, panics.Get())
	}
	got, _ = Start(&panics, func(context.Context, int) (context.Context, func(error)) { return nil, nil }, ctx, 1)
	if got != ctx {
		t.Fatalf("Start(nil context) = %v, want ctx", got)
	}
	var seen error
	End(&panics, func(err error) { seen = err }, errors.ErrUnsupported)
	End(&panics, func(error) { panic("end") }, nil)
	End(&panics, nil, nil)
	if !errors.Is(seen, errors.ErrUnsupported) || panics.Get() != 2 {
		t.Fatalf("End: saw %v, panics %d; want ErrUnsupported, 2", seen, panics.Get())
	}
	warned := 0
	warn := func(string, ...any) { warned++ }
	src := map[string]string{"k": "v"}
	h := Headers(&panics, func(context.Context) map[string]string { return src }, ctx, 10, warn)
	src["k"] = "changed"
	if h["k"] != "v" {
		t.Errorf("Headers() = %v, want a copy holding k=v", h)
	}
	if h := Headers(&panics, func(context.Context) map[string]string { return map[string]string{"k": strings.Repeat("v", 10)} }, ctx, 10, warn); h != nil || warned != 1 {
		t.Errorf("Headers(over the cap) = %v, warned %d; want nil, 1", h, warned)
	}
	if h := Headers(&panics, func(context.Context) map[string]string { panic("headers") }, ctx, 10, warn); h != nil || panics.Get() != 3 {
		t.Errorf("Headers(panicking) = %v, panics %d; want nil, 3", h, panics.Get())
	}
	if !Same(map[string]int{}, map[string]int{}) || Same(1, 2) || !Same(nil, nil) {
		t.Error("Same: want true for uncomparable values of one type, false for 1 and 2, true for nil and nil")
	}
}
