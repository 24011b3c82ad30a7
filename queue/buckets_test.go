package queue

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// popped is one result of Buckets.Pop.
type popped struct {
	v    int
	from Level
}

func (p popped) String() string { return fmt.Sprintf("%d@%v", p.v, p.from) }

func mustBuckets(t *testing.T, caps [NumLevels]int, q Quotas) *Buckets[int] {
	t.Helper()
	b, err := NewBuckets[int](caps, q)
	if err != nil {
		t.Fatalf("NewBuckets(%v, %+v) error = %v", caps, q, err)
	}
	return b
}

// fill pushes vals[l] into the bucket of each level l.
func fill(t *testing.T, b *Buckets[int], vals [NumLevels][]int) {
	t.Helper()
	for lv, vs := range vals {
		for _, v := range vs {
			if err := b.Push(Level(lv), v); err != nil {
				t.Fatalf("Push(%v, %d) = %v", Level(lv), v, err)
			}
		}
	}
}

func TestNewBuckets(t *testing.T) {
	tests := []struct {
		name string
		caps [NumLevels]int
		q    Quotas
		want []string
	}{
		{"valid", [NumLevels]int{1, 2, 3}, Quotas{3, 2, 1}, nil},
		{"low capacity zero", [NumLevels]int{1, 2, 0}, Quotas{3, 2, 1}, []string{"queue: capacity of low = 0: must be >= 1"}},
		{"capacity and quota", [NumLevels]int{-1, 2, 3}, Quotas{3, 2, 0}, []string{
			"queue: capacity of high = -1: must be >= 1",
			"queue: Quotas.LowGuaranteed = 0: must be >= 1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewBuckets[int](tt.caps, tt.q)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("NewBuckets() error = %v", err)
				}
				for lv := High; lv < NumLevels; lv++ {
					if got := b.Bucket(lv).Cap(); got != tt.caps[lv] {
						t.Errorf("Bucket(%v).Cap() = %d, want %d", lv, got, tt.caps[lv])
					}
				}
				if got := b.Picker().Quotas(); got != tt.q {
					t.Errorf("Picker().Quotas() = %+v, want %+v", got, tt.q)
				}
				return
			}
			if b != nil || err == nil {
				t.Fatalf("NewBuckets() = %v, %v, want nil and an error", b, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewBuckets() error = %q, want it to contain %q", err, w)
				}
			}
			var qe *QuotaError
			if wantQE := strings.Contains(strings.Join(tt.want, ""), "Quotas."); errors.As(err, &qe) != wantQE {
				t.Errorf("errors.As(err, *QuotaError) = %t, want %t", !wantQE, wantQE)
			}
		})
	}
}

func TestBucketsPushLenFull(t *testing.T) {
	b := mustBuckets(t, [NumLevels]int{1, 2, 3}, Quotas{1, 1, 1})
	fill(t, b, [NumLevels][]int{{1}, {2, 3}, {4, 5, 6}})
	if got := b.Len(); got != 6 {
		t.Errorf("Len() = %d, want 6", got)
	}
	for lv := High; lv < NumLevels; lv++ {
		if err := b.Push(lv, 0); !errors.Is(err, ErrFull) {
			t.Errorf("Push(%v) on a full bucket = %v, want ErrFull", lv, err)
		}
	}
	b.Bucket(Low).PopBack()
	if got := b.Len(); got != 5 {
		t.Errorf("Len() after Bucket(Low).PopBack() = %d, want 5", got)
	}
	if err := b.Push(Low, 7); err != nil {
		t.Errorf("Push(low) after PopBack = %v, want nil", err)
	}
}

func TestBucketsInvalidLevelPanics(t *testing.T) {
	b := mustBuckets(t, [NumLevels]int{1, 1, 1}, Quotas{1, 1, 1})
	for name, f := range map[string]func(){
		"Push":   func() { _ = b.Push(Level(3), 1) },
		"Bucket": func() { b.Bucket(Level(9)) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "queue: invalid level") {
					t.Errorf("%s(invalid level) panicked with %v, want \"queue: invalid level ...\"", name, r)
				}
			}()
			f()
		})
	}
}

