package queue

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// modelPicks is the number of picks of each model run.
const modelPicks = 100_000

// floorModel is the picker's rule written out plainly, with fractions: a cycle
// holds c = High + Normal + LowGuaranteed picks (it runs on while a ready floor
// level is owed picks, up to 2c); a ready floor level (Low before Normal) whose
// share of the cycle so far is below its quota's share, counting the next pick,
// takes it; else the highest ready level does.
type floorModel struct {
	quota [NumLevels]int
	used  [NumLevels]int
	n     int
	cycle uint64
}

// next returns the level the next pick goes to, and whether it starts a cycle.
func (m *floorModel) next(ready Mask) (Level, bool) {
	c := m.quota[High] + m.quota[Normal] + m.quota[Low]
	owed := false
	for _, f := range []Level{Normal, Low} {
		if ready.Has(f) && m.used[f] < m.quota[f] {
			owed = true
		}
	}
	used, n, refill := m.used, m.n, false
	if (m.n >= c && !owed) || m.n >= 2*c {
		used, n, refill = [NumLevels]int{}, 0, true
	}
	for _, f := range []Level{Low, Normal} {
		if ready.Has(f) && used[f] < m.quota[f] &&
			float64(used[f])/float64(m.quota[f]) < float64(n+1)/float64(c) {
			return f, refill
		}
	}
	for _, l := range []Level{High, Normal, Low} {
		if ready.Has(l) {
			return l, refill
		}
	}
	return 0, false
}

// take records a pick of lv, starting a new cycle first when refill is true.
func (m *floorModel) take(lv Level, refill bool) {
	if refill {
		m.used, m.n = [NumLevels]int{}, 0
		m.cycle++
	}
	m.used[lv]++
	m.n++
}

// modelQuotas are the quota sets of the model runs; random ones are added from a
// seeded generator.
func modelQuotas() []Quotas {
	qs := []Quotas{
		{250, 166, 1},
		{1, 1, 1},
		{2, 1, 1},
		{150, 100, 1},
		{5, 3, 2},
		{1, 1, 10},
		{1000, 1, 1},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		qs = append(qs, Quotas{1 + rng.IntN(300), 1 + rng.IntN(200), 1 + rng.IntN(5)})
	}
	return qs
}

// TestModelSaturatedShares pops modelPicks times from buckets that are refilled to
// stay full, and checks every pick against the counter model, each level's share
// against its quota ratio (±1 percentage point), each completed cycle's counts
// against the quotas, and how long Low waits at the head of its bucket.
func TestModelSaturatedShares(t *testing.T) {
	for _, q := range modelQuotas() {
		t.Run(fmt.Sprintf("%d/%d/%d", q.High, q.Normal, q.LowGuaranteed), func(t *testing.T) {
			const capacity = 4
			b := mustBuckets(t, [NumLevels]int{capacity, capacity, capacity}, q)
			model := floorModel{quota: q.levels()}
			var next int
			refill := func() {
				for lv := High; lv < NumLevels; lv++ {
					for b.Bucket(lv).Len() < capacity {
						next++
						_ = b.Push(lv, next)
					}
				}
			}
			var total, inCycle [NumLevels]int
			cycleLen := q.High + q.Normal + q.LowGuaranteed
			lastLow := -1
			for i := range modelPicks {
				refill()
				heads := [NumLevels]int{}
				for lv := High; lv < NumLevels; lv++ {
					heads[lv], _ = b.Bucket(lv).Peek()
				}
				want, newCycle := model.next(AllLevels)
				before := b.Picker().Cycle()
				v, from, ok := b.Pop(AllLevels)
				if !ok {
					t.Fatalf("pick %d: Pop() ok = false on saturated buckets", i)
				}
				if v != heads[from] {
					t.Fatalf("pick %d: Pop() = %d from %v, want that bucket's head %d", i, v, from, heads[from])
				}
				if from != want {
					t.Fatalf("pick %d: Pop() from %v, want %v (used %v of %v)", i, from, want, model.used, model.quota)
				}
				if got := b.Picker().Cycle() != before; got != newCycle {
					t.Fatalf("pick %d: new cycle = %t, want %t (used %v of %v)", i, got, newCycle, model.used, model.quota)
				}
				if newCycle {
					if inCycle != model.quota {
						t.Fatalf("cycle %d: picks %v, want exactly the quotas %v", model.cycle, inCycle, model.quota)
					}
					inCycle = [NumLevels]int{}
				}
				model.take(from, newCycle)
				total[from]++
				inCycle[from]++
				if from == Low {
					if others := i - lastLow - 1; lastLow >= 0 && others > q.High+q.Normal {
						t.Fatalf("pick %d: %d other picks since Low's last, want <= High+Normal = %d", i, others, q.High+q.Normal)
					}
					lastLow = i
				}
			}
			for lv, quota := range model.quota {
				share := 100 * float64(total[lv]) / modelPicks
				want := 100 * float64(quota) / float64(cycleLen)
				if math.Abs(share-want) > 1 {
					t.Errorf("share of %v = %.3f%%, want %.3f%% ± 1 pp", Level(lv), share, want)
				}
			}
			if model.cycle < modelPicks/uint64(cycleLen)-1 {
				t.Errorf("completed %d cycles, want about %d", model.cycle, modelPicks/cycleLen)
			}
		})
	}
}

