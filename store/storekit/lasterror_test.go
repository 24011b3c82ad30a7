package storekit_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

func TestTruncateLastError(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int // length of the result
	}{
		{"empty", "", 0},
		{"at the limit", strings.Repeat("x", store.LastErrorMax), store.LastErrorMax},
		{"ascii beyond", strings.Repeat("x", store.LastErrorMax+1), store.LastErrorMax},
		// "é" is 2 bytes: one byte short of the limit, the next rune does not fit.
		{"rune across the limit", strings.Repeat("x", store.LastErrorMax-1) + "é", store.LastErrorMax - 1},
		{"3-byte runes", strings.Repeat("€", store.LastErrorMax), store.LastErrorMax - store.LastErrorMax%3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := storekit.TruncateLastError(tt.in)
			if len(got) != tt.want || !strings.HasPrefix(tt.in, got) || !utf8.ValidString(got) {
				t.Errorf("TruncateLastError(%d bytes) = %d bytes (valid UTF-8 %v), want a %d-byte prefix",
					len(tt.in), len(got), utf8.ValidString(got), tt.want)
			}
		})
	}
}
