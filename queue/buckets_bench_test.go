package queue

import "testing"

// BenchmarkPicker_Pick picks with every level ready.
func BenchmarkPicker_Pick(b *testing.B) {
	p, err := NewPicker(Quotas{High: 250, Normal: 166, LowGuaranteed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Pick(AllLevels)
	}
}

// BenchmarkBuckets_Pop pops from saturated buckets and pushes each popped element
// back into its bucket, so every bucket stays full.
func BenchmarkBuckets_Pop(b *testing.B) {
	for _, bc := range []struct {
		name  string
		aging bool
	}{
		{"plain", false},
		{"aging", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const capacity = 1024
			bk, err := NewBuckets[*int]([NumLevels]int{capacity, capacity, capacity}, Quotas{High: 250, Normal: 166, LowGuaranteed: 1})
			if err != nil {
				b.Fatal(err)
			}
			if bc.aging {
				// Every fourth element is aged; the hook reads it like a timestamp.
				bk.SetAged(func(_ Level, v *int) bool { return *v%4 == 0 })
			}
			for lv := High; lv < NumLevels; lv++ {
				for i := range capacity {
					v := i
					_ = bk.Push(lv, &v)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				v, from, ok := bk.Pop(AllLevels)
				if !ok {
					b.Fatal("Pop() ok = false")
				}
				if err := bk.Push(from, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
