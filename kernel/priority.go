package kernel

// Priority orders tasks between the three buckets. The zero value means [Normal].
type Priority uint8

// The priorities. [High] is picked most, [Low] least but never starved.
const (
	// PriorityDefault is the zero value; the kernel treats it as [Normal].
	PriorityDefault Priority = iota
	// High: urgent work; may use the reserved slots (Config.Reserve) and evict Low.
	High
	// Normal: the default.
	Normal
	// Low: bulk work; guaranteed a minimum share (Config.Quotas.LowGuaranteed).
	Low
)

// String returns "high", "normal" or "low" (the zero value is "normal").
func (p Priority) String() string {
	switch p {
	case High:
		return "high"
	case Normal, PriorityDefault:
		return "normal"
	case Low:
		return "low"
	default:
		return "priority(" + itoa(int(p)) + ")"
	}
}

// Valid reports whether p is one of the defined priorities (or the zero value).
func (p Priority) Valid() bool { return p <= Low }

// normalize maps the zero value to Normal.
func (p Priority) normalize() Priority {
	if p == PriorityDefault {
		return Normal
	}
	return p
}
