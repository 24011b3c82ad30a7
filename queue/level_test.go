package queue

import "testing"

func TestLevelString(t *testing.T) {
	tests := []struct {
		l    Level
		want string
	}{
		{High, "high"},
		{Normal, "normal"},
		{Low, "low"},
		{Level(3), "level(3)"},
		{Level(255), "level(255)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.l.String(); got != tt.want {
				t.Errorf("Level(%d).String() = %q, want %q", uint8(tt.l), got, tt.want)
			}
		})
	}
}

func TestMask(t *testing.T) {
	tests := []struct {
		name   string
		m      Mask
		want   Mask
		has    [NumLevels]bool
		hasBad bool // Has(Level(3))
	}{
		{"empty", MaskOf(), 0, [NumLevels]bool{}, false},
		{"high", MaskOf(High), 1, [NumLevels]bool{true, false, false}, false},
		{"normal low", MaskOf(Low, Normal), 6, [NumLevels]bool{false, true, true}, false},
		{"all", MaskOf(High, Normal, Low), AllLevels, [NumLevels]bool{true, true, true}, false},
		{"duplicates", MaskOf(Low, Low), 4, [NumLevels]bool{false, false, true}, false},
		{"invalid ignored", MaskOf(Level(3), Level(7), Normal), 2, [NumLevels]bool{false, true, false}, false},
		{"stray bits", Mask(0xFF), 0xFF, [NumLevels]bool{true, true, true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.m != tt.want {
				t.Errorf("mask = %08b, want %08b", tt.m, tt.want)
			}
			for l := High; l < NumLevels; l++ {
				if got := tt.m.Has(l); got != tt.has[l] {
					t.Errorf("Has(%v) = %t, want %t", l, got, tt.has[l])
				}
			}
			if got := tt.m.Has(Level(3)); got != tt.hasBad {
				t.Errorf("Has(level(3)) = %t, want %t", got, tt.hasBad)
			}
		})
	}
	if AllLevels != 7 {
		t.Errorf("AllLevels = %d, want 7", AllLevels)
	}
}