// TestBucketsPop covers quotas, FIFO order per bucket, masks and work conservation,
// without aging.
func TestBucketsPop(t *testing.T) {
	tests := []struct {
		name    string
		q       Quotas
		vals    [NumLevels][]int
		allowed []Mask // one per Pop; the last one repeats
		want    string // popped values and levels; "-" for ok == false
	}{
		{
			"quotas 2/1/1",
			Quotas{2, 1, 1},
			[NumLevels][]int{{1, 2, 3, 4}, {11, 12}, {21, 22}},
			[]Mask{AllLevels},
			"21@low 11@normal 1@high 2@high 22@low 12@normal 3@high 4@high -",
		},
		{
			"work conserving when high runs dry: normal before low",
			Quotas{5, 1, 1},
			[NumLevels][]int{{1}, {11, 12, 13}, {21, 22}},
			[]Mask{AllLevels},
			"21@low 11@normal 1@high 12@normal 13@normal 22@low -",
		},
		{
			"only high allowed",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1, 2}, {11}, {21}},
			[]Mask{MaskOf(High)},
			"1@high 2@high -",
		},
		{
			"allowed but empty",
			Quotas{1, 1, 1},
			[NumLevels][]int{nil, {11}, {21}},
			[]Mask{MaskOf(High)},
			"-",
		},
		{
			"mask changes between pops",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1, 2}, {11, 12}, {21, 22}},
			[]Mask{MaskOf(Low), MaskOf(Normal, Low), AllLevels},
			"21@low 11@normal 1@high 22@low 12@normal 2@high -",
		},
		{
			"nothing allowed",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1}, {11}, {21}},
			[]Mask{0},
			"-",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBuckets(t, [NumLevels]int{8, 8, 8}, tt.q)
			fill(t, b, tt.vals)
			got := popAll(b, tt.allowed)
			if got != tt.want {
				t.Errorf("pops = %q, want %q", got, tt.want)
			}
		})
	}
}

// popAll pops until Pop reports false, with allowed[i] for the i-th pop (the last
// mask repeating), and renders the results.
func popAll(b *Buckets[int], allowed []Mask) string {
	var out []string
	for i := 0; ; i++ {
		m := allowed[min(i, len(allowed)-1)]
		v, from, ok := b.Pop(m)
		if !ok {
			if v != 0 || from != 0 {
				out = append(out, fmt.Sprintf("(Pop() = %d, %v, false: want zero values)", v, from))
			}
			out = append(out, "-")
			return strings.Join(out, " ")
		}
		if !m.Has(from) {
			out = append(out, fmt.Sprintf("(%d from %v, not allowed)", v, from))
		}
		out = append(out, popped{v, from}.String())
	}
}

