package queue

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const (
	h = 1 << High
	n = 1 << Normal
	l = 1 << Low
)

// seq renders levels as a compact string, e.g. "HNL".
func seq(levels []Level) string {
	var sb strings.Builder
	for _, lv := range levels {
		sb.WriteByte("HNL"[lv])
	}
	return sb.String()
}

func mustPicker(t *testing.T, q Quotas) *Picker {
	t.Helper()
	p, err := NewPicker(q)
	if err != nil {
		t.Fatalf("NewPicker(%+v) error = %v", q, err)
	}
	return p
}

func TestQuotasValidate(t *testing.T) {
	tests := []struct {
		name string
		q    Quotas
		want []string // messages of the joined errors, in order
	}{
		{"valid", Quotas{High: 150, Normal: 100, LowGuaranteed: 1}, nil},
		{"ones", Quotas{1, 1, 1}, nil},
		{"max", Quotas{QuotaMax, QuotaMax, QuotaMax}, nil},
		{"high zero", Quotas{0, 1, 1}, []string{"queue: Quotas.High = 0: must be >= 1"}},
		{"normal negative", Quotas{1, -2, 1}, []string{"queue: Quotas.Normal = -2: must be >= 1"}},
		{"low zero", Quotas{1, 1, 0}, []string{"queue: Quotas.LowGuaranteed = 0: must be >= 1"}},
		{"too large", Quotas{QuotaMax + 1, 1, 1}, []string{"queue: Quotas.High = 1073741825: must be <= 1073741824"}},
		{"zero value", Quotas{}, []string{
			"queue: Quotas.High = 0: must be >= 1",
			"queue: Quotas.Normal = 0: must be >= 1",
			"queue: Quotas.LowGuaranteed = 0: must be >= 1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.q.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("Validate() = %q, want %q", got, want)
			}
			var qe *QuotaError
			if !errors.As(err, &qe) {
				t.Fatalf("errors.As(Validate(), *QuotaError) = false, want true")
			}
			if !strings.Contains(tt.want[0], "Quotas."+qe.Field+" = ") {
				t.Errorf("QuotaError.Field = %q, want the field of %q", qe.Field, tt.want[0])
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("Validate() = %T, want an errors.Join result", err)
			}
			if got := len(joined.Unwrap()); got != len(tt.want) {
				t.Errorf("len(Unwrap()) = %d, want %d", got, len(tt.want))
			}
		})
	}
}

func TestNewPickerInvalid(t *testing.T) {
	p, err := NewPicker(Quotas{High: 5, Normal: 0, LowGuaranteed: 1})
	if p != nil || err == nil || !strings.Contains(err.Error(), "Quotas.Normal = 0") {
		t.Errorf("NewPicker(Normal: 0) = %v, %v, want nil, an error naming Quotas.Normal", p, err)
	}
}

func TestPickerPick(t *testing.T) {
	tests := []struct {
		name   string
		q      Quotas
		ready  Mask
		picks  int
		want   string
		cycles uint64 // Cycle() after the picks
	}{
		{"one each", Quotas{1, 1, 1}, AllLevels, 9, "LNHLNHLNH", 2},
		{"2/1/1", Quotas{2, 1, 1}, AllLevels, 8, "LNHH" + "LNHH", 1},
		{"3/2/1 interleaved", Quotas{3, 2, 1}, AllLevels, 12, "LNHNHH" + "LNHNHH", 1},
		{"5/3/2 interleaved", Quotas{5, 3, 2}, AllLevels, 10, "LNHNHLNHHH", 0},
		{"low quota larger", Quotas{1, 1, 3}, AllLevels, 10, "LLNLH" + "LLNLH", 1},
		{"lone high", Quotas{2, 1, 1}, h, 5, "HHHHH", 1},
		{"lone normal", Quotas{2, 3, 1}, n, 4, "NNNN", 0},
		{"lone low", Quotas{2, 1, 1}, l, 3, "LLL", 0},
		{"high and normal", Quotas{2, 1, 1}, h | n, 6, "NHHH" + "NH", 1},
		{"normal and low: the rest goes to normal", Quotas{9, 2, 1}, n | l, 6, "LNNNNN", 0},
		{"high and low: low keeps its floor", Quotas{3, 9, 2}, h | l, 10, "LHHHHHHLHH", 0},
		{"stray bits ignored", Quotas{1, 1, 1}, 0xF8 | l, 2, "LL", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPicker(t, tt.q)
			var got []Level
			for range tt.picks {
				lv, ok := p.Pick(tt.ready)
				if !ok {
					t.Fatalf("Pick(%03b) ok = false, want true", tt.ready)
				}
				if !tt.ready.Has(lv) {
					t.Fatalf("Pick(%03b) = %v, not a ready level", tt.ready, lv)
				}
				got = append(got, lv)
			}
			if seq(got) != tt.want {
				t.Errorf("picks = %s, want %s", seq(got), tt.want)
			}
			if c := p.Cycle(); c != tt.cycles {
				t.Errorf("Cycle() = %d, want %d", c, tt.cycles)
			}
		})
	}
}

