package fuzz

import (
	"errors"
	"slices"
	"testing"

	"github.com/axsched/ax/queue"
)

// byteReader hands out the fuzzer's bytes one at a time, then zeros.
type byteReader struct{ data []byte }

func (r *byteReader) more() bool { return len(r.data) > 0 }

func (r *byteReader) next() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

// Ring operations, one per byte (op % ringOps); most take the following byte as an
// argument.
const (
	ringPush = iota
	ringPush2
	ringPop
	ringPeek
	ringPopBack
	ringPeekBack
	ringRemove
	ringRange
	ringResize
	ringClear
	ringOps
)

// ringSeeds are the table cases FuzzRing starts from: capacity byte, then ops.
var ringSeeds = []struct {
	name string
	data []byte
}{
	{"fill and drain", []byte{2, ringPush, 1, ringPush, 2, ringPush, 3, ringPush, 4, ringPop, ringPop, ringPop, ringPop}},
	{"wraparound", []byte{3, ringPush, 1, ringPush, 2, ringPop, ringPop, ringPush, 3, ringPush, 4, ringPush, 5, ringPeek, ringPeekBack, ringPopBack}},
	{"remove across wrap", []byte{4, ringPush, 1, ringPush, 2, ringPush, 3, ringPop, ringPop, ringPush, 4, ringPush, 5, ringPush, 6, ringRemove, 2, ringRemove, 0}},
	{"remove duplicates", []byte{5, ringPush, 7, ringPush, 7, ringPush, 1, ringPush, 7, ringRemove, 1, ringRange, 2}},
	{"resize", []byte{2, ringPush, 1, ringPush, 2, ringPush, 3, ringResize, 1, ringResize, 9, ringPush, 4, ringPush, 5, ringResize, 0, ringResize, 4}},
	{"clear", []byte{3, ringPush, 1, ringPop, ringPush, 2, ringPush, 3, ringPush, 4, ringClear, ringPush, 5, ringPeek}},
	{"empty", []byte{0, ringPop, ringPeek, ringPopBack, ringPeekBack, ringRemove, 0, ringClear}},
}

// FuzzRing drives a queue.Ring and a RingModel with the same operations and
// compares every result and the contents after each operation.
func FuzzRing(f *testing.F) {
	for _, s := range ringSeeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &byteReader{data: data}
		capacity := 1 + int(in.next()%8)
		r, err := queue.NewRing[int](capacity)
		if err != nil {
			t.Fatalf("NewRing(%d) error = %v", capacity, err)
		}
		m := &RingModel[int]{Capacity: capacity}
		for step := 0; in.more(); step++ {
			op := in.next() % ringOps
			switch op {
			case ringPush, ringPush2:
				v := int(in.next() % 8) // small values, so Remove meets duplicates
				err := r.Push(v)
				if ok := m.Push(v); ok != (err == nil) || (!ok && !errors.Is(err, queue.ErrFull)) {
					t.Fatalf("step %d: Push(%d) = %v, model has room = %t", step, v, err, ok)
				}
			case ringPop:
				compare(t, step, "Pop", r.Pop, m.Pop)
			case ringPeek:
				compare(t, step, "Peek", r.Peek, m.Peek)
			case ringPopBack:
				compare(t, step, "PopBack", r.PopBack, m.PopBack)
			case ringPeekBack:
				compare(t, step, "PeekBack", r.PeekBack, m.PeekBack)
			case ringRemove:
				target := int(in.next() % 8)
				match := func(v int) bool { return v == target }
				compare(t, step, "Remove",
					func() (int, bool) { return r.Remove(match) },
					func() (int, bool) { return m.Remove(match) })
			case ringRange:
				limit := int(in.next() % 8)
				var got []int
				r.Range(func(v int) bool {
					got = append(got, v)
					return len(got) < limit
				})
				want := m.Items[:min(len(m.Items), max(limit, 1))]
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: Range() stopping after %d = %v, want %v", step, limit, got, want)
				}
			case ringResize:
				c := int(in.next() % 10)
				err := r.Resize(c)
				if ok := m.Resize(c); ok != (err == nil) {
					t.Fatalf("step %d: Resize(%d) = %v, model valid = %t (Len %d)", step, c, err, ok, len(m.Items))
				}
			case ringClear:
				var got []int
				r.Clear(func(v int) { got = append(got, v) })
				if want := m.Clear(); !slices.Equal(got, want) {
					t.Fatalf("step %d: Clear() visited %v, want %v", step, got, want)
				}
			}
			checkRing(t, step, r, m)
		}
	})
}

