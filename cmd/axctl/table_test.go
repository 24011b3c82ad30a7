package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain <script>", "plain <script>"},
		{"two\nlines\ttab", `two\nlines\ttab`},
		{"\x1b[31mred", `\x1b[31mred`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"rtl \u202egnp.exe", `rtl \u202egnp.exe`},
		{"ünïcödé 日本", "ünïcödé 日本"},
		{"", ""},
	} {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	cols := []column{{title: "ID", min: 6}, {title: "N", right: true, fixed: true}, {title: "WHEN", fixed: true}, {title: "TEXT"}}
	rows := [][]string{
		{"short", "1", "2026-12-05 09:30:00", "ok"},
		{strings.Repeat("i", 50), "12345", "2026-12-05 09:30:01", strings.Repeat("long text ", 10)},
		{"x\ny", "", "", "\xff"},
	}
	for _, width := range []int{40, 60, 100, 200} {
		var b strings.Builder
		if err := writeTable(&b, width, cols, rows); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) != 4 {
			t.Fatalf("width %d: %d lines, want 4:\n%s", width, len(lines), b.String())
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("width %d: a line of %d characters: %q", width, n, l)
			}
		}
		// Fixed columns are whole; a cut cell ends with "…"; empty cells are "-".
		if !strings.Contains(lines[2], "2026-12-05 09:30:01") || !strings.Contains(lines[2], "12345") {
			t.Errorf("width %d: a fixed cell was cut: %q", width, lines[2])
		}
		if width < 200 && !strings.Contains(lines[2], "…") {
			t.Errorf("width %d: no ellipsis in %q", width, lines[2])
		}
		if !strings.HasPrefix(lines[3], `x\ny`) || !strings.HasSuffix(lines[3], `\xff`) || !strings.Contains(lines[3], " - ") {
			t.Errorf("width %d: row 3 = %q", width, lines[3])
		}
	}
}
