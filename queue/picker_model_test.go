package queue

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// modelPicks is the number of picks of each model run.
const modelPicks = 100_000

// cycleModel is a straightforward counter model of the cycle rules: it knows which
// levels may take the next pick, but not the picker's order within a cycle.
type cycleModel struct {
	quota [NumLevels]int
	used  [NumLevels]int
	cycle uint64
}

// allowed returns the levels the next pick may go to, given the ready levels, and
// whether that pick starts a new cycle.
func (m *cycleModel) allowed(ready Mask) (Mask, bool) {
	var credit Mask
	for lv := High; lv < NumLevels; lv++ {
		if ready.Has(lv) && m.used[lv] < m.quota[lv] {
			credit |= 1 << lv
		}
	}
	if credit != 0 {
		return credit, false
	}
	return ready & AllLevels, true
}

// take records a pick of lv, starting a new cycle first when refill is true.
func (m *cycleModel) take(lv Level, refill bool) {
	if refill {
		m.used = [NumLevels]int{}
		m.cycle++
	}
	m.used[lv]++
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
			model := cycleModel{quota: q.levels()}
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
				credit, newCycle := model.allowed(AllLevels)
				before := b.Picker().Cycle()
				v, from, ok := b.Pop(AllLevels)
				if !ok {
					t.Fatalf("pick %d: Pop() ok = false on saturated buckets", i)
				}
				if v != heads[from] {
					t.Fatalf("pick %d: Pop() = %d from %v, want that bucket's head %d", i, v, from, heads[from])
				}
				if !credit.Has(from) {
					t.Fatalf("pick %d: Pop() from %v, want one of %03b (used %v of %v)", i, from, credit, model.used, model.quota)
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
// random (seeded), and checks every pick against the counter model: caps per cycle,
// work conservation, Low's guaranteed picks in every cycle, and Low's wait.
func TestModelRandomReadiness(t *testing.T) {
	for i, q := range modelQuotas() {
		t.Run(fmt.Sprintf("%d/%d/%d", q.High, q.Normal, q.LowGuaranteed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			p := mustPicker(t, q)
			model := cycleModel{quota: q.levels()}
			var inCycle [NumLevels]int
			lastLow := -1
			// Each of High and Normal is ready for runs of random length.
			ready := AllLevels
			for pick := range modelPicks {
				if rng.IntN(16) == 0 {
					ready = 1<<Low | Mask(rng.IntN(4))
				}
				credit, newCycle := model.allowed(ready)
				lv, ok := p.Pick(ready)
				if !ok || !credit.Has(lv) {
					t.Fatalf("pick %d: Pick(%03b) = %v, %t, want one of %03b (used %v of %v)", pick, ready, lv, ok, credit, model.used, model.quota)
				}
				if newCycle {
					if inCycle[Low] != q.LowGuaranteed {
						t.Fatalf("cycle %d: Low had %d picks while ready throughout, want %d", model.cycle, inCycle[Low], q.LowGuaranteed)
					}
					if inCycle[High] > q.High || inCycle[Normal] > q.Normal {
						t.Fatalf("cycle %d: picks %v exceed quotas %v", model.cycle, inCycle, model.quota)
					}
					inCycle = [NumLevels]int{}
				}
				model.take(lv, newCycle)
				inCycle[lv]++
				if p.Cycle() != model.cycle {
					t.Fatalf("pick %d: Cycle() = %d, want %d", pick, p.Cycle(), model.cycle)
				}
				if lv == Low {
					if others := pick - lastLow - 1; lastLow >= 0 && others > q.High+q.Normal {
						t.Fatalf("pick %d: %d other picks since Low's last, want <= High+Normal = %d", pick, others, q.High+q.Normal)
					}
					lastLow = pick
				}
			}
		})
	}
}
