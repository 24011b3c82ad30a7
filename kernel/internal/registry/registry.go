package registry

import (
	"slices"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// Registry is the kinds, live unique keys and held tasks of one kernel's durable
// side. F is the type of a kind's function. Safe for concurrent use; make one with
// [New].
type Registry[F any] struct {
	mu    sync.Mutex
	kinds map[string]F                  // guarded by mu
	keys  map[string]string             // guarded by mu: unique keys of live durable tasks → their IDs
	held  map[string][]store.StoredTask // guarded by mu: stored tasks by kind, waiting for Register
	// heldGroups holds, by group, stored tasks of a registered kind whose group is
	// not configured, waiting for an Update that adds it. Guarded by mu.
	heldGroups map[string][]store.StoredTask
}

// New returns an empty registry.
func New[F any]() *Registry[F] {
	return &Registry[F]{
		kinds: make(map[string]F),
		keys:  make(map[string]string),
		held:  make(map[string][]store.StoredTask),
	}
}

// Batch is stored tasks of one registered kind, with its function.
type Batch[F any] struct {
	Fn    F
	Tasks []store.StoredTask
}

// Register names fn as the function of kind and returns the tasks held for kind,
// now no longer held. It reports false, changing nothing, when kind has a
// function already.
func (r *Registry[F]) Register(kind string, fn F) ([]store.StoredTask, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.kinds[kind]; ok {
		return nil, false
	}
	r.kinds[kind] = fn
	held := r.held[kind]
	delete(r.held, kind)
	return held, true
}

// Func returns the function of kind, and whether kind is registered.
func (r *Registry[F]) Func(kind string) (F, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn, ok := r.kinds[kind]
	return fn, ok
}

// Kinds returns the registered kinds, in no order.
func (r *Registry[F]) Kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	kinds := make([]string, 0, len(r.kinds))
	for kind := range r.kinds {
		kinds = append(kinds, kind)
	}
	return kinds
}

// Sort takes in stored tasks that are live again (read back or rescued): it marks
// their unique keys live, holds those of kinds not registered yet until their
// Register, and returns the others by kind.
func (r *Registry[F]) Sort(ts []store.StoredTask) []Batch[F] {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Batch[F]
	byKind := make(map[string]int)
	for _, t := range ts {
		if t.UniqueKey != "" {
			r.keys[t.UniqueKey] = t.ID
		}
		fn, ok := r.kinds[t.Kind]
		if !ok {
			r.held[t.Kind] = append(r.held[t.Kind], t)
			continue
		}
		i, ok := byKind[t.Kind]
		if !ok {
			i = len(out)
			byKind[t.Kind] = i
			out = append(out, Batch[F]{Fn: fn})
		}
		out[i].Tasks = append(out[i].Tasks, t)
	}
	return out
}

// Claimed takes in a stored task that starts here (a claim took it): it marks its
// unique key live and returns its kind's function, the zero F when the kind is not
// registered.
func (r *Registry[F]) Claimed(t *store.StoredTask) F {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.UniqueKey != "" {
		r.keys[t.UniqueKey] = t.ID
	}
	return r.kinds[t.Kind]
}

// TakeKeys marks the unique keys of a batch of new tasks live, all in one step:
// keys[i] is the key of task i ("" for none), ids[i], when given, its ID (see
// [Registry.Holder]). It returns the keys it took, and the indexes of the tasks
// whose key is live already or stands earlier in keys: they take none.
func (r *Registry[F]) TakeKeys(keys []string, ids ...string) (taken []string, dup []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, key := range keys {
		if key == "" {
			continue
		}
		if _, ok := r.keys[key]; ok {
			dup = append(dup, i)
			continue
		}
		r.keys[key] = ""
		if i < len(ids) {
			r.keys[key] = ids[i]
		}
		taken = append(taken, key)
	}
	return taken, dup
}

// Holder returns the ID of the live task holding key, "" if none (or unknown).
func (r *Registry[F]) Holder(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key]
}

// DropKeys frees unique keys of durable tasks that are no longer live; "" is
// skipped.
func (r *Registry[F]) DropKeys(keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range keys {
		delete(r.keys, key)
	}
}

// HoldGroupless takes out of tasks those whose group is not among the groups
// that groups returns, holds them by group until [Registry.ReleaseGroups] finds
// their group, and calls warn for each. It returns the others, with the groups it
// checked them against (the others' groups are all there). groups is called, and
// the check and the hold are made, under the registry's mutex, which
// ReleaseGroups takes too: once a new set of groups is in force and released, no
// task is held for a group in it.
func HoldGroupless[F, G any](r *Registry[F], tasks []store.StoredTask, groups func() map[string]G, warn func(*store.StoredTask)) ([]store.StoredTask, map[string]G) {
	var keep []store.StoredTask
	r.mu.Lock()
	defer r.mu.Unlock()
	gs := groups()
	for i, t := range tasks {
		if _, ok := gs[t.Group]; t.Group == "" || ok {
			if keep != nil {
				keep = append(keep, t)
			}
			continue
		}
		if keep == nil {
			keep = append(make([]store.StoredTask, 0, len(tasks)), tasks[:i]...)
		}
		if r.heldGroups == nil {
			r.heldGroups = make(map[string][]store.StoredTask)
		}
		r.heldGroups[t.Group] = append(r.heldGroups[t.Group], t)
		warn(&tasks[i])
	}
	if keep == nil {
		return tasks, gs
	}
	return keep, gs
}

// ReleaseGroups returns the held tasks of the groups has reports, no longer held.
func (r *Registry[F]) ReleaseGroups(has func(group string) bool) []store.StoredTask {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ts []store.StoredTask
	for g, held := range r.heldGroups {
		if has(g) {
			ts = append(ts, held...)
			delete(r.heldGroups, g)
		}
	}
	return ts
}

// Held returns how many tasks are held, for their kind or their group.
func (r *Registry[F]) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range []map[string][]store.StoredTask{r.held, r.heldGroups} {
		for _, ts := range m {
			n += len(ts)
		}
	}
	return n
}

// TakeHeld removes the held task id and frees its unique key. It reports false
// when no task id is held.
func (r *Registry[F]) TakeHeld(id string) (store.StoredTask, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, name, i := r.findHeld(id)
	if m == nil {
		return store.StoredTask{}, false
	}
	t := m[name][i]
	if ts := slices.Delete(m[name], i, i+1); len(ts) == 0 {
		delete(m, name)
	} else {
		m[name] = ts
	}
	delete(r.keys, t.UniqueKey)
	return t, true
}

// RunHeldNow makes the held task id due at once (a zero RunAt) for when it is
// scheduled. It reports false when no task id is held.
func (r *Registry[F]) RunHeldNow(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, name, i := r.findHeld(id)
	if m != nil {
		m[name][i].RunAt = time.Time{}
	}
	return m != nil
}

// findHeld returns where the task id is held: the map, the name (kind or group)
// and the index, or a nil map when it is held nowhere. r.mu is held.
func (r *Registry[F]) findHeld(id string) (map[string][]store.StoredTask, string, int) {
	for _, m := range []map[string][]store.StoredTask{r.held, r.heldGroups} {
		for name, ts := range m {
			if i := slices.IndexFunc(ts, func(t store.StoredTask) bool { return t.ID == id }); i >= 0 {
				return m, name, i
			}
		}
	}
	return nil, "", -1
}
