package queue

import "testing"

// BenchmarkRing_PushPop pushes and pops one element per iteration on a ring kept
// half full, so the head and the tail wrap around.
func BenchmarkRing_PushPop(b *testing.B) {
	r, err := NewRing[*int](1024)
	if err != nil {
		b.Fatal(err)
	}
	v := new(int)
	for range 512 {
		_ = r.Push(v)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Push(v); err != nil {
			b.Fatal(err)
		}
		if _, ok := r.Pop(); !ok {
			b.Fatal("Pop() ok = false")
		}
	}
}

// fifo is the interface through which BenchmarkFIFO compares Ring with the usual
// alternatives.
type fifo interface {
	push(v *int) bool
	pop() (*int, bool)
}

type ringFIFO struct{ r *Ring[*int] }

func (f ringFIFO) push(v *int) bool  { return f.r.Push(v) == nil }
func (f ringFIFO) pop() (*int, bool) { return f.r.Pop() }

type chanFIFO chan *int

func (f chanFIFO) push(v *int) bool {
	select {
	case f <- v:
		return true
	default:
		return false
	}
}

func (f chanFIFO) pop() (*int, bool) {
	select {
	case v := <-f:
		return v, true
	default:
		return nil, false
	}
}

// sliceFIFO is the naive queue: append at the tail, reslice at the head.
type sliceFIFO struct{ s []*int }

func (f *sliceFIFO) push(v *int) bool { f.s = append(f.s, v); return true }

func (f *sliceFIFO) pop() (*int, bool) {
	if len(f.s) == 0 {
		return nil, false
	}
	v := f.s[0]
	f.s[0] = nil
	f.s = f.s[1:]
	return v, true
}

// BenchmarkFIFO compares Ring with a buffered channel and a slice queue, all used
// through the fifo interface, half full.
func BenchmarkFIFO(b *testing.B) {
	const capacity = 1024
	r, _ := NewRing[*int](capacity)
	impls := []struct {
		name string
		q    fifo
	}{
		{"ring", ringFIFO{r}},
		{"chan", make(chanFIFO, capacity)},
		{"slice", &sliceFIFO{}},
	}
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			v := new(int)
			for range capacity / 2 {
				impl.q.push(v)
			}
			b.ReportAllocs()
			for b.Loop() {
				impl.q.push(v)
				impl.q.pop()
			}
		})
	}
}
