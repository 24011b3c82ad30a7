package kernel

// State is where a task is in its life. The zero value is not a valid state.
//
//	Delayed ──▶ Queued ──▶ Running ──▶ Succeeded | Failed | TimedOut | Canceled
//	   ▲          ▲           │
//	   │          └─ Retrying ◀┘ (a failed attempt that will be tried again)
//
// A task of a group whose attempt returned a [RateLimitedError] goes from Running
// back to Queued, at the head of its key's queue; one whose key's breaker is open
// under BreakerConfig.FailFast ends Failed from Queued, with [ErrCircuitOpen].
// Queued, Delayed and Retrying tasks may also end Canceled, Evicted or Abandoned;
// a durable task whose start a [SharedStore] refused ends Abandoned from Running,
// without running.
// Every accepted task reaches exactly one terminal state (see [State.Terminal]).
// A refused submission never becomes a task: its caller gets the error instead.
type State uint8

// The states of a task.
const (
	// Delayed: accepted with a Delay or At in the future, waiting in the timing wheel.
	Delayed State = iota + 1
	// Queued: waiting in its priority's bucket for a slot (a task of a group: or in
	// its key's queue for a permit, see [GroupConfig]).
	Queued
	// Running: handed to an executor; its function runs or is about to.
	Running
	// Retrying: an attempt failed and the next one waits for its backoff.
	Retrying
	// Succeeded: the last attempt returned nil. Terminal.
	Succeeded
	// Failed: the last attempt returned an error (or panicked) and no retry is left. Terminal.
	Failed
	// TimedOut: the last attempt outlived its timeout. Terminal.
	TimedOut
	// Canceled: [Handle.Cancel], its batch's context, or [Kernel.Close] ended it. Terminal.
	Canceled
	// Evicted: a High arrival took its place in a full kernel. Terminal.
	Evicted
	// Abandoned: [Kernel.Shutdown] ended it before it ran (a delayed or retrying task
	// not yet due), or another owner of a [SharedStore] holds the durable task now
	// ([ErrTaskTaken]). Terminal.
	Abandoned
)

var stateNames = [...]string{
	Delayed:   "delayed",
	Queued:    "queued",
	Running:   "running",
	Retrying:  "retrying",
	Succeeded: "succeeded",
	Failed:    "failed",
	TimedOut:  "timed_out",
	Canceled:  "canceled",
	Evicted:   "evicted",
	Abandoned: "abandoned",
}

// String returns the state's lowercase name, as used in metrics and logs.
func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return "state(" + itoa(int(s)) + ")"
}

// Terminal reports whether s is an end state: no transition leaves it.
func (s State) Terminal() bool { return s >= Succeeded && s <= Abandoned }

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

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
