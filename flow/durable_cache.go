package flow

import (
	"sync"

	"github.com/axsched/ax/store"
)

// doneCacheMax is how many stored tasks a doneCache holds at most: past it, it
// starts again empty.
const doneCacheMax = 1 << 14

// doneCache holds what cannot change while a run lasts: the stored tasks of its
// stages and shards whose success the store showed, by their keys (the key
// refuses another task, and the run is read only while its head is kept), and
// its head's payload. So the reconciler and the stage tasks read from the store
// only the tasks that have not succeeded yet (a sharded stage's shards are read
// back once each, not at every pass), and a stage task reads the run's input
// once per process. Heads and cancel markers themselves are not held. Safe for
// concurrent use; what it holds is shared and read-only.
type doneCache struct {
	mu    sync.Mutex
	runs  map[string]map[string]*store.StoredTask // run -> key -> task
	heads map[string]headPayload                  // run -> its head's payload
	count int
}

// get returns the succeeded task of run that keeps key, if the cache holds it.
func (c *doneCache) get(run, key string) (*store.StoredTask, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.runs[run][key]
	return t, ok
}

// put holds t, the stored task of run that keeps key, when it succeeded and key
// is a stage's or a shard's.
func (c *doneCache) put(run, key string, t *store.StoredTask) {
	if run == "" || t.State != store.Succeeded || t.UniqueKey != key || key == headKey(run) || key == markKey(run) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.room()
	m := c.runs[run]
	if m == nil {
		m = make(map[string]*store.StoredTask)
		c.runs[run] = m
	}
	if _, ok := m[key]; !ok {
		m[key] = t
		c.count++
	}
}

// head returns the payload of run's head, if the cache holds it.
func (c *doneCache) head(run string) (headPayload, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hp, ok := c.heads[run]
	return hp, ok
}

// putHead holds hp, the payload of run's head.
func (c *doneCache) putHead(run string, hp headPayload) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.room()
	if _, ok := c.heads[run]; !ok {
		c.heads[run] = hp
		c.count++
	}
}

// room makes the maps, or starts them again empty past doneCacheMax. c.mu held.
func (c *doneCache) room() {
	if c.runs == nil || c.count >= doneCacheMax {
		c.runs, c.heads, c.count = make(map[string]map[string]*store.StoredTask), make(map[string]headPayload), 0
	}
}

// forget drops what the cache holds of run: it ended, or its tasks may go.
func (c *doneCache) forget(run string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count -= len(c.runs[run])
	delete(c.runs, run)
	if _, ok := c.heads[run]; ok {
		c.count--
		delete(c.heads, run)
	}
}