func TestBucketsAging(t *testing.T) {
	// Values >= 100 are aged.
	aged := func(_ Level, v int) bool { return v >= 100 }
	tests := []struct {
		name    string
		q       Quotas
		vals    [NumLevels][]int
		allowed []Mask
		want    string
	}{
		{
			"no aged heads: plain quotas",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1, 2}, {11, 12}, {21, 22}},
			[]Mask{AllLevels},
			"21@low 11@normal 1@high 22@low 12@normal 2@high -",
		},
		{
			"aged normal takes high's pick over a fresh high head",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1, 2}, {11, 112, 13}, {21}},
			[]Mask{AllLevels},
			"21@low 11@normal 112@normal 13@normal 1@high 2@high -",
		},
		{
			"aged high head keeps its pick",
			Quotas{1, 1, 1},
			[NumLevels][]int{{101}, {11, 112}, {21}},
			[]Mask{AllLevels},
			"21@low 11@normal 101@high 112@normal -",
		},
		{
			"aged normal uses high's credit when high is empty",
			Quotas{2, 1, 1},
			[NumLevels][]int{nil, {111, 112, 13}, nil},
			[]Mask{AllLevels},
			"111@normal 112@normal 13@normal -",
		},
		{
			"aged normal uses high's credit when high is not allowed",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1}, {111, 12}, {21}},
			[]Mask{MaskOf(Normal, Low)},
			"21@low 111@normal 12@normal -",
		},
		{
			"aged low takes normal's pick over a fresh normal head",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1}, {11}, {21, 122, 23}},
			[]Mask{AllLevels},
			"21@low 122@low 1@high 23@low 11@normal -",
		},
		{
			"aged normal head keeps its own pick from aged low",
			Quotas{1, 1, 1},
			[NumLevels][]int{{101}, {111, 112}, {21, 122}},
			[]Mask{AllLevels},
			"21@low 111@normal 101@high 122@low 112@normal -",
		},
		{
			"both lifted at once",
			Quotas{2, 1, 1},
			[NumLevels][]int{nil, {111}, {21, 122, 23}},
			[]Mask{AllLevels},
			"21@low 111@normal 122@low 23@low -",
		},
		{
			"aged low lifted by one level only",
			Quotas{3, 1, 1},
			[NumLevels][]int{nil, nil, {121, 122, 123}},
			[]Mask{AllLevels},
			"121@low 122@low 123@low -",
		},
		{
			"aged low not allowed stays put",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1}, {11, 12}, {121}},
			[]Mask{MaskOf(High, Normal)},
			"11@normal 1@high 12@normal -",
		},
		{
			"aged low with normal not allowed",
			Quotas{1, 1, 1},
			[NumLevels][]int{{1, 2}, {11}, {121, 122}},
			[]Mask{MaskOf(High, Low)},
			"121@low 122@low 1@high 2@high -",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBuckets(t, [NumLevels]int{8, 8, 8}, tt.q)
			b.SetAged(aged)
			fill(t, b, tt.vals)
			if got := popAll(b, tt.allowed); got != tt.want {
				t.Errorf("pops = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBucketsAgingHookCalls(t *testing.T) {
	b := mustBuckets(t, [NumLevels]int{8, 8, 8}, Quotas{1, 1, 1})
	fill(t, b, [NumLevels][]int{{1, 2}, {111, 112}, {121, 122}})
	var calls [NumLevels]int
	b.SetAged(func(lv Level, v int) bool {
		calls[lv]++
		if want := lv == Normal && v >= 111 && v < 120 || lv == Low && v >= 121 || lv == High && v < 10; !want {
			t.Errorf("hook(%v, %d): not the head of that bucket", lv, v)
		}
		return v >= 100
	})
	for range 6 {
		calls = [NumLevels]int{}
		if _, _, ok := b.Pop(AllLevels); !ok {
			t.Fatal("Pop() ok = false, want true")
		}
		for lv, c := range calls {
			if c > 1 {
				t.Errorf("hook called %d times for %v in one Pop, want at most 1", c, Level(lv))
			}
		}
	}
	b = mustBuckets(t, [NumLevels]int{8, 8, 8}, Quotas{1, 1, 1})
	b.SetAged(func(lv Level, _ int) bool {
		calls[lv]++
		return true
	})
	b.SetAged(nil)
	fill(t, b, [NumLevels][]int{{1}, {111}, {121}})
	calls = [NumLevels]int{}
	if got := popAll(b, []Mask{AllLevels}); got != "121@low 111@normal 1@high -" {
		t.Errorf("pops with aging off = %q, want plain quota order", got)
	}
	if calls != [NumLevels]int{} {
		t.Errorf("hook calls after SetAged(nil) = %v, want none", calls)
	}
}

func TestBucketsSetQuotasBetweenPops(t *testing.T) {
	b := mustBuckets(t, [NumLevels]int{16, 16, 16}, Quotas{1, 1, 1})
	fill(t, b, [NumLevels][]int{{1, 2, 3, 4, 5, 6}, {11, 12, 13}, {21, 22, 23}})
	var got []string
	pop := func() {
		v, from, _ := b.Pop(AllLevels)
		got = append(got, popped{v, from}.String())
	}
	pop()
	if err := b.Picker().SetQuotas(Quotas{High: 3, Normal: 1, LowGuaranteed: 1}); err != nil {
		t.Fatalf("SetQuotas() = %v", err)
	}
	for range 6 {
		pop()
	}
	want := "21@low 11@normal 1@high 2@high 3@high 22@low 12@normal"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("pops = %q, want %q", s, want)
	}
}

func TestBucketsZeroValue(t *testing.T) {
	var b Buckets[int]
	if err := b.Push(Low, 1); !errors.Is(err, ErrFull) {
		t.Errorf("zero Buckets Push() = %v, want ErrFull", err)
	}
	if v, from, ok := b.Pop(AllLevels); ok {
		t.Errorf("zero Buckets Pop() = %d, %v, true, want false", v, from)
	}
}

func TestBucketsAllocs(t *testing.T) {
	b, err := NewBuckets[*int]([NumLevels]int{64, 64, 64}, Quotas{5, 3, 1})
	if err != nil {
		t.Fatal(err)
	}
	p := new(int)
	b.SetAged(func(_ Level, v *int) bool { return v == p })
	allocs := testing.AllocsPerRun(100, func() {
		for lv := High; lv < NumLevels; lv++ {
			for range 10 {
				_ = b.Push(lv, new(int))
			}
		}
		_ = b.Push(Low, p)
		for b.Len() > 0 {
			b.Pop(AllLevels)
		}
	})
	// new(int) in the pushes is the test's own allocation: 30 per run.
	if allocs > 30 {
		t.Errorf("Push/Pop allocate %v times per run, want only the test's 30", allocs)
	}
}

// TestBucketsPeekSaysWherePopTakes checks, over random pushes, masks and aging,
// that Peek names the level the next Pop takes from and changes nothing.
func TestBucketsPeekSaysWherePopTakes(t *testing.T) {
	b := mustBuckets(t, [NumLevels]int{64, 64, 64}, Quotas{High: 5, Normal: 2, LowGuaranteed: 1})
	seed := uint64(1)
	next := func(n uint64) uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return (seed >> 33) % n }
	aged := map[int]bool{}
	b.SetAged(func(_ Level, head int) bool { return aged[head] })
	v := 0
	for range 20_000 {
		if next(2) == 0 {
			l := Level(next(NumLevels))
			if b.Bucket(l).Len() < b.Bucket(l).Cap() {
				v++
				aged[v] = next(8) == 0
				_ = b.Push(l, v)
			}
			continue
		}
		allowed := Mask(next(8))
		cycle, quotas := b.Picker().Cycle(), b.Picker().Quotas()
		lens := [NumLevels]int{b.Bucket(High).Len(), b.Bucket(Normal).Len(), b.Bucket(Low).Len()}
		pl, pok := b.Peek(allowed)
		if b.Picker().Cycle() != cycle || b.Picker().Quotas() != quotas ||
			lens != [NumLevels]int{b.Bucket(High).Len(), b.Bucket(Normal).Len(), b.Bucket(Low).Len()} {
			t.Fatal("Peek changed the buckets")
		}
		_, from, ok := b.Pop(allowed)
		if ok != pok || (ok && from != pl) {
			t.Fatalf("Peek(%b) = %v, %v; Pop took from %v, %v", allowed, pl, pok, from, ok)
		}
	}
}