// compare calls an operation on the ring and on the model and fails when the
// results differ.
func compare(t *testing.T, step int, name string, got, want func() (int, bool)) {
	t.Helper()
	gv, gok := got()
	wv, wok := want()
	if gv != wv || gok != wok {
		t.Fatalf("step %d: %s() = %d, %t, want %d, %t", step, name, gv, gok, wv, wok)
	}
}

// checkRing fails when the ring's length, capacity or contents differ from m's.
func checkRing(t *testing.T, step int, r *queue.Ring[int], m *RingModel[int]) {
	t.Helper()
	if r.Len() != len(m.Items) || r.Cap() != m.Capacity {
		t.Fatalf("step %d: Len(), Cap() = %d, %d, want %d, %d", step, r.Len(), r.Cap(), len(m.Items), m.Capacity)
	}
	got := make([]int, 0, r.Len())
	r.Range(func(v int) bool {
		got = append(got, v)
		return true
	})
	if !slices.Equal(got, m.Items) {
		t.Fatalf("step %d: contents = %v, want %v", step, got, m.Items)
	}
}

// pickerSetQuotas marks an op byte of FuzzPicker that sets quotas from the next
// three bytes; other op bytes are a ready mask (bits 0-5, stray bits included).
const pickerSetQuotas = 0xC0

// pickerSeeds are the table cases FuzzPicker starts from: three quota bytes, then
// ops.
var pickerSeeds = []struct {
	name string
	data []byte
}{
	{"saturated 2/1/1", []byte{2, 1, 1, 7, 7, 7, 7, 7, 7, 7, 7, 7}},
	{"one each", []byte{1, 1, 1, 7, 7, 7, 7, 7, 7}},
	{"lone levels", []byte{3, 2, 1, 1, 1, 1, 1, 2, 2, 2, 4, 4, 4}},
	{"low arrives", []byte{4, 2, 1, 3, 3, 3, 7, 7, 7, 7}},
	{"nothing ready", []byte{1, 1, 1, 0, 8, 56, 7}},
	{"set quotas", []byte{1, 1, 1, 7, pickerSetQuotas, 5, 1, 1, 7, 7, 7, 7, 7, 7}},
	{"bad quotas", []byte{2, 2, 2, 7, pickerSetQuotas, 0, 1, 1, 7, 7, 7}},
	{"lower below used", []byte{8, 1, 1, 7, 7, 7, 7, 7, pickerSetQuotas, 1, 1, 1, 7, 7}},
}

// quotaOf maps a byte to a quota: mostly small, so cycles end often; 0 stays 0 in
// SetQuotas so that invalid values are exercised.
func quotaOf(b byte, allowZero bool) int {
	if allowZero && b == 0 {
		return 0
	}
	if b >= 250 {
		return 100 * int(b-249) // a few long cycles
	}
	return 1 + int(b%12)
}

