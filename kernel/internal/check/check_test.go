package check

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// fieldErr is the error the tests make: "field = value: reason".
type fieldErr struct {
	field  string
	value  any
	reason string
}

func (e *fieldErr) Error() string { return fmt.Sprintf("%s = %v: %s", e.field, e.value, e.reason) }

func newErrs(prefix string) *Errs {
	return &Errs{Prefix: prefix, New: func(field string, v any, reason string) error { return &fieldErr{field, v, reason} }}
}

func TestRules(t *testing.T) {
	tests := []struct {
		name string
		run  func(e *Errs)
		want []string // the errors, in order
	}{
		{"NonNeg ok", func(e *Errs) { NonNeg(e, "A", 0); NonNeg(e, "B", time.Second) }, nil},
		{"NonNeg", func(e *Errs) { NonNeg(e, "A", -1); NonNeg(e, "B", -time.Second) }, []string{"C.A = -1: must be >= 0", "C.B = -1s: must be >= 0"}},
		{"NonNeg NaN", func(e *Errs) { NonNeg(e, "R", math.NaN()) }, []string{"C.R = NaN: must be >= 0"}},
		{"Upto", func(e *Errs) { Upto(e, "A", -2, 10); Upto(e, "B", 11, 10); Upto(e, "C", 10, 10) }, []string{"C.A = -2: must be >= 0", "C.B = 11: must be <= 10"}},
		{"Upto duration", func(e *Errs) { Upto(e, "D", 2*time.Hour, time.Hour) }, []string{"C.D = 2h0m0s: must be <= 1h0m0s"}},
		{"In", func(e *Errs) { In(e, "A", -1, 5); In(e, "B", 6, 5); In(e, "C", 5, 5) }, []string{"C.A = -1: must be in [0, 5]", "C.B = 6: must be in [0, 5]"}},
		{"In float", func(e *Errs) { In(e, "F", math.NaN(), 1); In(e, "G", 1.5, 1); In(e, "H", 0.5, 1) }, []string{"C.F = NaN: must be in [0, 1]", "C.G = 1.5: must be in [0, 1]"}},
		{"ZeroOrIn", func(e *Errs) {
			ZeroOrIn(e, "A", 0, time.Millisecond, time.Minute)
			ZeroOrIn(e, "B", time.Microsecond, time.Millisecond, time.Minute)
			ZeroOrIn(e, "C", -time.Second, time.Millisecond, time.Minute)
			ZeroOrIn(e, "D", time.Second, time.Millisecond, time.Minute)
		}, []string{"C.B = 1µs: must be 0 or in [1ms, 1m0s]", "C.C = -1s: must be 0 or in [1ms, 1m0s]"}},
		{"Bytes", func(e *Errs) { Bytes(e, "K", "abcdef", 4, "KMax"); Bytes(e, "L", "abcd", 4, "KMax") }, []string{"C.K = <nil>: 6 bytes: must be at most 4 bytes (KMax)"}},
		{"Bad and Add", func(e *Errs) { e.Bad("X", true, "no"); e.Add(errors.New("other")) }, []string{"C.X = true: no", "other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newErrs("C.")
			tt.run(e)
			var got []string
			for _, err := range e.List() {
				got = append(got, err.Error())
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("errors = %q, want %q", got, tt.want)
			}
			if (e.Err() == nil) != (len(tt.want) == 0) {
				t.Fatalf("Err() = %v, want nil only without errors", e.Err())
			}
		})
	}
}

func TestReports(t *testing.T) {
	e := newErrs("")
	if !In(e, "A", 3, 5) || In(e, "B", 6, 5) {
		t.Fatal("In() = not true, false for 3, 6 in [0, 5]")
	}
	if !ZeroOrIn(e, "C", 0, 1, 2) || !ZeroOrIn(e, "D", 2, 1, 2) || ZeroOrIn(e, "E", 3, 1, 2) {
		t.Fatal("ZeroOrIn() = not true, true, false for 0, 2, 3 with [1, 2]")
	}
	if len(e.List()) != 2 {
		t.Fatalf("List() holds %d errors, want 2", len(e.List()))
	}
}

func TestBatch(t *testing.T) {
	a, c := errors.New("item[0]: bad"), errors.New("item[2]: worse")
	b := &Batch{Errs: []error{a, nil, c}}
	if got, want := b.Error(), "item[0]: bad\nitem[2]: worse"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(b, c) {
		t.Fatal("errors.Is(batch, item 2's error) = false")
	}
	if got := b.Unwrap(); len(got) != 2 || !errors.Is(got[0], a) || !errors.Is(got[1], c) {
		t.Fatalf("Unwrap() = %v, want [a c]", got)
	}
}
