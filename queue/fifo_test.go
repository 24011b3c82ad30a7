package queue

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// contents returns the elements of r from oldest to newest.
func contents[T any](r *Ring[T]) []T {
	var out []T
	r.Range(func(v T) bool {
		out = append(out, v)
		return true
	})
	return out
}

// newWrapped returns a ring of capacity c whose head sits at index shift, holding
// vals (so that a test can place the wrap wherever it wants).
func newWrapped(t *testing.T, c, shift int, vals ...int) *Ring[int] {
	t.Helper()
	r, err := NewRing[int](c)
	if err != nil {
		t.Fatalf("NewRing(%d) error = %v", c, err)
	}
	for range shift {
		if err := r.Push(-1); err != nil {
			t.Fatalf("Push() = %v", err)
		}
		r.Pop()
	}
	for _, v := range vals {
		if err := r.Push(v); err != nil {
			t.Fatalf("Push(%d) = %v", v, err)
		}
	}
	return r
}

// checkZeroed fails when a slot outside the live range of r is not the zero value.
func checkZeroed(t *testing.T, r *Ring[*int]) {
	t.Helper()
	for i := r.n; i < len(r.buf); i++ {
		if j := r.index(i); r.buf[j] != nil {
			t.Errorf("buf[%d] = %v after removal, want nil (no retained pointer)", j, r.buf[j])
		}
	}
}

func TestNewRing(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		wantErr  string
	}{
		{"one", 1, ""},
		{"many", 1000, ""},
		{"zero", 0, "queue: capacity = 0: must be >= 1"},
		{"negative", -3, "queue: capacity = -3: must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRing[int](tt.capacity)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("NewRing(%d) error = %v, want %q", tt.capacity, err, tt.wantErr)
				}
				if r != nil {
					t.Errorf("NewRing(%d) = %v, want nil on error", tt.capacity, r)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewRing(%d) error = %v", tt.capacity, err)
			}
			if r.Cap() != tt.capacity || r.Len() != 0 {
				t.Errorf("Cap(), Len() = %d, %d, want %d, 0", r.Cap(), r.Len(), tt.capacity)
			}
		})
	}
}

func TestRingPushPop(t *testing.T) {
	tests := []struct {
		name  string
		cap   int
		shift int // pushes and pops before the test, to move the head
		push  []int
		pops  int
		want  []int // popped, in order
		left  []int
	}{
		{"fifo", 4, 0, []int{1, 2, 3}, 3, []int{1, 2, 3}, nil},
		{"partial", 4, 0, []int{1, 2, 3}, 1, []int{1}, []int{2, 3}},
		{"wraparound", 4, 3, []int{1, 2, 3, 4}, 4, []int{1, 2, 3, 4}, nil},
		{"wraparound partial", 5, 4, []int{1, 2, 3}, 2, []int{1, 2}, []int{3}},
		{"capacity one", 1, 7, []int{9}, 1, []int{9}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWrapped(t, tt.cap, tt.shift, tt.push...)
			if got := r.Len(); got != len(tt.push) {
				t.Errorf("Len() = %d, want %d", got, len(tt.push))
			}
			var got []int
			for range tt.pops {
				v, ok := r.Pop()
				if !ok {
					t.Fatalf("Pop() ok = false, want true")
				}
				got = append(got, v)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("popped %v, want %v", got, tt.want)
			}
			if left := contents(r); !slices.Equal(left, tt.left) {
				t.Errorf("Range() = %v, want %v", left, tt.left)
			}
		})
	}
}

func TestRingFull(t *testing.T) {
	r := newWrapped(t, 3, 2, 1, 2, 3)
	if err := r.Push(4); !errors.Is(err, ErrFull) {
		t.Fatalf("Push() on a full ring = %v, want ErrFull", err)
	}
	if got := contents(r); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("after a refused Push, Range() = %v, want [1 2 3]", got)
	}
	r.Pop()
	if err := r.Push(4); err != nil {
		t.Fatalf("Push() after Pop() = %v, want nil", err)
	}
	if got := contents(r); !slices.Equal(got, []int{2, 3, 4}) {
		t.Errorf("Range() = %v, want [2 3 4]", got)
	}
}

