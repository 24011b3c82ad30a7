package kernel

import (
	"github.com/axsched/ax/internal/breaker"
	"github.com/axsched/ax/internal/rate"
	"github.com/axsched/ax/kernel/internal/fifo"
	"github.com/axsched/ax/kernel/internal/metricfam"
	"github.com/axsched/ax/queue"
	"github.com/axsched/ax/timewheel"
)

// The gate's loop-owned state (gate.go): every group's, every key's, and the
// gate's wheel entries.

// gateState is the loop's gate: every group's state, the wheel entries of keys and
// groups, and what Pause holds.
type gateState struct {
	groups map[string]*groupState
	slots  []gateSlot // targets of gate wheel entries, by lazyTask.meta
	free   []uint64   // free slots

	pausedLevels queue.Mask
	pausedKinds  map[string]bool
	held         map[string][]*Handle // durable tasks of paused kinds, in order
	heldN        int
	seq          uint64 // the order of the last task that came to a key's queue (taskExt.order)
	// startWaits counts the keys and groups whose rates wait for a permit's task to
	// start (waitsStart): executors then poke the parked loop on such a start.
	startWaits int
}

// gateSlot is the target of a gate wheel entry.
type gateSlot struct {
	ks   *keyState   // a key's wake-up
	g    *groupState // a group's total-rate wake-up (ks nil) or sweep (sweep)
	kind uint8
}

const (
	slotKey uint8 = iota + 1
	slotTotal
	slotSweep
)

// groupState is one group's loop state.
type groupState struct {
	name    string
	def     *groupDef // the config in force
	keys    map[string]*keyState
	running int // permits held
	waiting int // tasks in key queues
	total   rate.Bucket
	// unstarted counts the permits under a rate whose tasks have not started
	// (attempt.unstarted): while one waits, the rate grants no other permit.
	unstarted  int
	waitsStart bool                  // a ready key waits for such a start (gateState.startWaits)
	ready      fifo.Queue[*keyState] // keys that may start but for the total limits
	paused     bool

	totalTimer timer
	sweepTimer timer
	idle       fifo.Queue[*keyState] // keys that went idle, to forget after KeyIdle

	throttled, pausedKeys, openBreakers int
	pub                                 *metricfam.Group
}

// keyState is one key's loop state.
type keyState struct {
	g          *groupState
	key        string
	q          [queue.NumLevels]fifo.Queue[*Handle]
	n          int // tasks in q
	running    int // permits held
	rate       rate.Bucket
	unstarted  int              // as groupState.unstarted, for the key's rate
	waitsStart bool             // its next task waits for such a start (gateState.startWaits)
	holdUntil  int64            // mono: a RateLimitedError paused the key until then
	brUntil    int64            // mono: the breaker refused until then (0: not parked on time)
	brProbe    bool             // the breaker refused until a probe's outcome
	br         *breaker.Breaker // nil without GroupConfig.Breaker
	brState    BreakerState     // br's state as last reported (breakerMoved)
	paused     bool
	inReady    bool
	inIdle     bool
	lastUsed   int64 // mono
	timer      timer
	owner      *Handle // Ordered: the task that holds the key until it ends (gate_order.go)
}

// timer is a gate wheel entry.
type timer struct {
	h    timewheel.Handle[timerEntry]
	at   int64 // mono; meaningful while slot > 0
	slot uint64
}
