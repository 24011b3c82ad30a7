package storetest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

func testEmptyCommit(t *testing.T, s store.Store) {
	for _, changes := range [][]store.Change{nil, {}} {
		res, err := s.Commit(context.Background(), changes)
		if res != nil || err != nil {
			t.Errorf("Commit(%v) = %v, %v; want nil, nil", changes, res, err)
		}
	}
}

func testInsertRoundTrip(t *testing.T, s store.Store) {
	a := task("a")
	b := task("b")
	b.Kind = "emails.send/ünïcode"
	b.Priority = store.High
	b.RunAt = at(123_456)
	b.Timeout = 1500*time.Millisecond + 7 // durations are kept exactly
	b.MaxAttempts = 25
	b.Attempt = 2
	b.Fence = math.MaxUint64 - 1
	b.UniqueKey = "order-42"
	b.Group, b.Key = "upstream.api", "host-ünïcode.example:443"
	b.State = store.Delayed
	b.LastError = "previous: ünïcode ✓"
	b.CreatedAt = at(-5000)
	b.UpdatedAt = at(-4000)
	c := task("c")
	c.Priority = store.Low
	d := task("d")
	d.Priority = store.PriorityDefault // stored as Normal
	e := task(strings.Repeat("e", store.StoredIDMax))
	e.Kind = strings.Repeat("k", store.KindMax)
	e.UniqueKey = strings.Repeat("u", store.UniqueKeyMax)
	e.Group, e.Key = strings.Repeat("g", store.GroupNameMax), strings.Repeat("\xff", store.GroupKeyMax)
	e.State = store.Running
	e.Attempt = 1
	f := task("f")
	f.State = store.Succeeded
	f.UniqueKey = "done-key"
	all := []store.StoredTask{a, b, c, d, e, f}
	var changes []store.Change
	for _, tk := range all {
		changes = append(changes, ins(tk))
	}
	mustCommit(t, s, changes...)
	for _, tk := range all {
		wantTask(t, s, tk)
	}
}

func testPayloads(t *testing.T, s store.Store) {
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	big := make([]byte, 512<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	payloads := map[string][]byte{
		"nil":        nil,
		"empty":      {},
		"zero":       {0},
		"all-bytes":  allBytes,
		"bad-utf8":   {0xff, 0xfe, 0xc3, 0x28, '\\', '\'', '"', 0},
		"sql-ish":    []byte("'); DROP TABLE x; --"),
		"big-random": big,
	}
	var changes []store.Change
	for name, p := range payloads {
		tk := task(name)
		tk.Payload = p
		changes = append(changes, ins(tk))
	}
	mustCommit(t, s, changes...)
	for name, p := range payloads {
		got := get(t, s, name)
		if !bytes.Equal(got.Payload, p) {
			t.Errorf("Get(%q).Payload = %d bytes, want %d bytes (%.16x…)", name, len(got.Payload), len(p), p)
		}
	}
	// Recover returns payloads too.
	for _, tk := range recoverAll(t, s) {
		if !bytes.Equal(tk.Payload, payloads[tk.ID]) {
			t.Errorf("Recover(): %q payload = %d bytes, want %d", tk.ID, len(tk.Payload), len(payloads[tk.ID]))
		}
	}
}

func testTimePrecision(t *testing.T, s store.Store) {
	cases := map[string]time.Time{
		"ns":        t0.Add(123_456_789 * time.Nanosecond),
		"ms":        t0.Add(999 * time.Millisecond),
		"pre-1970":  time.Date(1960, 7, 1, 12, 0, 0, 1_500_000, time.UTC),
		"far":       time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		"local":     time.Date(2031, 3, 4, 5, 6, 7, 8_000_000, time.FixedZone("X", 5*3600+1800)),
		"zero":      {},
		"monotonic": time.Now(), // carries a monotonic reading
	}
	var changes []store.Change
	for name, tm := range cases {
		tk := task(name)
		tk.RunAt, tk.CreatedAt = tm, tm
		if !tm.IsZero() {
			tk.UpdatedAt = tm
		}
		changes = append(changes, ins(tk))
	}
	mustCommit(t, s, changes...)
	for name, tm := range cases {
		got := get(t, s, name)
		want := ms(tm)
		if !got.RunAt.Equal(want) || !got.CreatedAt.Equal(want) {
			t.Errorf("%s: RunAt, CreatedAt = %v, %v; want %v (from %v)", name, got.RunAt, got.CreatedAt, want, tm)
		}
		if tm.IsZero() && (!got.RunAt.IsZero() || !got.CreatedAt.IsZero()) {
			t.Errorf("%s: RunAt, CreatedAt = %v, %v; want zero times", name, got.RunAt, got.CreatedAt)
		}
	}
	// A retry's RunAt is truncated the same way.
	mustCommit(t, s, start("ns", 1, 2, 1), retry("ns", 2, cases["ns"].Add(time.Hour), "x"))
	if got, want := get(t, s, "ns").RunAt, ms(cases["ns"].Add(time.Hour)); !got.Equal(want) {
		t.Errorf("RunAt after retry = %v, want %v", got, want)
	}
}

func testLastErrorTruncated(t *testing.T, s store.Store) {
	long := strings.Repeat("é", store.LastErrorMax) // 2 bytes a rune: cut inside one
	mustCommit(t, s, ins(task("a")), start("a", 1, 2, 1), retry("a", 2, t0, long))
	got := get(t, s, "a").LastError
	if len(got) > store.LastErrorMax || len(got) < store.LastErrorMax-3 || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
		t.Errorf("LastError = %d bytes (valid UTF-8: %v), want a prefix of at most %d bytes cut at a rune",
			len(got), utf8.ValidString(got), store.LastErrorMax)
	}
}

func testGetUnknown(t *testing.T, s store.Store) {
	wantUnknown(t, s, "nope")
	wantUnknown(t, s, "")
}

func testIdempotentInsert(t *testing.T, s store.Store) {
	a := task("a")
	mustCommit(t, s, ins(a))
	other := a
	other.Payload = []byte("other payload")
	other.Priority = store.High
	other.UniqueKey = "k"
	mustCommit(t, s, ins(other)) // same ID: a no-op reporting nil
	wantTask(t, s, a)

	// The same ID twice in one batch: the first wins.
	b1, b2 := task("b"), task("b")
	b2.Payload = []byte("second")
	mustCommit(t, s, ins(b1), ins(b2))
	wantTask(t, s, b1)

	// A batch retried as a whole never duplicates.
	var batch []store.Change
	for i := range 100 {
		batch = append(batch, ins(keyed(fmt.Sprintf("t%03d", i), fmt.Sprintf("key%03d", i))))
	}
	for range 3 {
		mustCommit(t, s, batch...)
	}
	if n := len(recoverAll(t, s)); n != 102 {
		t.Errorf("len(Recover()) = %d, want 102", n)
	}
	// An insert of an existing task after it moved on still reports nil and changes nothing.
	mustCommit(t, s, start("t000", 1, 2, 1), succeed("t000", 2))
	mustCommit(t, s, batch[0])
	if got := get(t, s, "t000"); got.State != store.Succeeded {
		t.Errorf("State after re-insert = %v, want succeeded", got.State)
	}
}