func TestRingEmpty(t *testing.T) {
	var zero Ring[int]
	r, _ := NewRing[int](2)
	for name, r := range map[string]*Ring[int]{"new": r, "zero value": &zero} {
		t.Run(name, func(t *testing.T) {
			for opName, op := range map[string]func() (int, bool){
				"Pop": r.Pop, "Peek": r.Peek, "PopBack": r.PopBack, "PeekBack": r.PeekBack,
				"Remove": func() (int, bool) { return r.Remove(func(int) bool { return true }) },
			} {
				if v, ok := op(); ok || v != 0 {
					t.Errorf("%s() = %d, %t, want 0, false", opName, v, ok)
				}
			}
			if r.Len() != 0 {
				t.Errorf("Len() = %d, want 0", r.Len())
			}
		})
	}
	if err := zero.Push(1); !errors.Is(err, ErrFull) {
		t.Errorf("zero Ring Push() = %v, want ErrFull", err)
	}
	if err := zero.Resize(1); err != nil {
		t.Fatalf("zero Ring Resize(1) = %v", err)
	}
	if err := zero.Push(1); err != nil {
		t.Errorf("Push() after Resize(1) = %v, want nil", err)
	}
}

func TestRingPeekAndBack(t *testing.T) {
	tests := []struct {
		name      string
		cap       int
		shift     int
		vals      []int
		front     int
		back      int
		afterBack []int
	}{
		{"one", 3, 0, []int{7}, 7, 7, nil},
		{"no wrap", 4, 0, []int{1, 2, 3}, 1, 3, []int{1, 2}},
		{"tail wrapped", 4, 2, []int{1, 2, 3}, 1, 3, []int{1, 2}},
		{"tail at index 0", 4, 3, []int{1, 2}, 1, 2, []int{1}},
		{"full wrapped", 4, 1, []int{1, 2, 3, 4}, 1, 4, []int{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWrapped(t, tt.cap, tt.shift, tt.vals...)
			if v, ok := r.Peek(); !ok || v != tt.front {
				t.Errorf("Peek() = %d, %t, want %d, true", v, ok, tt.front)
			}
			if v, ok := r.PeekBack(); !ok || v != tt.back {
				t.Errorf("PeekBack() = %d, %t, want %d, true", v, ok, tt.back)
			}
			if r.Len() != len(tt.vals) {
				t.Errorf("Len() after peeks = %d, want %d", r.Len(), len(tt.vals))
			}
			if v, ok := r.PopBack(); !ok || v != tt.back {
				t.Errorf("PopBack() = %d, %t, want %d, true", v, ok, tt.back)
			}
			if got := contents(r); !slices.Equal(got, tt.afterBack) {
				t.Errorf("Range() after PopBack() = %v, want %v", got, tt.afterBack)
			}
			// The slot PopBack freed is the next one Push fills.
			if err := r.Push(99); err != nil {
				t.Fatalf("Push() = %v", err)
			}
			if v, _ := r.PeekBack(); v != 99 {
				t.Errorf("PeekBack() after Push(99) = %d, want 99", v)
			}
		})
	}
}

