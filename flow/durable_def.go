package flow

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
)

// Defaults and limits of a durable flow.
const (
	pollDefault      = time.Second
	retentionDefault = 7 * 24 * time.Hour
	// keyPrefix starts every unique key of a durable run's tasks.
	keyPrefix = "axflow/"
	// runIDLen is the length of a run ID: 11 hex digits of unix ms, 8 random.
	runIDLen = 19
	// shardSuffixMax is the longest "#<index>" of a shard's key.
	shardSuffixMax = 8
	// stageNameMax bounds a durable stage's name, so that its shards' keys fit
	// store.UniqueKeyMax.
	stageNameMax = store.UniqueKeyMax - len(keyPrefix) - runIDLen - 1 - shardSuffixMax
	// headAhead is how far ahead a run's head is parked: it is made due when the
	// run ended (Kernel.RunNow), never by its time.
	headAhead = 10 * 365 * 24 * time.Hour
	// watchMax bounds the interval at which the confirmer reads back the tasks
	// that ended in memory until the store shows their ends (a group commit's
	// latency).
	watchMax = 20 * time.Millisecond
	// headAttempts bounds the head's checks of the run's end: each one that finds
	// the run still going is retried.
	headAttempts = 1 << 30
)

// durable is a flow registered with a kernel and a store: the definition, the
// kinds of its tasks, and the reconciler that carries its runs forward.
type durable struct {
	// Immutable after register.
	k         *kernel.Kernel
	kr        store.KeyReader
	tl        store.TaskLister
	shared    bool
	f         *Flow
	index     map[string]int
	next      [][]int // the stages that depend on each stage
	prev      [][]int // the stages each stage depends on
	ups       [][]int // the stages each stage depends on, directly or not
	topo      []int   // the stages in an order where each follows its dependencies
	poll      time.Duration
	retention time.Duration
	pool      bool
	headKind  string
	markKind  string   // the cancel markers' kind
	kinds     []string // by stage
	stop      chan struct{}
	stopOnce  sync.Once
	ctx       context.Context // the reconciler's and watchers': ends at Close or when the kernel stops
	wg        sync.WaitGroup

	mu   sync.Mutex
	todo map[string]bool // guarded by mu: runs to advance at the next pass
	wake chan struct{}   // size 1: a run was added to todo
	// ended holds the keys of the tasks this process watches that ended in
	// memory, with their runs, until the store shows their ends; guarded by mu.
	ended   map[string]string
	endWake chan struct{} // size 1: a key was added to ended
	pass    chan struct{} // guarded by mu: closed when the next pass ended

	done doneCache // the succeeded stages and shards of live runs
}

// durIn is what a durable stage's Inputs read.
type durIn struct {
	run     string
	flow    string
	input   []byte
	results map[string][]byte // the stages it depends on, directly or not, by name
}

// headPayload is the payload of a run's head task, stored as one byte of
// policy, the run's ID and the input as it is, so that the input may take the
// store's whole payload cap but runIDLen+1 bytes.
type headPayload struct {
	Run    string
	Input  []byte
	Policy Policy
}

func (h headPayload) encode() []byte {
	b := make([]byte, 0, 1+len(h.Run)+len(h.Input))
	b = append(b, byte(h.Policy))
	b = append(b, h.Run...)
	return append(b, h.Input...)
}

func decodeHead(b []byte) (headPayload, error) {
	if len(b) < 1+runIDLen || Policy(b[0]) > ContinueIndependent {
		return headPayload{}, fmt.Errorf("flow: a run's head payload of %d bytes: not one", len(b))
	}
	return headPayload{Policy: Policy(b[0]), Run: string(b[1 : 1+runIDLen]), Input: b[1+runIDLen:]}, nil
}

// taskPayload is the payload of a stage's task: its run or count (Shard -1),
// or a shard; Refused, when set, is the kernel's refusal of the stage's task,
// which the task fails with.
type taskPayload struct {
	Run     string `json:"r"`
	Stage   string `json:"s"`
	Shard   int    `json:"i"`
	Total   int    `json:"n,omitempty"`
	Refused string `json:"x,omitempty"`
}

func headKey(run string) string         { return keyPrefix + run }
func markKey(run string) string         { return keyPrefix + run + "#cancel" }
func stageKey(run, stage string) string { return keyPrefix + run + "/" + stage }
func shardKey(run, stage string, i int) string {
	return stageKey(run, stage) + "#" + strconv.Itoa(i)
}

// newRunID returns a run ID: the time in unix ms (11 hex digits, so that IDs
// sort by their start) and 8 random hex digits.
func newRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%011x", now.UnixMilli()&(1<<44-1)) + hex.EncodeToString(b[:])
}

