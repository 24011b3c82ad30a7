package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// column is a table's column.
type column struct {
	title string
	right bool // aligned right (numbers)
	fixed bool // never shortened (times, states)
	min   int  // shortened below this many characters only when the others cannot give more
}

// cellMin is the fewest characters a shortened column keeps.
const cellMin = 4

// writeTable writes rows under the columns' titles, two spaces between columns,
// in at most width characters a line: while the line is too long, the widest
// column that may shrink (above its minimum first) loses a character, and a
// cell longer than its column ends with "…". Cells are made printable first: control characters, invalid
// UTF-8 and other unprintable runes are written as Go escapes (\n, \x1b,
// \u202e), so a task's strings cannot move the cursor or hide text.
func writeTable(w io.Writer, width int, cols []column, rows [][]string) error {
	cells := make([][]string, 0, len(rows)+1)
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = c.title
	}
	cells = append(cells, head)
	for _, r := range rows {
		line := make([]string, len(cols))
		for i := range cols {
			v := ""
			if i < len(r) {
				v = printable(r[i])
			}
			if v == "" {
				v = "-"
			}
			line[i] = v
		}
		cells = append(cells, line)
	}
	widths := make([]int, len(cols))
	for _, line := range cells {
		for i, v := range line {
			widths[i] = max(widths[i], utf8.RuneCountInString(v))
		}
	}
	total := 2 * (len(cols) - 1)
	for _, n := range widths {
		total += n
	}
	for floor := range 2 { // above the columns' minimums first, then down to cellMin
		for total > width {
			widest := -1
			for i, c := range cols {
				least := cellMin
				if floor == 0 {
					least = max(c.min, cellMin)
				}
				if !c.fixed && widths[i] > least && (widest < 0 || widths[i] > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break // nothing left to shorten at this floor
			}
			widths[widest]--
			total--
		}
	}
	var b strings.Builder
	for _, line := range cells {
		b.Reset()
		for i, v := range line {
			v = truncate(v, widths[i])
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(v))
			if i > 0 {
				b.WriteString("  ")
			}
			switch {
			case cols[i].right:
				b.WriteString(pad + v)
			case i == len(line)-1:
				b.WriteString(v)
			default:
				b.WriteString(v + pad)
			}
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// truncate shortens s to n characters, the last one "…" when it cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// printable returns s with every rune that is not printable, and every byte of
// invalid UTF-8, written as a Go escape.
func printable(s string) string {
	ok := true
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				ok = false
				break
			}
		}
		if !unicode.IsPrint(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}