func TestRingRemove(t *testing.T) {
	tests := []struct {
		name   string
		cap    int
		shift  int
		vals   []int
		target int // Remove the first element equal to target
		ok     bool
		want   []int
	}{
		{"head", 6, 0, []int{1, 2, 3, 4}, 1, true, []int{2, 3, 4}},
		{"tail", 6, 0, []int{1, 2, 3, 4}, 4, true, []int{1, 2, 3}},
		{"front half", 8, 0, []int{1, 2, 3, 4, 5, 6}, 2, true, []int{1, 3, 4, 5, 6}},
		{"back half", 8, 0, []int{1, 2, 3, 4, 5, 6}, 5, true, []int{1, 2, 3, 4, 6}},
		{"first of duplicates", 6, 0, []int{1, 2, 3, 2, 5}, 2, true, []int{1, 3, 2, 5}},
		{"missing", 6, 0, []int{1, 2, 3}, 9, false, []int{1, 2, 3}},
		{"only", 3, 2, []int{1}, 1, true, nil},
		{"front half across wrap", 6, 4, []int{1, 2, 3, 4, 5, 6}, 3, true, []int{1, 2, 4, 5, 6}},
		{"back half across wrap", 6, 4, []int{1, 2, 3, 4, 5, 6}, 4, true, []int{1, 2, 3, 5, 6}},
		{"before wrap point", 6, 5, []int{1, 2, 3, 4, 5}, 1, true, []int{2, 3, 4, 5}},
		{"after wrap point", 6, 5, []int{1, 2, 3, 4, 5}, 2, true, []int{1, 3, 4, 5}},
		{"tail across wrap", 6, 3, []int{1, 2, 3, 4, 5}, 5, true, []int{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWrapped(t, tt.cap, tt.shift, tt.vals...)
			calls := 0
			v, ok := r.Remove(func(v int) bool {
				calls++
				return v == tt.target
			})
			if ok != tt.ok || (ok && v != tt.target) {
				t.Errorf("Remove() = %d, %t, want %d, %t", v, ok, tt.target, tt.ok)
			}
			if want := slices.Index(tt.vals, tt.target) + 1; ok && calls != want {
				t.Errorf("Remove() called match %d times, want %d (stop at the first match)", calls, want)
			}
			if got := contents(r); !slices.Equal(got, tt.want) {
				t.Errorf("Range() after Remove() = %v, want %v", got, tt.want)
			}
			if r.Len() != len(tt.want) {
				t.Errorf("Len() = %d, want %d", r.Len(), len(tt.want))
			}
			// The ring still works as a FIFO after the removal.
			for r.Len() < r.Cap() {
				if err := r.Push(100 + r.Len()); err != nil {
					t.Fatalf("Push() = %v", err)
				}
			}
			if err := r.Push(0); !errors.Is(err, ErrFull) {
				t.Errorf("Push() on full ring = %v, want ErrFull", err)
			}
			for _, w := range tt.want {
				if got, _ := r.Pop(); got != w {
					t.Errorf("Pop() = %d, want %d", got, w)
				}
			}
		})
	}
}

func TestRingZeroesVacatedSlots(t *testing.T) {
	ops := []struct {
		name string
		op   func(r *Ring[*int])
	}{
		{"Pop", func(r *Ring[*int]) { r.Pop() }},
		{"PopBack", func(r *Ring[*int]) { r.PopBack() }},
		{"Remove front", func(r *Ring[*int]) { r.Remove(func(p *int) bool { return *p == 1 }) }},
		{"Remove back", func(r *Ring[*int]) { r.Remove(func(p *int) bool { return *p == 3 }) }},
		{"Clear", func(r *Ring[*int]) { r.Clear(nil) }},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := NewRing[*int](5)
			for range 3 { // put the head at index 3 so the elements wrap
				_ = r.Push(new(int))
				r.Pop()
			}
			for i := range 5 {
				v := i
				_ = r.Push(&v)
			}
			tt.op(r)
			checkZeroed(t, r)
		})
	}
}

