package kernel

// transitions is the one table of legal state changes; the loop checks every
// change against it (a failed check is a kernel bug and panics in tests).
var transitions = [...][]State{
	Delayed:  {Queued, Canceled, Abandoned},
	Queued:   {Running, Canceled, Evicted, Abandoned, Failed},
	Running:  {Succeeded, Failed, TimedOut, Canceled, Retrying, Abandoned, Queued},
	Retrying: {Queued, Canceled, Abandoned},
}

// canTransition reports whether from → to is in the transition table.
func canTransition(from, to State) bool {
	if int(from) >= len(transitions) {
		return false
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}