// FuzzPicker drives a queue.Picker with ready masks and quota changes decoded from
// bytes, and checks every pick against FloorModel: the level it goes to, when a new
// cycle starts, that every cycle completed with all levels ready and unchanged
// quotas has exactly the quotas' counts, and that while Low stays ready at most two
// cycles' picks of other levels come between two picks of Low.
func FuzzPicker(f *testing.F) {
	for _, s := range pickerSeeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &byteReader{data: data}
		q := queue.Quotas{High: quotaOf(in.next(), false), Normal: quotaOf(in.next(), false), LowGuaranteed: quotaOf(in.next(), false)}
		p, err := queue.NewPicker(q)
		if err != nil {
			t.Fatalf("NewPicker(%+v) error = %v", q, err)
		}
		m := NewFloorModel(q)
		var (
			inCycle   [queue.NumLevels]int
			saturated = true // every pick of this cycle had every level ready, same quotas
			lowRun    = -1   // other picks since Low's last pick while Low stayed ready; -1: none
		)
		for step := 0; in.more(); step++ {
			b := in.next()
			if b&pickerSetQuotas == pickerSetQuotas {
				nq := queue.Quotas{High: quotaOf(in.next(), true), Normal: quotaOf(in.next(), true), LowGuaranteed: quotaOf(in.next(), true)}
				err := p.SetQuotas(nq)
				if (err == nil) != (nq.Validate() == nil) {
					t.Fatalf("step %d: SetQuotas(%+v) = %v, Validate() = %v", step, nq, err, nq.Validate())
				}
				if err == nil {
					q = nq
					m.SetQuotas(q)
					saturated, lowRun = false, -1
				} else {
					var qe *queue.QuotaError
					if !errors.As(err, &qe) {
						t.Fatalf("step %d: SetQuotas(%+v) = %v, want a *queue.QuotaError", step, nq, err)
					}
				}
				if p.Quotas() != q {
					t.Fatalf("step %d: Quotas() = %+v, want %+v", step, p.Quotas(), q)
				}
				continue
			}
			ready := queue.Mask(b & 0x3F)
			want, newCycle, wantOK := m.Next(ready)
			l, ok := p.Pick(ready)
			if !wantOK {
				if ok {
					t.Fatalf("step %d: Pick(%06b) = %v, true, want false (nothing ready)", step, ready, l)
				}
				continue
			}
			if !ok || l != want {
				t.Fatalf("step %d: Pick(%06b) = %v, %t, want %v (used %v of %v, %d picks)", step, ready, l, ok, want, m.Used, m.Quota, m.N)
			}
			if newCycle {
				// The pick that ends a cycle must see every level ready too.
				if saturated && ready&queue.AllLevels == queue.AllLevels && inCycle != m.Quota {
					t.Fatalf("step %d: saturated cycle %d had picks %v, want the quotas %v", step, m.Cycle, inCycle, m.Quota)
				}
				inCycle, saturated = [queue.NumLevels]int{}, true
			}
			m.Take(l, newCycle)
			inCycle[l]++
			saturated = saturated && ready&queue.AllLevels == queue.AllLevels
			if p.Cycle() != m.Cycle {
				t.Fatalf("step %d: Cycle() = %d, want %d", step, p.Cycle(), m.Cycle)
			}
			switch {
			case !ready.Has(queue.Low):
				lowRun = -1
			case l == queue.Low:
				lowRun = 0
			case lowRun >= 0:
				lowRun++
				if c := q.High + q.Normal + q.LowGuaranteed; lowRun > 2*c {
					t.Fatalf("step %d: %d picks of other levels since Low's last while Low stayed ready, want <= %d", step, lowRun, 2*c)
				}
			}
		}
	})
}

// Buckets operations of FuzzBuckets, one per byte (low two bits); the other bits
// are the argument.
const (
	bucketsPush = iota
	bucketsPop
	bucketsPopBack
	bucketsSetQuotas
)

// bucketsSeeds are the table cases FuzzBuckets starts from: three capacity bytes,
// three quota bytes, an aging byte (odd: on), then ops. A push op byte is
// level<<2 | aged<<4; a pop op byte is allowed<<2 | 1.
var bucketsSeeds = []struct {
	name string
	data []byte
}{
	{"plain", []byte{3, 3, 3, 2, 1, 1, 0, 0, 4, 8, 0, 4, 8, 29, 29, 29, 29, 29, 29}},
	{"aged normal", []byte{3, 3, 3, 1, 1, 1, 1, 0, 4 | 16, 4, 8, 29, 29, 29, 29}},
	{"aged low", []byte{3, 3, 3, 1, 1, 1, 1, 0, 4, 8, 8 | 16, 29, 29, 29, 29}},
	{"aged both, masks", []byte{2, 2, 2, 1, 1, 1, 1, 16, 4 | 16, 8 | 16, 8, 25, 21, 13, 29, 29}},
	{"evict and quotas", []byte{1, 1, 2, 3, 2, 1, 1, 0, 4, 8, 8, 10, 3, 29, 29, 29}},
}

