package kernel

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/kernel/internal/check"
)

// The arithmetic of a key's breaker (its window, trips, states, probes and open
// periods) is tested in internal/breaker; these tests cover the config the
// kernel hands it.

const (
	msec = time.Millisecond
	sec  = time.Second
)

func TestBreakerStateString(t *testing.T) {
	for _, tt := range []struct {
		s    BreakerState
		want string
	}{{BreakerClosed, "closed"}, {BreakerOpen, "open"}, {BreakerHalfOpen, "half-open"}, {0, "BreakerState(0)"}} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("BreakerState(%d).String() = %q, want %q", uint8(tt.s), got, tt.want)
		}
	}
}

// TestBreakerStateValues: breakerState converts the arithmetic's states by value.
func TestBreakerStateValues(t *testing.T) {
	for _, tt := range []struct {
		s    breaker.State
		want BreakerState
	}{{breaker.Closed, BreakerClosed}, {breaker.Open, BreakerOpen}, {breaker.HalfOpen, BreakerHalfOpen}} {
		if got := breakerState(tt.s); got != tt.want {
			t.Errorf("breakerState(%v) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

// TestBreakerParams: params carries every field the arithmetic uses.
func TestBreakerParams(t *testing.T) {
	c := BreakerConfig{
		Window: 3 * sec, MinCalls: 7, FailureRatio: 0.3, SlowCall: 40 * msec, SlowRatio: 0.6,
		OpenFor: 2 * sec, MaxOpenFor: 9 * sec, Probes: 4, FailFast: true,
	}
	want := &breaker.Config{
		Window: 3 * sec, MinCalls: 7, FailureRatio: 0.3, SlowCall: 40 * msec, SlowRatio: 0.6,
		OpenFor: 2 * sec, MaxOpenFor: 9 * sec, Probes: 4,
	}
	if got := c.params(); !reflect.DeepEqual(got, want) {
		t.Errorf("params() = %+v, want %+v", got, want)
	}
	// A field of breaker.Config that params does not set would be zero here.
	v := reflect.ValueOf(*c.params())
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("params().%s is zero, want it set from BreakerConfig", v.Type().Field(i).Name)
		}
	}
}

func TestBreakerConfigValidate(t *testing.T) {
	const prefix = `Config.Groups["x"].Breaker`
	tests := []struct {
		name  string
		cfg   BreakerConfig
		field string // "" when valid
	}{
		{"zero", BreakerConfig{}, ""},
		{"largest", BreakerConfig{
			Window: check.BreakerWindowMax, MinCalls: check.BreakerMinCallsMax, FailureRatio: 1, SlowCall: time.Duration(math.MaxInt64),
			SlowRatio: 1, OpenFor: check.BreakerOpenForMax, MaxOpenFor: check.BreakerOpenForMax, Probes: check.BreakerProbesMax,
		}, ""},
		{"smallest", BreakerConfig{
			Window: check.BreakerWindowMin, MinCalls: 1, FailureRatio: math.SmallestNonzeroFloat64, SlowCall: 1,
			SlowRatio: math.SmallestNonzeroFloat64, OpenFor: check.BreakerOpenForMin, MaxOpenFor: check.BreakerOpenForMin, Probes: 1,
		}, ""},
		{"OpenFor beyond MaxOpenForDefault", BreakerConfig{OpenFor: time.Hour}, ""},
		{"Window negative", BreakerConfig{Window: -1}, "Window"},
		{"Window below min", BreakerConfig{Window: check.BreakerWindowMin - 1}, "Window"},
		{"Window above max", BreakerConfig{Window: check.BreakerWindowMax + 1}, "Window"},
		{"MinCalls negative", BreakerConfig{MinCalls: -1}, "MinCalls"},
		{"MinCalls above max", BreakerConfig{MinCalls: check.BreakerMinCallsMax + 1}, "MinCalls"},
		{"FailureRatio negative", BreakerConfig{FailureRatio: -0.1}, "FailureRatio"},
		{"FailureRatio above 1", BreakerConfig{FailureRatio: 1.01}, "FailureRatio"},
		{"FailureRatio NaN", BreakerConfig{FailureRatio: math.NaN()}, "FailureRatio"},
		{"FailureRatio Inf", BreakerConfig{FailureRatio: math.Inf(1)}, "FailureRatio"},
		{"FailureRatio -Inf", BreakerConfig{FailureRatio: math.Inf(-1)}, "FailureRatio"},
		{"SlowCall negative", BreakerConfig{SlowCall: -1}, "SlowCall"},
		{"SlowRatio without SlowCall", BreakerConfig{SlowRatio: 0.5}, "SlowRatio"},
		{"SlowRatio NaN", BreakerConfig{SlowCall: sec, SlowRatio: math.NaN()}, "SlowRatio"},
		{"SlowRatio Inf", BreakerConfig{SlowCall: sec, SlowRatio: math.Inf(1)}, "SlowRatio"},
		{"SlowRatio above 1", BreakerConfig{SlowCall: sec, SlowRatio: 2}, "SlowRatio"},
		{"OpenFor negative", BreakerConfig{OpenFor: -1}, "OpenFor"},
		{"OpenFor below min", BreakerConfig{OpenFor: check.BreakerOpenForMin - 1}, "OpenFor"},
		{"OpenFor above max", BreakerConfig{OpenFor: check.BreakerOpenForMax + 1}, "OpenFor"},
		{"MaxOpenFor negative", BreakerConfig{MaxOpenFor: -1}, "MaxOpenFor"},
		{"MaxOpenFor above max", BreakerConfig{MaxOpenFor: check.BreakerOpenForMax + 1}, "MaxOpenFor"},
		{"MaxOpenFor overflow-prone", BreakerConfig{MaxOpenFor: time.Duration(math.MaxInt64)}, "MaxOpenFor"},
		{"MaxOpenFor below OpenFor", BreakerConfig{OpenFor: 2 * sec, MaxOpenFor: sec}, "MaxOpenFor"},
		{"MaxOpenFor below OpenForDefault", BreakerConfig{MaxOpenFor: sec}, "MaxOpenFor"},
		{"Probes negative", BreakerConfig{Probes: -1}, "Probes"},
		{"Probes above max", BreakerConfig{Probes: check.BreakerProbesMax + 1}, "Probes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.cfg.validate(prefix)
			if tt.field == "" {
				if errs != nil {
					t.Fatalf("validate() = %v, want none", errors.Join(errs...))
				}
				d := tt.cfg.withDefaults()
				if errs := d.validate(prefix); errs != nil {
					t.Fatalf("validate() of withDefaults() = %v, want none", errors.Join(errs...))
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("validate() = %v, want one error", errors.Join(errs...))
			}
			var ce *ConfigError
			if !errors.As(errs[0], &ce) {
				t.Fatalf("validate() = %T, want *ConfigError", errs[0])
			}
			want := prefix + "." + tt.field
			if ce.Field != want || ce.Reason == "" {
				t.Errorf("validate() = %+v, want Field %q and a reason", ce, want)
			}
			if msg := ce.Error(); !strings.HasPrefix(msg, "kernel: "+want+" = ") {
				t.Errorf("Error() = %q, want it to start with %q", msg, "kernel: "+want+" = ")
			}
		})
	}
}

func TestBreakerConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   BreakerConfig
		want BreakerConfig
	}{
		{"zero", BreakerConfig{}, BreakerConfig{
			Window: check.BreakerWindowDefault, MinCalls: check.BreakerMinCallsDefault, FailureRatio: check.BreakerFailureRatioDefault,
			OpenFor: check.BreakerOpenForDefault, MaxOpenFor: check.BreakerMaxOpenForDefault, Probes: check.BreakerProbesDefault,
		}},
		{"slow on", BreakerConfig{SlowCall: sec}, BreakerConfig{
			Window: check.BreakerWindowDefault, MinCalls: check.BreakerMinCallsDefault, FailureRatio: check.BreakerFailureRatioDefault,
			SlowCall: sec, SlowRatio: check.BreakerSlowRatioDefault,
			OpenFor: check.BreakerOpenForDefault, MaxOpenFor: check.BreakerMaxOpenForDefault, Probes: check.BreakerProbesDefault,
		}},
		{"long OpenFor", BreakerConfig{OpenFor: time.Hour}, BreakerConfig{
			Window: check.BreakerWindowDefault, MinCalls: check.BreakerMinCallsDefault, FailureRatio: check.BreakerFailureRatioDefault,
			OpenFor: time.Hour, MaxOpenFor: time.Hour, Probes: check.BreakerProbesDefault,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.withDefaults(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("withDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
