package mysqlstore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestStartPageRoundTrip encodes entries of every size of varint and decodes them
// back; entrySize must bound each plain encoding, and the page's.
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
		if got := len(appendEntry(nil, id, e)); got > entrySize(id, e) {
			t.Errorf("entry %d: plain encoding of %d bytes, entrySize %d", i, got, entrySize(id, e))
		}
		set.add(id, e)
		want[id] = e
	}
	got := map[string]startEntry{}
	for p := range set.pages {
		if b := set.encode(p); len(b) > set.pages[p].bytes && len(set.pages[p].ids) > 0 {
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

// TestStartPagePlainFormat: a page written in the plain format (by an earlier version
// of the store) still decodes.
func TestStartPagePlainFormat(t *testing.T) {
	entries := map[string]startEntry{
		"ax01-0001": {pre: 1, fence: 2, attempt: 1, updated: 1767225600000},
		"ax01-0002": {pre: 4, fence: 9, attempt: 3, updated: 1767225600007},
	}
	b := []byte{startFormatPlain}
	for _, id := range []string{"ax01-0002", "ax01-0001"} {
		b = appendEntry(b, id, entries[id])
	}
	got := map[string]startEntry{}
	if err := decodePage(b, func(id string, e startEntry) { got[id] = e }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("decoded %d entries, want %d", len(got), len(entries))
	}
	for id, w := range entries {
		if got[id] != w {
			t.Errorf("entry %s: decoded %+v, want %+v", id, got[id], w)
		}
	}
	if err := decodePage([]byte{startFormat, 3, 1, 'a'}, func(string, startEntry) {}); err == nil {
		t.Error("decodePage(a prefix longer than the ID before) = nil, want an error")
	}
}

// TestStartPageSharedPrefixes: a kernel's IDs share their prefix, and their entries
// started within a commit share their UpdatedAt's high digits: a page of 100 of them
// encodes in under a third of what entrySize counts (in fact about a sixth).
func TestStartPageSharedPrefixes(t *testing.T) {
	set := newStartSet()
	plain := 1
	for i := range 100 {
		id := fmt.Sprintf("ax69d7bbe289e7-%016x", 0x885+3*i)
		e := startEntry{pre: 1, fence: 2, attempt: 1, updated: 1796486039635 + int64(i/10)}
		set.add(id, e)
		plain += entrySize(id, e)
	}
	b := set.encode(0)
	if len(b)*3 >= plain {
		t.Errorf("page of 100 entries: %d bytes, counted %d; want under a third", len(b), plain)
	}
	n := 0
	if err := decodePage(b, func(id string, e startEntry) {
		if w, ok := set.get(id); !ok || w.updated != e.updated || w.fence != e.fence {
			t.Errorf("entry %s: decoded %+v, want %+v", id, e, w)
		}
		n++
	}); err != nil || n != 100 {
		t.Fatalf("decodePage() = %d entries, %v; want 100", n, err)
	}
}

// TestStartSetRandom adds and removes random entries of IDs that share prefixes (some
// one another's prefix) in sets of one to several pages, and decodes every page back
// to the set's entries.
func TestStartSetRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		set := newStartSet()
		for range r.IntN(600) {
			id := fmt.Sprintf("ax%02x-%x", r.IntN(3), r.IntN(400))
			if r.IntN(3) == 0 {
				set.remove(id)
				continue
			}
			pre := r.Uint64N(1 << 40)
			set.add(id, startEntry{pre: pre, fence: pre + r.Uint64N(5) + 1, attempt: r.IntN(9), updated: 1796486039635 + r.Int64N(100000) - 50000})
		}
		got := map[string]startEntry{}
		for p := range set.pages {
			b := set.encode(p)
			if err := decodePage(b, func(id string, e startEntry) {
				e.page = p
				if _, dup := got[id]; dup {
					t.Fatalf("round %d: %s decoded twice", round, id)
				}
				got[id] = e
			}); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != len(set.entries) {
			t.Fatalf("round %d: %d decoded, %d entries", round, len(got), len(set.entries))
		}
		for id, e := range set.entries {
			if got[id] != e {
				t.Fatalf("round %d: %s: %+v, want %+v", round, id, got[id], e)
			}
		}
	}
}
