package console

import (
	"encoding/json"
	"testing"
)

func TestValidUTF8(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain <b>", "plain <b>"},
		{"a\xffb", "a\uFFFDb"},
		{"two\xfe\xffbad", "two\uFFFD\uFFFDbad"},
		{"cut\xe2\x82", "cut\uFFFD\uFFFD"},
		{"é€😀", "é€😀"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := string(validUTF8([]byte(tt.in))); got != tt.want {
				t.Errorf("validUTF8(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// The pages replace as encoding/json does.
			var viaJSON string
			b, _ := json.Marshal(tt.in)
			if err := json.Unmarshal(b, &viaJSON); err != nil || viaJSON != tt.want {
				t.Errorf("json round trip of %q = %q, %v; want %q", tt.in, viaJSON, err, tt.want)
			}
		})
	}
}
