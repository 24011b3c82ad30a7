package mysqlstore

import (
	"math"
	"testing"
)

// TestStartPageRoundTrip encodes entries of every size of varint and decodes them
// back; entrySize must be the length of each encoding.
func TestStartPageRoundTrip(t *testing.T) {
	set := newStartSet()
	want := map[string]startEntry{}
	for i, e := range []startEntry{
		{pre: 1, fence: 2, attempt: 1, updated: 1767225600000},
		{pre: 0, fence: 0, attempt: 0, updated: 0},
		{pre: 1 << 40, fence: 1<<40 + 1<<20, attempt: 1 << 30, updated: -1767225600000},
		{pre: math.MaxUint64 - 5, fence: math.MaxUint64, attempt: 127, updated: math.MinInt64},
		{pre: 127, fence: 128, attempt: 128, updated: math.MaxInt64},
	} {
		id := string(rune('a'+i)) + string(make([]byte, i*40)) // IDs of 1 to 161 bytes
		if got := len(appendEntry(nil, id, e)); got != entrySize(id, e) {
			t.Errorf("entry %d: encoding of %d bytes, entrySize %d", i, got, entrySize(id, e))
		}
		set.add(id, e)
		want[id] = e
	}
	got := map[string]startEntry{}
	for p := range set.pages {
		if b := set.encode(p); len(b) != set.pages[p].bytes && len(set.pages[p].ids) > 0 {
			t.Errorf("page %d: encoding of %d bytes, page size %d", p, len(b), set.pages[p].bytes)
		}
		if err := decodePage(set.encode(p), func(id string, e startEntry) { got[id] = e }); err != nil {
			t.Fatal(err)
		}
	}
	for id, w := range want {
		g, ok := got[id]
		w.page = 0
		if !ok || g != w {
			t.Errorf("entry %q: decoded %+v (found %v), want %+v", id[:1], g, ok, w)
		}
	}
	if err := decodePage([]byte{startFormat, 5, 'a'}, func(string, startEntry) {}); err == nil {
		t.Error("decodePage(truncated) = nil, want an error")
	}
	if err := decodePage([]byte{9}, func(string, startEntry) {}); err == nil {
		t.Error("decodePage(unknown format) = nil, want an error")
	}
}