// FuzzBuckets drives a queue.Buckets (with aging on or off) and a BucketsModel
// with pushes, pops under masks, evictions and quota changes, and compares every
// result; the aging hook must see only bucket heads and be called at most once per
// level per Pop.
func FuzzBuckets(f *testing.F) {
	for _, s := range bucketsSeeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &byteReader{data: data}
		var caps [queue.NumLevels]int
		for l := range caps {
			caps[l] = 1 + int(in.next()%6)
		}
		q := queue.Quotas{High: 1 + int(in.next()%4), Normal: 1 + int(in.next()%4), LowGuaranteed: 1 + int(in.next()%3)}
		aging := in.next()%2 == 1
		b, err := queue.NewBuckets[int](caps, q)
		if err != nil {
			t.Fatalf("NewBuckets(%v, %+v) error = %v", caps, q, err)
		}
		mp, _ := queue.NewPicker(q)
		m := &BucketsModel[int]{Picker: mp}
		for l, c := range caps {
			m.Buckets[l].Capacity = c
		}
		// Odd values are aged.
		var calls [queue.NumLevels]int
		if aging {
			b.SetAged(func(l queue.Level, head int) bool {
				calls[l]++
				if want, _ := b.Bucket(l).Peek(); head != want {
					t.Fatalf("aging hook got %d for %v, want the head %d", head, l, want)
				}
				return head%2 == 1
			})
			m.AgedFunc = func(_ queue.Level, head int) bool { return head%2 == 1 }
		}
		next := 0
		for step := 0; in.more(); step++ {
			op := in.next()
			arg := op >> 2
			switch op & 3 {
			case bucketsPush:
				l := queue.Level(arg % 3)
				next += 2
				v := next + int(arg>>2&1) // odd: aged
				err := b.Push(l, v)
				if ok := m.Buckets[l].Push(v); ok != (err == nil) || (!ok && !errors.Is(err, queue.ErrFull)) {
					t.Fatalf("step %d: Push(%v, %d) = %v, model has room = %t", step, l, v, err, ok)
				}
			case bucketsPop:
				allowed := queue.Mask(arg & 7)
				calls = [queue.NumLevels]int{}
				v, from, ok := b.Pop(allowed)
				wv, wfrom, wok := m.Pop(allowed)
				if v != wv || from != wfrom || ok != wok {
					t.Fatalf("step %d: Pop(%03b) = %d, %v, %t, want %d, %v, %t", step, allowed, v, from, ok, wv, wfrom, wok)
				}
				for l, c := range calls {
					if c > 1 {
						t.Fatalf("step %d: aging hook called %d times for %v in one Pop", step, c, queue.Level(l))
					}
				}
			case bucketsPopBack:
				l := queue.Level(arg % 3)
				compare(t, step, "Bucket("+l.String()+").PopBack", b.Bucket(l).PopBack, m.Buckets[l].PopBack)
			case bucketsSetQuotas:
				nq := queue.Quotas{High: int(arg & 3), Normal: int(arg >> 2 & 3), LowGuaranteed: 1 + int(arg>>4&1)}
				err := b.Picker().SetQuotas(nq)
				if merr := m.Picker.SetQuotas(nq); (err == nil) != (merr == nil) {
					t.Fatalf("step %d: SetQuotas(%+v) = %v, model %v", step, nq, err, merr)
				}
			}
			if b.Len() != m.Len() {
				t.Fatalf("step %d: Len() = %d, want %d", step, b.Len(), m.Len())
			}
			for l := range queue.Level(queue.NumLevels) {
				var got []int
				b.Bucket(l).Range(func(v int) bool {
					got = append(got, v)
					return true
				})
				if !slices.Equal(got, m.Buckets[l].Items) {
					t.Fatalf("step %d: Bucket(%v) = %v, want %v", step, l, got, m.Buckets[l].Items)
				}
			}
			if b.Picker().Cycle() != m.Picker.Cycle() {
				t.Fatalf("step %d: Picker().Cycle() = %d, want %d", step, b.Picker().Cycle(), m.Picker.Cycle())
			}
		}
	})
}