// TestBucketsPopAheadKeepsTheFloor checks that picks ahead of a passed-over
// floor level stop before they take its share of the cycle, and that it then
// gets its pick.
func TestBucketsPopAheadKeepsTheFloor(t *testing.T) {
	b := mustBuckets(t, [NumLevels]int{64, 64, 64}, Quotas{High: 3, Normal: 1, LowGuaranteed: 1})
	fill(t, b, [NumLevels][]int{{1, 2, 3, 4, 5, 6, 7, 8}, {}, {100, 101}})
	// Low is due first in the cycle; a caller that cannot take it picks High ahead.
	for i := range 4 {
		if l, _ := b.Peek(AllLevels); l != Low {
			t.Fatalf("Peek() before pick %d = %v, want low", i, l)
		}
		if _, from, ok := b.PopAhead(AllLevels, 1<<High); !ok || from != High {
			t.Fatalf("PopAhead(high) #%d = %v, %v; want high", i, from, ok)
		}
	}
	// The cycle's last pick is Low's: no pick ahead may take it.
	if v, from, ok := b.PopAhead(AllLevels, 1<<High); ok {
		t.Fatalf("PopAhead(high) with Low owed the last pick = %d@%v, want none", v, from)
	}
	if v, from, _ := b.Pop(AllLevels); from != Low || v != 100 || b.Picker().Cycle() != 0 {
		t.Fatalf("Pop() = %d@%v in cycle %d, want 100@low in cycle 0", v, from, b.Picker().Cycle())
	}
	if _, _, _ = b.Pop(AllLevels); b.Picker().Cycle() != 1 {
		t.Fatalf("Cycle() after a full cycle = %d, want 1", b.Picker().Cycle())
	}
}

// TestBucketsPickedAs checks that an aged element is reported as picked one level
// higher, whichever credit it spent.
func TestBucketsPickedAs(t *testing.T) {
	b := mustBuckets(t, [NumLevels]int{8, 8, 8}, Quotas{High: 1, Normal: 1, LowGuaranteed: 1})
	fill(t, b, [NumLevels][]int{{}, {1}, {2, 3}})
	b.SetAged(func(_ Level, head int) bool { return head == 2 })
	for _, want := range []struct {
		v      int
		from   Level
		pickAs Level
	}{{2, Low, Normal}, {1, Normal, Normal}, {3, Low, Low}} {
		v, from, ok := b.Pop(AllLevels)
		if !ok || v != want.v || from != want.from || b.PickedAs() != want.pickAs {
			t.Fatalf("Pop() = %d@%v, PickedAs() = %v; want %d@%v as %v", v, from, b.PickedAs(), want.v, want.from, want.pickAs)
		}
	}
}