func TestRingRange(t *testing.T) {
	r := newWrapped(t, 4, 3, 1, 2, 3, 4)
	tests := []struct {
		name  string
		limit int // stop after visiting this many
		want  []int
	}{
		{"all", 10, []int{1, 2, 3, 4}},
		{"stop after two", 2, []int{1, 2}},
		{"stop at first", 1, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			r.Range(func(v int) bool {
				got = append(got, v)
				return len(got) < tt.limit
			})
			if !slices.Equal(got, tt.want) {
				t.Errorf("Range() visited %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRingResize(t *testing.T) {
	tests := []struct {
		name    string
		cap     int
		shift   int
		vals    []int
		newCap  int
		wantErr string
	}{
		{"grow wrapped", 4, 3, []int{1, 2, 3, 4}, 8, ""},
		{"shrink wrapped", 6, 5, []int{1, 2, 3}, 3, ""},
		{"same", 4, 2, []int{1, 2, 3}, 4, ""},
		{"empty", 4, 2, nil, 1, ""},
		{"grow unwrapped", 4, 0, []int{1, 2}, 5, ""},
		{"below len", 4, 1, []int{1, 2, 3}, 2, "queue: capacity = 2: must be >= Len() = 3"},
		{"zero", 4, 0, nil, 0, "queue: capacity = 0: must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWrapped(t, tt.cap, tt.shift, tt.vals...)
			err := r.Resize(tt.newCap)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "capacity") || err.Error() != tt.wantErr {
					t.Fatalf("Resize(%d) = %v, want %q", tt.newCap, err, tt.wantErr)
				}
				if r.Cap() != tt.cap {
					t.Errorf("Cap() after failed Resize = %d, want %d", r.Cap(), tt.cap)
				}
			} else {
				if err != nil {
					t.Fatalf("Resize(%d) = %v", tt.newCap, err)
				}
				if r.Cap() != tt.newCap {
					t.Errorf("Cap() = %d, want %d", r.Cap(), tt.newCap)
				}
			}
			if got := contents(r); !slices.Equal(got, tt.vals) {
				t.Errorf("Range() after Resize = %v, want %v", got, tt.vals)
			}
			// Fill to the new capacity and drain in order.
			want := slices.Clone(tt.vals)
			for i := 0; r.Len() < r.Cap(); i++ {
				_ = r.Push(50 + i)
				want = append(want, 50+i)
			}
			if err := r.Push(0); !errors.Is(err, ErrFull) {
				t.Errorf("Push() on full ring = %v, want ErrFull", err)
			}
			for _, w := range want {
				if got, _ := r.Pop(); got != w {
					t.Errorf("Pop() = %d, want %d", got, w)
				}
			}
		})
	}
}

func TestRingClear(t *testing.T) {
	tests := []struct {
		name  string
		shift int
		vals  []int
		nilFn bool
	}{
		{"wrapped", 3, []int{1, 2, 3, 4}, false},
		{"empty", 0, nil, false},
		{"nil func", 2, []int{1, 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWrapped(t, 4, tt.shift, tt.vals...)
			var got []int
			var f func(int)
			if !tt.nilFn {
				f = func(v int) {
					if r.Len() != len(tt.vals)-len(got)-1 {
						t.Errorf("Len() inside Clear's func = %d, want %d (element already gone)", r.Len(), len(tt.vals)-len(got)-1)
					}
					got = append(got, v)
				}
			}
			r.Clear(f)
			if !tt.nilFn && !slices.Equal(got, tt.vals) {
				t.Errorf("Clear() visited %v, want %v", got, tt.vals)
			}
			if r.Len() != 0 || r.Cap() != 4 {
				t.Errorf("Len(), Cap() after Clear = %d, %d, want 0, 4", r.Len(), r.Cap())
			}
		})
	}
	t.Run("func pushes", func(t *testing.T) {
		r := newWrapped(t, 4, 1, 1, 2)
		r.Clear(func(v int) { _ = r.Push(v * 10) })
		if got := contents(r); !slices.Equal(got, []int{10, 20}) {
			t.Errorf("Range() after Clear that re-pushes = %v, want [10 20]", got)
		}
	})
}

func TestRingAllocs(t *testing.T) {
	r, _ := NewRing[*int](64)
	p := new(int)
	allocs := testing.AllocsPerRun(100, func() {
		for range 40 {
			_ = r.Push(p)
		}
		r.Remove(func(q *int) bool { return q == p })
		r.PopBack()
		r.Peek()
		r.PeekBack()
		r.Range(func(*int) bool { return true })
		for range 10 {
			r.Pop()
		}
		r.Clear(nil)
	})
	if allocs != 0 {
		t.Errorf("ring operations allocate %v times per run, want 0", allocs)
	}
}
