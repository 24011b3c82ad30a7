package flow

import (
	"strconv"
	"testing"

	"github.com/axsched/ax/store"
)

// TestDoneCache: only succeeded stages and shards are held, under their own keys,
// and a run's head payload; forget drops a run; past doneCacheMax the cache
// starts again empty.
func TestDoneCache(t *testing.T) {
	var c doneCache
	run := "r1"
	ok := func(key string) *store.StoredTask {
		return &store.StoredTask{UniqueKey: key, State: store.Succeeded}
	}
	c.put(run, stageKey(run, "a"), ok(stageKey(run, "a")))
	c.put(run, shardKey(run, "b", 3), ok(shardKey(run, "b", 3)))
	c.put(run, headKey(run), ok(headKey(run)))                                                            // a head ends more than once
	c.put(run, markKey(run), ok(markKey(run)))                                                            // a marker is read for itself
	c.put(run, stageKey(run, "c"), &store.StoredTask{UniqueKey: stageKey(run, "c"), State: store.Failed}) // a stage may be retried
	c.put(run, stageKey(run, "d"), ok(stageKey(run, "x")))                                                // not its key
	c.put("", stageKey(run, "e"), ok(stageKey(run, "e")))                                                 // no run
	for key, want := range map[string]bool{
		stageKey(run, "a"): true, shardKey(run, "b", 3): true, headKey(run): false, markKey(run): false,
		stageKey(run, "c"): false, stageKey(run, "d"): false, stageKey(run, "e"): false,
	} {
		if _, got := c.get(run, key); got != want {
			t.Errorf("get(%s) held = %v, want %v", key, got, want)
		}
	}
	if _, got := c.get("r2", stageKey(run, "a")); got {
		t.Error("another run's get found r1's task")
	}
	if _, got := c.head(run); got {
		t.Error("head() found a payload never put")
	}
	c.putHead(run, headPayload{Run: run, Input: []byte("in")})
	c.putHead(run, headPayload{Run: run, Input: []byte("again")})
	if hp, got := c.head(run); !got || string(hp.Input) != "in" || c.count != 3 {
		t.Errorf("head() = %q, %v with count %d; want the first payload, held, count 3", hp.Input, got, c.count)
	}
	c.forget(run)
	if _, got := c.get(run, stageKey(run, "a")); got || c.count != 0 {
		t.Errorf("after forget: held %v, count %d; want nothing", got, c.count)
	}
	if _, got := c.head(run); got {
		t.Error("after forget: the head's payload held")
	}
	for i := range doneCacheMax {
		r := "run" + strconv.Itoa(i%100)
		c.put(r, shardKey(r, "s", i), ok(shardKey(r, "s", i)))
	}
	if c.count != doneCacheMax {
		t.Fatalf("count = %d, want %d", c.count, doneCacheMax)
	}
	c.put("new", stageKey("new", "a"), ok(stageKey("new", "a")))
	if _, got := c.get("run0", shardKey("run0", "s", 0)); got || c.count != 1 {
		t.Errorf("past the cap: old task held %v, count %d; want the cache started again with 1", got, c.count)
	}
}
