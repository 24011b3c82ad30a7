package queue

import "strconv"

// Level is the priority level of a bucket. High is picked most often, Low least but
// never starved (see [Quotas]).
type Level uint8

// The levels, from most to least urgent.
const (
	// High is for urgent work; it takes every pick the floors leave.
	High Level = iota
	// Normal is for ordinary work; it gets at least [Quotas.Normal] picks per cycle
	// while it is ready, and what High leaves.
	Normal
	// Low is for bulk work; it gets at least [Quotas.LowGuaranteed] picks per cycle
	// while it is ready, and what the others leave.
	Low
)

// NumLevels is the number of levels; valid levels l satisfy l < NumLevels.
const NumLevels = 3

var levelNames = [NumLevels]string{High: "high", Normal: "normal", Low: "low"}

// String returns "high", "normal" or "low", and "level(N)" for an invalid level.
func (l Level) String() string {
	if l < NumLevels {
		return levelNames[l]
	}
	return "level(" + strconv.Itoa(int(l)) + ")"
}

// Mask is a set of levels: bit 1<<l is set when level l is in the set. The zero value
// is the empty set. Bits above the valid levels are ignored.
type Mask uint8

// AllLevels is the set of every level.
const AllLevels Mask = 1<<High | 1<<Normal | 1<<Low

// MaskOf returns the set of the given levels. Invalid levels are ignored.
func MaskOf(levels ...Level) Mask {
	var m Mask
	for _, l := range levels {
		if l < NumLevels {
			m |= 1 << l
		}
	}
	return m
}

// Has reports whether l is in m.
func (m Mask) Has(l Level) bool { return l < NumLevels && m&(1<<l) != 0 }
