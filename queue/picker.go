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

// Quotas sets how a [Picker] shares its picks between the levels (see the package
// documentation). A cycle holds High + Normal + LowGuaranteed picks; while every
// level is ready, each level's share is its quota divided by that sum. Normal and
// LowGuaranteed are floors: a ready level gets them in every cycle. High's quota
// is its share when the others are saturated; what a floor level does not use goes
// to the highest ready level. There is no usable zero value: every field must be
// between [QuotaMin] and [QuotaMax].
type Quotas struct {
	// High is High's share of a cycle while Normal and Low are saturated.
	High int
	// Normal is Normal's floor: the picks it gets in every cycle while it is ready.
	Normal int
	// LowGuaranteed is Low's floor: the picks it gets in every cycle while it is
	// ready.
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

// Picker decides which level is dispatched next, following the rules in the
// package documentation. It only counts: the caller says which levels are ready and
// takes the element itself ([Buckets] does both).
//
// A Picker is not safe for concurrent use. The zero value has no quotas and must not
// be used (Pick panics on it); create pickers with [NewPicker].
type Picker struct {
	quota [NumLevels]int // per level; each in [QuotaMin, QuotaMax]
	used  [NumLevels]int // picks of each level in the current cycle
	n     int            // picks in the current cycle
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
// [Quotas.Validate], and changes nothing, when q is invalid. The current cycle goes
// on with the picks it has counted, under the new quotas.
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

// Cycle returns the number of the current cycle: 0 until the first one ends, then
// one more each time a pick starts a new cycle.
func (p *Picker) Cycle() uint64 { return p.cycle }

// Pick chooses the level whose next element is dispatched now and counts the pick.
// ready is the set of levels that have an element and may be dispatched from; bits
// of invalid levels are ignored. Pick returns false, and counts nothing, when ready
// is empty; otherwise the level it returns is in ready.
//
// A floor level (Normal, Low) that is ready and behind its even spread over the
// cycle takes the pick — Low first when both are; otherwise the highest ready
// level does. A cycle ends once it holds High + Normal + LowGuaranteed picks and no
// ready floor level is owed picks in it. Pick does not allocate.
func (p *Picker) Pick(ready Mask) (Level, bool) {
	l, reset, ok := p.choose(ready&AllLevels, ready&AllLevels, false)
	if ok {
		p.count(l, reset)
	}
	return l, ok
}

// Peek returns the level [Picker.Pick] would choose for ready, and counts
// nothing.
func (p *Picker) Peek(ready Mask) (Level, bool) {
	l, _, ok := p.choose(ready&AllLevels, ready&AllLevels, false)
	return l, ok
}

// PickAhead picks a level of allowed, a subset of the ready levels, for a caller
// that cannot take the level [Picker.Pick] would choose (the kernel, when that
// level's lookahead is full): the level passed over keeps its turn. A floor level
// of allowed that is owed picks takes it as Pick would; any other pick is taken
// only while the cycle has picks left that no ready floor level is owed, so picks
// ahead never take a floor's share. PickAhead returns false, and counts nothing,
// when it may not pick.
func (p *Picker) PickAhead(ready, allowed Mask) (Level, bool) {
	ready &= AllLevels
	l, reset, ok := p.choose(ready, allowed&ready, true)
	if ok {
		p.count(l, reset)
	}
	return l, ok
}

// choose is Pick's decision over ready, restricted to allowed; ahead applies
// PickAhead's rule. reset reports that the pick starts a new cycle.
func (p *Picker) choose(ready, allowed Mask, ahead bool) (l Level, reset, ok bool) {
	if allowed == 0 {
		return 0, false, false
	}
	c := p.quota[High] + p.quota[Normal] + p.quota[Low]
	if c == 0 {
		panic("queue: Picker used without NewPicker")
	}
	used, n := p.used, p.n
	// A cycle that owes a ready floor nothing ends once full; one that does may run
	// over by up to another cycle's length while the floor waits for room.
	if (n >= c && !owes(&p.quota, &used, ready)) || n >= 2*c {
		used, n, reset = [NumLevels]int{}, 0, true
	}
	// The operands are at most 2^30 (quotas, used) and 2c <= 6·2^30: the products
	// fit in an int64.
	for _, f := range [...]Level{Low, Normal} {
		if allowed.Has(f) && used[f] < p.quota[f] && int64(used[f])*int64(c) < int64(p.quota[f])*int64(n+1) {
			return f, reset, true
		}
	}
	if ahead {
		owed := 0
		for _, f := range [...]Level{Normal, Low} {
			if ready.Has(f) {
				owed += max(p.quota[f]-used[f], 0)
			}
		}
		if n+owed >= c {
			return 0, false, false
		}
	}
	for l := High; l < NumLevels; l++ {
		if allowed.Has(l) {
			return l, reset, true
		}
	}
	return 0, false, false
}

// owes reports whether a ready floor level (Normal, Low) has had fewer picks than
// its quota.
func owes(quota, used *[NumLevels]int, ready Mask) bool {
	return (ready.Has(Normal) && used[Normal] < quota[Normal]) || (ready.Has(Low) && used[Low] < quota[Low])
}

// count records a pick of l, starting a new cycle first when reset.
func (p *Picker) count(l Level, reset bool) {
	if reset {
		p.used, p.n = [NumLevels]int{}, 0
		p.cycle++
	}
	p.used[l]++
	p.n++
}
