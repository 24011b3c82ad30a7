package flow

import (
	"sync"

	"github.com/axsched/ax/store"
)

// doneCacheMax is how many stored tasks a doneCache holds at most: past it, it
// starts again empty.
const doneCacheMax = 1 << 14

// doneCache holds the stored tasks of runs' stages and shards whose success the
// store showed, by their keys. A task that succeeded under its key stays so for
// as long as the run lasts (the key refuses another task, and the run is read
// only while its head is kept), so the reconciler and the stage tasks read from
// the store only the tasks that have not succeeded yet: a sharded stage's shards
// are read back once each, not at every pass. Heads and cancel markers are not
// held. Safe for concurrent use; the tasks it holds are shared and read-only.
type doneCache struct {
	mu    sync.Mutex
	runs  map[string]map[string]*store.StoredTask // run -> key -> task
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
	if c.runs == nil || c.count >= doneCacheMax {
		c.runs, c.count = make(map[string]map[string]*store.StoredTask), 0
	}
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

// forget drops what the cache holds of run: it ended, or its tasks may go.
func (c *doneCache) forget(run string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count -= len(c.runs[run])
	delete(c.runs, run)
}
