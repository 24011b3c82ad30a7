package promtext

import (
	"cmp"
	"errors"
	"io"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/VictoriaMetrics/metrics"
)

// Errors of [Join]: why a name cannot be had on a shared set.
var (
	// ErrNameRequired: the set holds another writer, and writers sharing a set must
	// all be named.
	ErrNameRequired = errors.New("promtext: the set holds another writer; writers sharing a set must all be named")
	// ErrUnnamedMember: the set holds an unnamed writer.
	ErrUnnamedMember = errors.New("promtext: the set holds an unnamed writer; writers sharing a set must all be named")
	// ErrNameTaken: another writer on the set has the name.
	ErrNameTaken = errors.New("promtext: another writer on the set has this name")
)

// Group is the writers whose series one metrics set writes: its writer, registered
// once on the set, writes them together (with write), so that writers sharing a
// set make one valid page. T is the writer's type; a member's value is its zero
// until [Group.Activate].
type Group[T comparable] struct {
	shared bool // the set was shared: members leave when they stop
	write  func(io.Writer, []T)

	mu      sync.Mutex
	members []member[T] // guarded by mu; sorted by name
}

type member[T comparable] struct {
	name string
	v    T
}

// sharedSets maps each shared set to its group (a *Group of some T). The keys are
// weak, and a group holds only writers that have not left, so neither keeps a set
// alive: a set the program dropped leaves the map.
var sharedSets struct {
	mu sync.Mutex
	m  map[weak.Pointer[metrics.Set]]any
}

// Join takes name on s for a writer being set up: on a set of the writer's own
// (shared false) a group of one; on a shared set the set's group, made and
// registered on first use (with write; every writer of one set must pass the same
// T). It returns [ErrNameRequired], [ErrUnnamedMember] or [ErrNameTaken] when the
// name cannot be had there.
func Join[T comparable](s *metrics.Set, shared bool, name string, write func(io.Writer, []T)) (*Group[T], error) {
	if !shared {
		g := &Group[T]{write: write, members: []member[T]{{name: name}}}
		s.RegisterMetricsWriter(g.writeTo)
		return g, nil
	}
	key := weak.Make(s)
	sharedSets.mu.Lock()
	defer sharedSets.mu.Unlock()
	g, _ := sharedSets.m[key].(*Group[T])
	if g == nil {
		g = &Group[T]{shared: true, write: write}
		if sharedSets.m == nil {
			sharedSets.m = make(map[weak.Pointer[metrics.Set]]any)
		}
		sharedSets.m[key] = g
		s.RegisterMetricsWriter(g.writeTo)
		runtime.AddCleanup(s, func(key weak.Pointer[metrics.Set]) {
			sharedSets.mu.Lock()
			delete(sharedSets.m, key)
			sharedSets.mu.Unlock()
		}, key)
	}
	return g, g.take(name)
}

// take adds name to g, unless a member has it or the set would mix named and
// unnamed writers.
func (g *Group[T]) take(name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		switch {
		case name == "":
			return ErrNameRequired
		case m.name == "":
			return ErrUnnamedMember
		case m.name == name:
			return ErrNameTaken
		}
	}
	i, _ := slices.BinarySearchFunc(g.members, name, func(m member[T], n string) int { return cmp.Compare(m.name, n) })
	g.members = slices.Insert(g.members, i, member[T]{name: name})
	return nil
}

// Activate makes the member named name write v's series.
func (g *Group[T]) Activate(name string, v T) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.members {
		if g.members[i].name == name {
			g.members[i].v = v
		}
	}
}

// Leave gives name up. On a set of the writer's own it does nothing: the set keeps
// writing the writer.
func (g *Group[T]) Leave(name string) {
	if !g.shared {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = slices.DeleteFunc(g.members, func(m member[T]) bool { return m.name == name })
}

// writeTo is the set's metrics writer: it writes the active members, in name order.
func (g *Group[T]) writeTo(w io.Writer) {
	var zero T
	g.mu.Lock()
	vs := make([]T, 0, len(g.members))
	for _, m := range g.members {
		if m.v != zero {
			vs = append(vs, m.v)
		}
	}
	g.mu.Unlock()
	if len(vs) > 0 {
		g.write(w, vs)
	}
}