func TestPickerNothingReady(t *testing.T) {
	p := mustPicker(t, Quotas{1, 1, 1})
	for _, m := range []Mask{0, 0x08, 0xF8} {
		if lv, ok := p.Pick(m); ok {
			t.Errorf("Pick(%08b) = %v, true, want false", m, lv)
		}
	}
	// An empty pick counts nothing: the first cycle starts with Low.
	if got, _ := p.Pick(AllLevels); got != Low {
		t.Errorf("first real Pick() = %v, want low", got)
	}
	if c := p.Cycle(); c != 0 {
		t.Errorf("Cycle() = %d, want 0", c)
	}
}

// TestPickerReadinessChanges plays a sequence of ready masks and checks each pick,
// covering work conservation and Low's guarantee when the other levels come and go.
func TestPickerReadinessChanges(t *testing.T) {
	tests := []struct {
		name  string
		q     Quotas
		ready []Mask
		want  string
	}{
		// Low turns up mid-cycle behind its spread: picked at once.
		{"low arrives mid-cycle", Quotas{4, 2, 1}, []Mask{h | n, h | n, h | n, AllLevels, AllLevels}, "NHHLN"},
		// Low stays ready while High and Normal flood: one Low per cycle, first.
		{"low under flood", Quotas{2, 1, 1}, []Mask{
			AllLevels, AllLevels, AllLevels, AllLevels, AllLevels, AllLevels, AllLevels, AllLevels,
		}, "LNHH" + "LNHH"},
		// Low was picked alone at the start of a cycle; the others then take the
		// rest of it, and the next cycle starts with Low again.
		{"low alone then flood", Quotas{2, 1, 1}, []Mask{l, AllLevels, AllLevels, AllLevels, AllLevels}, "LNHHL"},
		// Low had its floor, High and Normal are gone: the lone Low takes the rest.
		{"lone low takes the rest", Quotas{3, 3, 1}, []Mask{AllLevels, AllLevels, AllLevels, l, l}, "LNNLL"},
		// High is not ready: Normal, the highest ready level, takes its share.
		{"high not ready", Quotas{3, 3, 1}, []Mask{AllLevels, n | l, n | l, n | l, n | l}, "LNNNN"},
		// Low is never ready: its floor passes on, High and Normal share the cycle.
		{"without low", Quotas{1, 1, 5}, []Mask{h | n, h | n, h | n, h | n}, "NHHH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPicker(t, tt.q)
			var got []Level
			for _, m := range tt.ready {
				lv, ok := p.Pick(m)
				if !ok || !m.Has(lv) {
					t.Fatalf("Pick(%03b) = %v, %t, want a ready level", m, lv, ok)
				}
				got = append(got, lv)
			}
			if seq(got) != tt.want {
				t.Errorf("picks = %s, want %s", seq(got), tt.want)
			}
		})
	}
}

func TestPickerSetQuotas(t *testing.T) {
	tests := []struct {
		name   string
		q      Quotas
		before int // picks with every level ready before SetQuotas
		set    Quotas
		setErr string
		after  int
		want   string // all picks
	}{
		{"raise high mid-cycle", Quotas{1, 1, 1}, 1, Quotas{3, 1, 1}, "", 8, "L" + "NHHH" + "LNHH"},
		{"lower high below used", Quotas{5, 1, 1}, 5, Quotas{2, 1, 1}, "", 4, "LNHHH" + "LNHH"},
		{"same quotas", Quotas{2, 1, 1}, 2, Quotas{2, 1, 1}, "", 6, "LN" + "HH" + "LNHH"},
		{"bad value changes nothing", Quotas{2, 1, 1}, 2, Quotas{2, 0, 1}, "queue: Quotas.Normal = 0: must be >= 1", 6, "LN" + "HH" + "LNHH"},
		{"low guaranteed raised", Quotas{2, 2, 1}, 3, Quotas{2, 2, 2}, "", 5, "LNN" + "LHH" + "LN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPicker(t, tt.q)
			var got []Level
			for range tt.before {
				lv, _ := p.Pick(AllLevels)
				got = append(got, lv)
			}
			err := p.SetQuotas(tt.set)
			wantQ := tt.set
			if tt.setErr != "" {
				if err == nil || err.Error() != tt.setErr {
					t.Fatalf("SetQuotas(%+v) = %v, want %q", tt.set, err, tt.setErr)
				}
				wantQ = tt.q
			} else if err != nil {
				t.Fatalf("SetQuotas(%+v) = %v", tt.set, err)
			}
			if p.Quotas() != wantQ {
				t.Errorf("Quotas() = %+v, want %+v", p.Quotas(), wantQ)
			}
			for range tt.after {
				lv, _ := p.Pick(AllLevels)
				got = append(got, lv)
			}
			if seq(got) != tt.want {
				t.Errorf("picks = %s, want %s", seq(got), tt.want)
			}
		})
	}
}

func TestPickerZeroValuePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "queue: ") {
			t.Errorf("Pick() on a zero Picker panicked with %v, want a queue: panic", r)
		}
	}()
	var p Picker
	p.Pick(AllLevels)
}

func TestPickerAllocs(t *testing.T) {
	p := mustPicker(t, Quotas{250, 166, 1})
	masks := []Mask{AllLevels, h | n, l, n | l, h}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, m := range masks {
			p.Pick(m)
		}
		_ = p.SetQuotas(Quotas{250, 166, 1})
	})
	if allocs != 0 {
		t.Errorf("Pick() allocates %v times per run, want 0", allocs)
	}
}
