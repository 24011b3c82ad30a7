package storekit

import (
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// TruncateLastError returns s cut to at most [store.LastErrorMax] bytes at a UTF-8
// boundary, as every [store.Store] keeps [store.StoredTask.LastError]. A string within
// the limit comes back unchanged; a cut never splits a rune, so valid UTF-8 stays valid.
func TruncateLastError(s string) string {
	if len(s) <= store.LastErrorMax {
		return s
	}
	n := store.LastErrorMax
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
