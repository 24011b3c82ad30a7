package queue

import (
	"errors"
	"strconv"
)

// Limits of every [Quotas] field. QuotaMax bounds the length of a cycle and keeps the
// picker's arithmetic exact.
const (
	QuotaMin = 1
	QuotaMax = 1 << 30
)

// Quotas sets how a [Picker] shares its picks between the levels within one cycle
// (see the package documentation). With every level ready, a cycle holds exactly
// High + Normal + LowGuaranteed picks, so each level's share of the picks is its
// quota divided by that sum. There is no usable zero value: every field must be
// between [QuotaMin] and [QuotaMax].
type Quotas struct {
	// High is the most picks High gets in a cycle.
	High int
	// Normal is the most picks Normal gets in a cycle.
	Normal int
	// LowGuaranteed is the number of picks Low gets in a cycle: a cycle does not end
	// while Low is ready and has had fewer. Low gets no more in one cycle, but a
	// lone ready Low gets every pick, cycle after cycle.
	LowGuaranteed int
}

// Validate returns nil when every field is between [QuotaMin] and [QuotaMax].
// Otherwise it returns one [*QuotaError] per bad field, combined with [errors.Join],
// e.g. "queue: Quotas.High = 0: must be >= 1".
func (q Quotas) Validate() error {
	var errs []error
	check := func(field string, v int) {
		switch {
		case v < QuotaMin:
			errs = append(errs, &QuotaError{Field: field, Value: v, Reason: "must be >= " + strconv.Itoa(QuotaMin)})
		case v > QuotaMax:
			errs = append(errs, &QuotaError{Field: field, Value: v, Reason: "must be <= " + strconv.Itoa(QuotaMax)})
		}
	}
	check("High", q.High)
	check("Normal", q.Normal)
	check("LowGuaranteed", q.LowGuaranteed)
	return errors.Join(errs...)
}

// levels returns q indexed by level.
func (q Quotas) levels() [NumLevels]int {
	return [NumLevels]int{High: q.High, Normal: q.Normal, Low: q.LowGuaranteed}
}

// Picker decides which level is dispatched next, following the cycle rules in the
// package documentation. It only counts: the caller says which levels are ready and
// takes the element itself ([Buckets] does both).
//
// A Picker is not safe for concurrent use. The zero value has no quotas and must not
// be used (Pick panics on it); create pickers with [NewPicker].
type Picker struct {
	quota [NumLevels]int // per level; each in [QuotaMin, QuotaMax]
	used  [NumLevels]int // picks of each level in the current cycle
	cycle uint64         // number of the current cycle, from 0
}

// NewPicker returns a picker with quotas q, at the start of cycle 0. It returns the
// error of [Quotas.Validate] when q is invalid.
func NewPicker(q Quotas) (*Picker, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return &Picker{quota: q.levels()}, nil
}

// SetQuotas replaces the quotas from the next pick on. It returns the error of
// [Quotas.Validate], and changes nothing, when q is invalid.
//
// The current cycle goes on with the picks it has already counted: a level that has
// had at least its new quota in this cycle has no credit left until the next cycle.
// Setting the same quotas again changes nothing.
func (p *Picker) SetQuotas(q Quotas) error {
	if err := q.Validate(); err != nil {
		return err
	}
	p.quota = q.levels()
	return nil
}

// Quotas returns the current quotas.
func (p *Picker) Quotas() Quotas {
	return Quotas{High: p.quota[High], Normal: p.quota[Normal], LowGuaranteed: p.quota[Low]}
}

// Cycle returns the number of the current cycle: 0 until the first refill, then one
// more each time a pick starts a new cycle.
func (p *Picker) Cycle() uint64 { return p.cycle }

// Pick chooses the level whose next element is dispatched now and counts the pick
// against that level's credit. ready is the set of levels that have an element and
// may be dispatched from; bits of invalid levels are ignored. Pick returns false,
// and counts nothing, when ready is empty; otherwise the level it returns is in
// ready.
//
// Among the ready levels with credit left in the current cycle, Pick returns the one
// that has used the smallest fraction of its quota (used/quota). A tie goes to Low,
// else to High. When no ready level has credit left, a new cycle starts with every
// credit refilled. Pick does not allocate.
//
// So the picks of each level are spread evenly over a cycle, and a cycle starts with
// Low when Low is ready. While Low stays ready and the quotas do not change, at most
// Quotas.High + Quotas.Normal picks go to other levels between two picks of Low.
func (p *Picker) Pick(ready Mask) (Level, bool) {
	ready &= AllLevels
	if ready == 0 {
		return 0, false
	}
	l, ok := p.best(ready)
	if !ok {
		p.used = [NumLevels]int{}
		p.cycle++
		if l, ok = p.best(ready); !ok {
			panic("queue: Picker used without NewPicker")
		}
	}
	p.used[l]++
	return l, true
}

// Peek returns the level [Picker.Pick] would choose for ready, and counts
// nothing.
func (p *Picker) Peek(ready Mask) (Level, bool) {
	ready &= AllLevels
	if ready == 0 {
		return 0, false
	}
	if l, ok := p.best(ready); ok {
		return l, true
	}
	used := p.used
	p.used = [NumLevels]int{} // as after the refill Pick would make
	l, ok := p.best(ready)
	p.used = used
	return l, ok
}

// PickInCycle is [Picker.Pick] that never starts a new cycle: it returns false,
// and counts nothing, when no level of ready has credit left in the current one.
// A caller that may not take the level Pick would choose uses it to take another
// without letting that level lose its turn: the cycle cannot end until the level
// passed over had its picks or stopped being ready.
func (p *Picker) PickInCycle(ready Mask) (Level, bool) {
	l, ok := p.best(ready & AllLevels)
	if ok {
		p.used[l]++
	}
	return l, ok
}

// best returns the ready level with credit left whose used/quota is the smallest;
// false when no ready level has credit. A tie goes to Low, which bounds Low's wait
// (see [Picker.Pick]), else to High.
func (p *Picker) best(ready Mask) (Level, bool) {
	// Candidates in tie order (Low, High, Normal); a later one wins only when
	// used/quota is strictly smaller, compared without division. The operands are at
	// most QuotaMax = 2^30, so the products fit in an int64.
	var (
		best   Level
		found  bool
		bu, bq int64 // used and quota of best
	)
	if ready&(1<<Low) != 0 && p.used[Low] < p.quota[Low] {
		best, found, bu, bq = Low, true, int64(p.used[Low]), int64(p.quota[Low])
	}
	if ready&(1<<High) != 0 && p.used[High] < p.quota[High] {
		u, q := int64(p.used[High]), int64(p.quota[High])
		if !found || u*bq < bu*q {
			best, found, bu, bq = High, true, u, q
		}
	}
	if ready&(1<<Normal) != 0 && p.used[Normal] < p.quota[Normal] {
		u, q := int64(p.used[Normal]), int64(p.quota[Normal])
		if !found || u*bq < bu*q {
			best, found = Normal, true
		}
	}
	return best, found
}