// TestModelRandomReadiness keeps Low non-empty while High and Normal come and go at
// random (seeded), and checks every pick against the model, Low's floor in every
// cycle, Normal's floor in every cycle it was ready throughout, that what the
// floors leave goes to the highest ready level, and Low's wait.
func TestModelRandomReadiness(t *testing.T) {
	for i, q := range modelQuotas() {
		t.Run(fmt.Sprintf("%d/%d/%d", q.High, q.Normal, q.LowGuaranteed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			p := mustPicker(t, q)
			model := floorModel{quota: q.levels()}
			var inCycle [NumLevels]int
			normalThroughout := true
			lastLow := -1
			// Each of High and Normal is ready for runs of random length.
			ready := AllLevels
			for pick := range modelPicks {
				if rng.IntN(16) == 0 {
					ready = 1<<Low | Mask(rng.IntN(4))
				}
				want, newCycle := model.next(ready)
				lv, ok := p.Pick(ready)
				if !ok || lv != want {
					t.Fatalf("pick %d: Pick(%03b) = %v, %t, want %v (used %v of %v, n %d)", pick, ready, lv, ok, want, model.used, model.quota, model.n)
				}
				if newCycle {
					if inCycle[Low] < q.LowGuaranteed {
						t.Fatalf("cycle %d: Low had %d picks while ready throughout, want >= %d", model.cycle, inCycle[Low], q.LowGuaranteed)
					}
					if normalThroughout && inCycle[Normal] < q.Normal {
						t.Fatalf("cycle %d: Normal had %d picks while ready throughout, want >= %d", model.cycle, inCycle[Normal], q.Normal)
					}
					inCycle = [NumLevels]int{}
					normalThroughout = true
				}
				normalThroughout = normalThroughout && ready.Has(Normal)
				model.take(lv, newCycle)
				if lv == Low && ready.Has(Normal) && model.used[Low] > q.LowGuaranteed {
					t.Fatalf("pick %d: Low past its floor while Normal was ready", pick)
				}
				inCycle[lv]++
				if p.Cycle() != model.cycle {
					t.Fatalf("pick %d: Cycle() = %d, want %d", pick, p.Cycle(), model.cycle)
				}
				if lv == Low {
					// A cycle runs on past its length only while Normal, ready late, is
					// owed its floor, and Low is due at the start of every cycle.
					if others, c := pick-lastLow-1, q.High+q.Normal+q.LowGuaranteed; lastLow >= 0 && others > 2*c {
						t.Fatalf("pick %d: %d other picks since Low's last, want <= two cycles (%d)", pick, others, 2*c)
					}
					lastLow = pick
				}
			}
		})
	}
}