func register(k *kernel.Kernel, st store.Store, f *Flow, opts *DurableOptions) (*Durable, error) {
	switch {
	case k == nil:
		return nil, errors.New("flow: Register: nil kernel")
	case st == nil:
		return nil, errors.New("flow: Register: nil store")
	case f == nil:
		return nil, errors.New("flow: Register: nil flow")
	}
	var o DurableOptions
	if opts != nil {
		o = *opts
	}
	var errs []error
	if o.Poll < 0 {
		errs = append(errs, &kernel.ConfigError{Field: "flow.DurableOptions.Poll", Value: o.Poll, Reason: "must be >= 0"})
	}
	if o.Retention < 0 {
		errs = append(errs, &kernel.ConfigError{Field: "flow.DurableOptions.Retention", Value: o.Retention, Reason: "must be >= 0"})
	}
	kr, okK := st.(store.KeyReader)
	tl, okL := st.(store.TaskLister)
	if !okK || !okL {
		errs = append(errs, fmt.Errorf("flow %q: Register: the store (%T) must implement store.KeyReader and store.TaskLister to keep durable runs", f.name, st))
	}
	_, shared := st.(store.SharedStore)
	if o.Pool && !shared {
		errs = append(errs, &kernel.ConfigError{Field: "flow.DurableOptions.Pool", Value: true, Reason: "needs a store.SharedStore"})
	}
	next, err := f.graph()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d := &durable{
		k: k, kr: kr, tl: tl, shared: shared,
		f:         &Flow{name: f.name, stages: append([]stageDef(nil), f.stages...)},
		index:     make(map[string]int, len(f.stages)),
		next:      next,
		prev:      make([][]int, len(f.stages)),
		poll:      cmp.Or(o.Poll, pollDefault),
		retention: cmp.Or(o.Retention, retentionDefault),
		pool:      o.Pool,
		headKind:  "axflow.run/" + f.name,
		markKind:  "axflow.cancel/" + f.name,
		stop:      make(chan struct{}),
		todo:      make(map[string]bool),
		wake:      make(chan struct{}, 1),
		ended:     make(map[string]string),
		endWake:   make(chan struct{}, 1),
		pass:      make(chan struct{}),
	}
	for i, s := range d.f.stages {
		d.index[s.name] = i
		switch {
		case len(s.name) > stageNameMax:
			errs = append(errs, &DefError{Flow: f.name, Stage: s.name, Err: fmt.Errorf("flow: a durable stage's name has at most %d bytes (its tasks' unique keys fit store.UniqueKeyMax)", stageNameMax)})
		case strings.Contains(s.name, "#"):
			errs = append(errs, &DefError{Flow: f.name, Stage: s.name, Err: errors.New("flow: a durable stage's name must not contain '#' (it separates a shard's index in its key)")})
		}
		kind := "axflow.stage/" + f.name + "/" + s.name
		if len(kind) > store.KindMax {
			errs = append(errs, &DefError{Flow: f.name, Stage: s.name, Err: fmt.Errorf("flow: kind %q of the stage's tasks is longer than %d bytes (store.KindMax)", kind, store.KindMax)})
		}
		d.kinds = append(d.kinds, kind)
	}
	if len(d.markKind) > store.KindMax {
		errs = append(errs, &DefError{Flow: f.name, Err: fmt.Errorf("flow: the flow's name makes kinds longer than %d bytes (store.KindMax)", store.KindMax)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for s, ns := range next {
		for _, i := range ns {
			d.prev[i] = append(d.prev[i], s)
		}
	}
	d.topo = topoOrder(d.prev, next)
	d.ups = make([][]int, len(d.prev))
	for _, i := range d.topo { // each stage's dependencies come first
		seen := make(map[int]bool)
		for _, p := range d.prev[i] {
			for _, u := range append([]int{p}, d.ups[p]...) {
				if !seen[u] {
					seen[u] = true
					d.ups[i] = append(d.ups[i], u)
				}
			}
		}
	}
	if err := k.Register(d.headKind, d.runHead); err != nil {
		return nil, fmt.Errorf("flow %q: Register: %w", f.name, err)
	}
	if err := k.Register(d.markKind, func(context.Context, []byte) error { return nil }); err != nil {
		return nil, fmt.Errorf("flow %q: Register: %w", f.name, err)
	}
	for i, kind := range d.kinds {
		if err := k.Register(kind, func(ctx context.Context, p []byte) error { return d.runTask(ctx, i, p) }); err != nil {
			return nil, fmt.Errorf("flow %q: Register: %w", f.name, err)
		}
	}
	var cancel context.CancelFunc
	d.ctx, cancel = context.WithCancel(context.Background())
	d.wg.Add(3)
	go func() {
		defer d.wg.Done()
		select {
		case <-d.stop:
		case <-k.Stopping():
		}
		cancel()
	}()
	go d.reconcile()
	go d.confirm()
	return &Durable{d: d}, nil
}

// topoOrder returns the stages in an order where every stage follows those it
// depends on (Kahn's algorithm; the graph has no cycle).
func topoOrder(prev, next [][]int) []int {
	left := make([]int, len(prev))
	var order, ready []int
	for i := range prev {
		left[i] = len(prev[i])
		if left[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, n := range next[i] {
			if left[n]--; left[n] == 0 {
				ready = append(ready, n)
			}
		}
	}
	return order
}

// start stores the head of a new run.
func (d *durable) start(ctx context.Context, input []byte, opts *Options) (string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.OnFailure > ContinueIndependent {
		return "", &kernel.ConfigError{Field: "flow.Options.OnFailure", Value: o.OnFailure, Reason: "must be FailFast or ContinueIndependent"}
	}
	now := d.k.Clock().Now()
	run := newRunID(now)
	p := headPayload{Run: run, Input: input, Policy: o.OnFailure}.encode()
	_, err := d.k.SubmitDurable(ctx, kernel.DurableTask{
		Kind:        d.headKind,
		Payload:     p,
		At:          now.Add(headAhead),
		MaxAttempts: headAttempts,
		UniqueKey:   headKey(run),
		UniqueFor:   d.retention,
		Pool:        d.shared,
	})
	if err != nil {
		return "", fmt.Errorf("flow %q: Start: %w", d.f.name, err)
	}
	d.poke(run)
	return run, nil
}
